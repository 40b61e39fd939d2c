"""`manage.py jobs workflow show|cancel`, `jobs list --workflow`, and `jobs show`
of a waiting step: what an operator reads of a workflow at a shell and how its
cancel is confirmed (`jobs.cli.workflow`, over `jobs.workflows.operator`).

The workflows are enqueued through the public API, then moved on by writing
their rows as a runner would have, so that every state is on the page at once.
"""

from __future__ import annotations

import io
import json
import uuid
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from jobs import JobSpec, Workflow
from jobs.models import Dependency, Job, State
from tests.jobapp.models import Abandonment

pytestmark = pytest.mark.django_db

FLOW = "test.flow"


def jobs(*args: str) -> tuple[int, str]:
    """Run `manage.py jobs ARGS` in-process: its exit status and what it printed."""
    out = io.StringIO()
    try:
        call_command("jobs", *args, stdout=out)
    except SystemExit as stop:
        return int(stop.code or 0), out.getvalue()
    return 0, out.getvalue()


def refused(*args: str) -> CommandError:
    """Run `manage.py jobs ARGS`, which must refuse, printing nothing; the refusal."""
    out = io.StringIO()
    with pytest.raises(CommandError) as refusal:
        call_command("jobs", *args, stdout=out)
    assert out.getvalue() == "", "nothing is written before a refusal"
    return refusal.value


def step(key: str) -> JobSpec:
    return JobSpec.now(FLOW, key)


def row(key: str) -> Job:
    return Job.objects.get(key=key)


def settle(key: str, state: str, **fields: object) -> None:
    """Write `key`'s row and its edges' outcome as its final settle would have."""
    now = timezone.now()
    values = {"state": state, "attempts": 1, "finished_at": now, **fields}
    Job.objects.filter(key=key).update(**values)
    Dependency.objects.filter(depends_on_id=row(key).id).update(outcome=state)


def release(key: str) -> None:
    Job.objects.filter(key=key).update(state=State.QUEUED, run_at=timezone.now())


def partly_run(name: str = "nightly") -> uuid.UUID:
    """first done (2 s), left failed, right queued, join (when settled) waiting
    for right; a settled step on the side."""
    flow = Workflow(name)
    first = flow.add(step("first"), name="first")
    left = flow.add(step("left"), after=[first], name="left")
    right = flow.add(step("right"), after=[first], name="right")
    flow.add(step("join"), after=[left, right], when="settled", name="join")
    workflow_id = flow.enqueue()
    assert workflow_id is not None
    now = timezone.now()
    settle("first", State.DONE, started_at=now - timedelta(seconds=2), result={"rows": 42})
    release("left")
    release("right")
    settle(
        "left",
        State.FAILED,
        started_at=now,
        last_error="Traceback (most recent call last):\n  File x\nValueError: boom",
    )
    return workflow_id


# --- show -------------------------------------------------------------------------


def test_show_lists_each_step_in_run_order_with_its_state_attempts_time_and_what_it_waits_for():
    workflow_id = partly_run()
    status, output = jobs("workflow", "show", str(workflow_id))
    assert status == 0
    lines = output.splitlines()
    assert lines[0] == "workflow: nightly"
    assert lines[1] == f"id:       {workflow_id}"
    assert lines[3] == "deadline: -"
    assert lines[4] == "steps:    4 (1 queued, 1 done, 1 failed, 1 waiting); not all settled"
    table = lines[6:]
    assert table[0].split() == ["STEP", "JOB", "STATE", "ATTEMPTS", "TOOK", "QUEUE", "WHEN"]
    first, result, left, error, waits_left, right, waits_right, join, waits_join = table[1:]
    assert first.split()[:6] == ["first", str(row("first").id)[:8], "done", "1/5", "2s", "default"]
    assert result == '    result:    {"rows": 42}'
    assert left.split()[2] == "failed"
    assert error == "    error:     ValueError: boom", "the telling line, not the traceback"
    assert waits_left == "    waits for: first (done)"
    assert right.split()[2] == "queued"
    assert waits_right == "    waits for: first (done)"
    assert join.split()[2] == "waiting"
    assert join.endswith("waiting for 1 of 2 dependencies")
    assert waits_join == "    waits for: left (failed), right (queued)"
    assert "9999" not in output, "a waiting step's parked run_at is never shown"


