"""`manage.py jobs retry|cancel|run-now` by filter, `jobs dead` and `jobs redrive`:
the count said first, confirmed by `--yes` or at the prompt, refused in a
script without either, bad filters refused writing nothing."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from functools import partial

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone
from freezegun import freeze_time

from jobs import bulk
from jobs.cli import by_filter
from jobs.models import Job, State
from tests import factories

pytestmark = pytest.mark.django_db

KIND = "orders.relay"

make_job = partial(factories.make_job, kind=KIND, leased=False)


def failed(key: str, error: str = "gave up after 5 of 5 attempts: HTTPError: 503", **fields):
    return make_job(key, State.FAILED, attempts=5, last_error=error, **fields)


def jobs(*args: str) -> tuple[int, str]:
    """Run `manage.py jobs ARGS` in-process: its exit status and what it printed."""
    out = io.StringIO()
    try:
        call_command("jobs", *args, stdout=out)
    except SystemExit as stop:
        return int(stop.code or 0), out.getvalue()
    return 0, out.getvalue()


def states(*rows: Job) -> list[str]:
    return [Job.objects.get(id=row.id).state for row in rows]


@pytest.fixture
def no_terminal(monkeypatch):
    """stdin is a pipe, as in a script or cron."""
    monkeypatch.setattr("sys.stdin", io.StringIO(""))


def test_a_dry_run_prints_the_count_and_what_it_would_skip_and_writes_nothing():
    rows = [failed(f"f{n}") for n in range(3)]
    failed("other", kind="other.kind")
    status, said = jobs("retry", "--kind", KIND, "--state", "failed", "--dry-run")
    assert (status, said) == (
        0,
        f"Retry 3 jobs matching kind {KIND}, state failed.\nDry run: nothing changed.\n",
    )
    assert states(*rows) == ["failed"] * 3


@freeze_time("2026-03-01 12:00:00")
def test_retry_by_filter_with_yes_retries_every_match_and_reports_what_it_did():
    recent = [failed(f"f{n}") for n in range(3)]
    old = failed("old")
    Job.objects.filter(id=old.id).update(updated_at=timezone.now() - timedelta(hours=3))
    other_error = failed("e", "gave up after 5 of 5 attempts: HTTPError: 404")
    status, said = jobs(
        "retry", "--kind", KIND, "--since", "2h", "--error-contains", "503", "--yes"
    )
    assert status == 0, said
    assert said.splitlines() == [
        f"Retry 3 jobs matching kind {KIND}, state failed or cancelled, changed in the last "
        "2h, error containing '503'.",
        "Retry: 3 queued again with a fresh attempt budget.",
    ]
    assert states(*recent) == ["queued"] * 3
    assert states(old, other_error) == ["failed", "failed"]


def test_without_yes_in_a_script_the_action_is_refused_saying_how_and_writes_nothing(no_terminal):
    rows = [failed(f"f{n}") for n in range(2)]
    with pytest.raises(CommandError, match=r"stdin is not a terminal .* add --yes"):
        jobs("retry", "--kind", KIND)
    assert states(*rows) == ["failed"] * 2


def test_at_a_terminal_the_operator_confirms_with_the_number(monkeypatch):
    rows = [failed(f"f{n}") for n in range(2)]
    asked: list[str] = []
    monkeypatch.setattr("sys.stdin.isatty", lambda: True, raising=False)
    answers = iter(["n", "y"])

    def answer(question: str) -> str:
        asked.append(question)
        return next(answers)

    monkeypatch.setattr("builtins.input", answer)
    status, said = jobs("retry", "--kind", KIND)
    assert (status, states(*rows)) == (1, ["failed", "failed"]), "'n' changes nothing"
    assert "Nothing changed (confirm with --yes, or y at the prompt)." in said
    status, said = jobs("retry", "--kind", KIND)
    assert asked == ["Retry these 2 jobs? [y/N] "] * 2
    assert (status, states(*rows)) == (0, ["queued", "queued"]), "'y' acts"


@pytest.mark.parametrize(
    ("args", "refusal"),
    [
        (["--since", "2 hours"], "argument --since: must be a number and a unit"),
        (["--since=-1h"], "argument --since: must be a number and a unit"),
        (["--since", "0m"], "argument --since: must be more than nothing"),
        (["--state", "done"], "argument --state: invalid choice: 'done'"),
        (["--kind", ""], "argument --kind: kind must be a non-empty string"),
        (["--queue", "bad name"], "argument --queue:"),
        (["--error-contains", ""], "argument --error-contains: must be 1 to 1,000"),
        (["--max", "0", "--kind", KIND], "argument --max: must be a whole number"),
    ],
)
def test_a_bad_filter_is_refused_with_a_sentence_writing_nothing(args, refusal):
    row = failed("f")
    with pytest.raises(CommandError, match=refusal):
        jobs("retry", *args, "--yes")
    assert states(row) == ["failed"]


def test_ids_and_a_filter_together_are_refused_and_so_is_neither():
    row = failed("f")
    with pytest.raises(CommandError, match=r"give job IDs or a filter .*not both"):
        jobs("retry", str(row.id), "--kind", KIND)
    with pytest.raises(CommandError, match="give job IDs, or a filter"):
        jobs("retry")
    with pytest.raises(CommandError, match="give job IDs or --schedule NAME, or a filter"):
        jobs("run-now")
    with pytest.raises(CommandError, match="--dry-run go with a filter"):
        jobs("retry", str(row.id), "--dry-run")
    assert states(row) == ["failed"]


def test_retry_by_id_is_as_before():
    row = failed("f")
    assert jobs("retry", str(row.id)) == (0, "1 touched\n")


def test_more_jobs_than_max_are_refused_before_anything_is_written():
    rows = [failed(f"f{n}") for n in range(3)]
    with pytest.raises(CommandError, match=r"3 jobs match .* more than the 2 one action may touch"):
        jobs("retry", "--kind", KIND, "--max", "2", "--yes")
    assert states(*rows) == ["failed"] * 3
    assert jobs("retry", "--kind", KIND, "--max", "3", "--yes")[0] == 0


def test_the_default_cap_is_the_bulk_cap(monkeypatch):
    monkeypatch.setattr(bulk, "CAP", 1)
    rows = [failed(f"f{n}") for n in range(2)]
    with pytest.raises(CommandError, match="more than the 1 one action may touch"):
        jobs("retry", "--kind", KIND, "--yes")
    assert states(*rows) == ["failed"] * 2


def test_a_skipped_job_is_reported_with_why_and_exits_1():
    failed("same")
    make_job("same")  # a live job holds the identity
    failed("free")
    status, said = jobs("retry", "--kind", KIND, "--yes")
    assert status == 1
    assert said.splitlines()[-1] == (
        "Retry: 1 queued again with a fresh attempt budget; skipped 1 (a live job already "
        "holds its kind and key)."
    )


def test_cancel_and_run_now_by_filter_act_on_their_own_states():
    queued = make_job("q", run_at=timezone.now() + timedelta(hours=1))
    status, said = jobs("run-now", "--kind", KIND, "--yes")
    assert (status, said.splitlines()[-1]) == (0, "Run now: 1 made due now.")
    status, said = jobs("cancel", "--kind", KIND, "--by", "alice", "--yes")
    assert (status, said.splitlines()[-1]) == (0, "Cancel: 1 cancelled.")
    row = Job.objects.get(id=queued.id)
    assert (row.state, row.last_error) == (State.CANCELLED, "cancelled by alice")


# -- dead letters ----------------------------------------------------------------


def test_dead_lists_the_groups_with_counts_and_first_and_last_seen():
    with freeze_time("2026-03-01 10:00:00"):
        failed("a")
    with freeze_time("2026-03-01 11:00:00"):
        failed("b")
        make_job("c", State.CANCELLED, last_error="cancelled by alice")
    status, said = jobs("dead")
    assert status == 0
    assert said.splitlines() == [
        "KIND          JOBS  FAILED  CANCELLED  FIRST SEEN               LAST SEEN"
        "                ERROR",
        f"{KIND}  2     2       0          2026-03-01 10:00:00 UTC  2026-03-01 11:00:00 UTC"
        "  HTTPError: 503",
        f"{KIND}  1     0       1          2026-03-01 11:00:00 UTC  2026-03-01 11:00:00 UTC"
        "  cancelled by alice",
        "Retry a group: jobs redrive --kind KIND --error 'ERROR' [--attempts N]",
    ]
    assert jobs("dead", "--kind", "no.such") == (
        0,
        "No dead letters: no failed or cancelled jobs of that kind.\n",
    )


def test_redrive_retries_the_group_with_a_new_budget_after_the_count():
    group = [failed(f"f{n}") for n in range(2)]
    other = failed("o", "gave up after 5 of 5 attempts: HTTPError: 404")
    status, said = jobs("redrive", "--kind", KIND, "--error", "HTTPError: 503", "--dry-run")
    assert (status, states(*group)) == (0, ["failed", "failed"])
    assert said.startswith(f"Retry 2 jobs matching kind {KIND}, error 'HTTPError: 503'.")
    status, said = jobs(
        "redrive", "--kind", KIND, "--error", "HTTPError: 503", "--attempts", "2", "--yes"
    )
    assert status == 0, said
    assert states(*group, other) == ["queued", "queued", "failed"]
    assert {j.max_attempts for j in Job.objects.filter(state=State.QUEUED)} == {2}


@pytest.mark.parametrize(
    ("args", "refusal"),
    [
        (["--error", "x"], "the following arguments are required: --kind"),
        (["--kind", KIND], "the following arguments are required: --error"),
        (["--kind", KIND, "--error", "x", "--attempts", "0"], "argument --attempts: must be"),
        (["--kind", KIND, "--error", "x", "--attempts", "lots"], "argument --attempts: must be"),
    ],
)
def test_redrive_refuses_bad_arguments_writing_nothing(args, refusal):
    row = failed("f")
    with pytest.raises(CommandError, match=refusal):
        jobs("redrive", *args, "--yes")
    assert states(row) == ["failed"]


def test_the_bulk_steps_are_callable_without_the_command():
    """For a script: `by_filter.act` takes a selection and an answer function."""
    row = failed("f")
    lines: list[str] = []
    options = {"max": None, "dry_run": False, "yes": False}
    chosen = bulk.Selection(Job.objects.filter(kind=KIND), said=f"kind {KIND}")
    status = by_filter.act(lines.append, chosen, bulk.RETRY, options, by="t", ask=lambda q: True)
    assert (status, states(row)) == (0, ["queued"])


def test_dead_json_gives_every_group_for_scripts_and_limit_says_what_it_left_out():
    with freeze_time("2026-03-01 10:00:00"):
        failed("a")
    with freeze_time("2026-03-01 11:00:00"):
        make_job("c", State.CANCELLED, last_error="cancelled by alice")
    status, said = jobs("dead", "--json")
    assert status == 0
    assert json.loads(said) == [
        {
            "kind": KIND,
            "error": "cancelled by alice",
            "count": 1,
            "failed": 0,
            "cancelled": 1,
            "first_seen": "2026-03-01T11:00:00+00:00",
            "last_seen": "2026-03-01T11:00:00+00:00",
        },
        {
            "kind": KIND,
            "error": "HTTPError: 503",
            "count": 1,
            "failed": 1,
            "cancelled": 0,
            "first_seen": "2026-03-01T10:00:00+00:00",
            "last_seen": "2026-03-01T10:00:00+00:00",
        },
    ], "as many jobs in each: the most recently seen first"
    status, said = jobs("dead", "--limit", "1")
    assert "(1 of 2 groups shown: raise --limit or give --kind)" in said


def test_an_unknown_kind_in_a_filter_is_warned_about_and_refused_with_strict():
    """As `pause` and `list` do (`jobs.cli.names`): a typo should not read as
    "0 jobs match" in silence."""
    row = failed("f", kind="no.such.kind")
    status, said = jobs("retry", "--kind", "no.such.kind", "--dry-run")
    assert said.splitlines()[0].startswith(
        "warning: no handler for kind 'no.such.kind' is registered in this project"
    )
    assert status == 0
    with pytest.raises(CommandError, match=r"Unknown kind: .* \(--strict\)\. Nothing was changed"):
        jobs("retry", "--kind", "no.such.kind", "--strict", "--yes")
    with pytest.raises(CommandError, match=r"Unknown kind: .*--strict"):
        jobs("redrive", "--kind", "no.such.kind", "--error", "HTTPError: 503", "--strict", "--yes")
    assert states(row) == ["failed"]