def test_show_as_json_gives_every_step_in_run_order_its_dependencies_by_id_and_no_parked_date():
    workflow_id = partly_run()
    status, output = jobs("workflow", "show", str(workflow_id), "--json")
    assert status == 0
    data = json.loads(output)
    assert (data["id"], data["name"], data["settled"]) == (str(workflow_id), "nightly", False)
    assert data["counts"] == {"queued": 1, "done": 1, "failed": 1, "waiting": 1}
    assert [s["name"] for s in data["steps"]] == ["first", "left", "right", "join"]
    first, left, right, join = data["steps"]
    assert first["result_line"] == '{"rows": 42}'
    assert first["duration"] == pytest.approx(2, abs=0.1)
    assert join["waits_for"] == [left["job_id"], right["job_id"]]
    assert join["outcome_by_dependency"] == {left["job_id"]: "failed", right["job_id"]: None}
    assert first["waited_by"] == [left["job_id"], right["job_id"]]
    assert join["run_at"] is None, "a waiting step's parked run_at is never shown"
    assert join["due_at"] is not None


def test_show_takes_a_prefix_of_the_workflows_id_or_any_of_its_steps_ids():
    workflow_id = partly_run()
    expected = jobs("workflow", "show", str(workflow_id))
    assert jobs("workflow", "show", str(workflow_id)[:8]) == expected
    assert jobs("workflow", "show", str(row("join").id)) == expected
    assert jobs("workflow", "show", str(row("join").id)[:13]) == expected


def test_an_unknown_or_ambiguous_id_is_refused_with_exit_status_2_writing_nothing():
    missing = refused("workflow", "show", str(uuid.uuid4()))
    assert missing.returncode == 2
    assert "No workflow, nor any step of one, has the id" in str(missing)
    for n in (1, 2):
        flow = Workflow(f"twin {n}")
        flow.id = uuid.UUID(f"abcdef01-0000-4000-8000-00000000000{n}")
        flow.add(step(f"twin-{n}"))
        flow.enqueue()
    ambiguous = refused("workflow", "cancel", "abcdef01", "--yes")
    assert ambiguous.returncode == 2
    assert "begins several workflows' ids; give more of its digits" in str(ambiguous)
    assert set(Job.objects.values_list("state", flat=True)) == {State.QUEUED}, "nothing cancelled"
    assert refused("workflow", "show", "not-an-id").returncode == 2


def test_show_escapes_what_a_terminal_would_obey_in_names_results_and_errors():
    flow = Workflow("evil\x1b[2J\nname")
    flow.add(step("a"), name="step\rname")
    workflow_id = flow.enqueue()
    assert workflow_id is not None
    settle("a", State.FAILED, last_error="bad \x1b]0;title\x07 news")
    status, output = jobs("workflow", "show", str(workflow_id))
    assert status == 0
    assert "\x1b" not in output
    assert "\r" not in output
    assert "workflow: evil\\x1b[2J\\nname" in output
    assert "step\\rname" in output
    assert "error:     bad \\x1b]0;title\\x07 news" in output


# --- cancel -----------------------------------------------------------------------


@pytest.fixture
def no_terminal(monkeypatch):
    """stdin is a pipe, as in a script or cron."""
    monkeypatch.setattr("sys.stdin", io.StringIO(""))


def test_cancel_without_yes_in_a_script_is_refused_and_cancels_nothing(no_terminal):
    workflow_id = partly_run()
    before = dict(Job.objects.values_list("key", "state"))
    with pytest.raises(CommandError, match=r"stdin is not a terminal .* add --yes"):
        jobs("workflow", "cancel", str(workflow_id))
    assert dict(Job.objects.values_list("key", "state")) == before


def test_cancel_asks_with_the_number_at_a_terminal(monkeypatch):
    workflow_id = partly_run()
    asked: list[str] = []
    monkeypatch.setattr("sys.stdin.isatty", lambda: True, raising=False)

    def answer(question: str) -> str:
        asked.append(question)
        return "n"

    monkeypatch.setattr("builtins.input", answer)
    status, said = jobs("workflow", "cancel", str(workflow_id))
    assert asked == ["Cancel these 2 steps? [y/N] "]
    assert status == 1
    assert said.splitlines()[-1] == "Nothing changed (confirm with --yes, or y at the prompt)."
    assert row("join").state == State.WAITING


def test_a_dry_run_says_the_number_and_changes_nothing():
    workflow_id = partly_run()
    status, said = jobs("workflow", "cancel", str(workflow_id), "--dry-run")
    assert (status, said.splitlines()) == (
        0,
        [
            f"Cancel 2 steps of workflow nightly ({workflow_id}): 1 queued, 1 waiting; "
            "2 settled, left as they are.",
            "Dry run: nothing changed.",
        ],
    )
    assert row("join").state == State.WAITING


@pytest.mark.django_db(transaction=True)
def test_cancel_with_yes_cancels_every_unsettled_step_once_and_reports_what_it_skipped():
    workflow_id = partly_run()
    status, said = jobs("workflow", "cancel", str(workflow_id)[:8], "--yes", "--by", "alice")
    assert status == 0, said
    assert said.splitlines()[-1] == (
        "Cancelled: 2 steps cancelled; skipped 1 (done, already settled), "
        "1 (failed, already settled)."
    )
    assert (row("right").state, row("join").state) == (State.CANCELLED, State.CANCELLED)
    assert row("join").last_error == "cancelled by alice, with its workflow"
    assert sorted(Abandonment.objects.values_list("key", flat=True)) == ["join", "right"]
    status, said = jobs("workflow", "cancel", str(workflow_id), "--yes")
    assert (status, said) == (
        0,
        f"Nothing to cancel: every step of workflow nightly ({workflow_id}) settled.\n",
    )


@pytest.mark.django_db(transaction=True)
def test_cancelling_a_running_step_says_what_the_cancel_did_not_do(configure):
    configure(hard_kill_after=45)
    workflow_id = partly_run()
    Job.objects.filter(key="right").update(state=State.RUNNING, attempts=1)
    status, said = jobs("workflow", "cancel", str(workflow_id), "--yes")
    assert status == 0, said
    count, before, report, after = said.splitlines()
    assert count.endswith(": 1 running, 1 waiting; 2 settled, left as they are.")
    assert before.startswith("1 of them is running. Cancelling does not stop a running handler")
    assert report.startswith("Cancelled: 2 steps cancelled (1 of them running: the attempt runs on")
    assert after.startswith("1 of them was running.")
    assert "45 s past its budget (hard_kill_after)" in after


# --- list --workflow, and show of a waiting step ----------------------------------


def test_list_by_workflow_lists_only_its_steps():
    workflow_id = partly_run()
    other = Workflow("other")
    other.add(step("elsewhere"))
    other.enqueue()
    status, output = jobs("list", "--workflow", str(workflow_id)[:8])
    assert status == 0
    keys = {line.split()[3] for line in output.splitlines()[1:]}
    assert keys == {"first", "left", "right", "join"}
    assert refused("list", "--workflow", str(uuid.uuid4())).returncode == 2


def test_show_of_a_waiting_step_says_what_it_waits_for_instead_of_its_parked_run_at():
    partly_run()
    status, output = jobs("show", str(row("join").id))
    assert status == 0
    assert "9999" not in output
    lines = output.splitlines()
    assert "run_at:           - (not due while it waits: see waiting, below)" in lines
    assert "waiting:          its workflow's dependencies (1 of 2 not settled: right)" in lines
    data = json.loads(jobs("show", str(row("join").id), "--json")[1])
    assert data["run_at"] is None
    assert data["waiting"] == [{"reason": "dependencies", "detail": "1 of 2 not settled: right"}]


def test_cancels_help_names_waiting_jobs(capsys):
    with pytest.raises(SystemExit):
        call_command("jobs", "cancel", "--help")
    assert "Retire waiting, queued or running jobs" in " ".join(capsys.readouterr().out.split())
