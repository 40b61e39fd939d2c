"""The jobs admin: a list that says what is wrong at a glance (its badges, filters,
search and count), a read-only detail, and actions that go through
`jobs.operations`. Runners and the dashboard are test_dashboard.py; who is turned
away, test_admin_refusals.py.
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.db import connection
from django.db.models import DateTimeField, Field
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

import jobs.admin.large_table
from jobs import history
from jobs.models import Job, State
from jobs.store import for_database
from jobs.store.admission import Admission
from tests.factories import RECORDED, make_job
from tests.integration.admin.support import act, changelist, make_runner, messages_of, rows
from tests.jobapp.models import Abandonment

pytestmark = pytest.mark.django_db

SCRIPT = "<script>alert(1)</script>"


def listed_keys(page: str) -> set[str]:
    """The keys the job list shows, read from the links to each job's page."""
    return set(re.findall(r'<th class="field-key_shown"><a href="[^"]+">([^<]*)</a>', page))


def row_of(page: str, key: str) -> str:
    """The job list's row for the job with `key`."""
    for row in rows(page):
        if '<th class="field-key_shown"><a' in row and f">{escape(key)}</a>" in row:
            return row
    raise AssertionError(f"no row for {key!r} in the list")


def reload(job: Job) -> Job:
    return Job.objects.get(id=job.id)


# -- the list -----------------------------------------------------------------


def test_the_list_shows_each_state_as_a_coloured_badge(admin_client):
    for state in State:
        make_job(f"k-{state.value}", state=state.value)
    page = changelist(admin_client)
    for state in State:
        assert f'class="jobs-badge jobs-badge-{state.value}">{state.value}</span>' in row_of(
            page, f"k-{state.value}"
        ), f"a {state.value} job is shown with its own badge"


def test_the_list_says_when_each_job_runs_next_in_relative_words(admin_client):
    now = timezone.now()
    make_job("later", run_at=now + timedelta(minutes=3, seconds=30))
    make_job("late", run_at=now - timedelta(hours=2, minutes=5))
    make_job("expired", state=State.RUNNING, lease_expires_at=now - timedelta(minutes=4, seconds=5))
    make_job("settled", state=State.DONE)
    page = changelist(admin_client)
    assert ">in 3 min<" in row_of(page, "later"), "a queued job due later says when"
    assert ">overdue 2 h<" in row_of(page, "late"), "a queued job past its run_at says by how much"
    assert ">lease expired 4 min ago<" in row_of(page, "expired"), (
        "a running job whose lease ran out says so"
    )
    assert ">—<" in row_of(page, "settled"), "a settled job never runs again"


def test_a_running_job_whose_runner_is_gone_shows_runner_gone_at_once_in_the_next_run_column(
    admin_client,
):
    gone = make_runner("gone-host", ["a"], silent_for=timedelta(minutes=1))
    live = make_runner("live-host", ["a"])
    make_job("orphan", state=State.RUNNING, claimed_by=gone.name)
    make_job("held", state=State.RUNNING, claimed_by=live.name)
    page = changelist(admin_client)
    orphan = row_of(page, "orphan")
    assert 'jobs-badge-gone">runner gone<' in orphan, "its runner stopped reporting: said at once"
    assert ">lease ends" not in orphan, "not a lease that still reads as healthy"
    assert re.search(r">lease ends in \d min<", row_of(page, "held")), (
        "a live runner's job shows its lease"
    )


def test_the_list_shows_which_runner_claimed_each_job(admin_client):
    runner = make_runner("worker-7", ["a"])
    make_job("held", state=State.RUNNING, claimed_by=runner.name)
    make_job("waiting")
    page = changelist(admin_client)
    assert re.search(rf'class="field-claimed_by_shown">{runner.name}<', row_of(page, "held"))
    assert 'class="field-claimed_by_shown">—<' in row_of(page, "waiting"), (
        "an unclaimed job: a dash"
    )


def runner_reads(client: Client) -> int:
    """How many times drawing the job list asked which runners are live."""
    with CaptureQueriesContext(connection) as queries:
        changelist(client)
    return sum(
        1 for q in queries if "jobs_runnerprocess" in q["sql"] and "heartbeat_at" in q["sql"]
    )


def test_the_list_reads_the_runners_once_per_page_not_once_per_row(admin_client):
    runner = make_runner("gone-host", ["a"], silent_for=timedelta(minutes=1))
    make_job("first", state=State.RUNNING, claimed_by=runner.name)
    assert runner_reads(admin_client) == 1
    for n in range(5):
        make_job(f"more-{n}", state=State.RUNNING, claimed_by=runner.name)
    assert runner_reads(admin_client) == 1, "six running rows, still one read of the runners"


def test_the_list_shows_the_line_of_the_error_that_says_what_happened(admin_client):
    make_job("reason", state=State.FAILED, last_error="HTTP 503 from upstream\nbody: try later")
    make_job(
        "traceback",
        state=State.QUEUED,
        attempts=1,
        last_error=(
            "Traceback (most recent call last):\n"
            '  File "x.py", line 1, in run\n'
            "ConnectionError: connection refused"
        ),
    )
    page = changelist(admin_client)
    reason = row_of(page, "reason")
    assert ">HTTP 503 from upstream<" in reason, "a reason's first line is shown"
    assert "try later" not in reason, "only one line of the error fits a list"
    traceback = row_of(page, "traceback")
    assert ">ConnectionError: connection refused<" in traceback, (
        "a traceback shows its exception line, not 'Traceback (most recent call last):'"
    )


def test_a_long_error_line_is_truncated_in_the_list(admin_client):
    line = "x" * 300
    make_job("long", state=State.FAILED, last_error=line)
    row = row_of(changelist(admin_client), "long")
    assert f">{'x' * 79}…<" in row, "the visible error is cut to one short line"


def test_the_list_is_newest_first(admin_client):
    old = make_job("old")
    make_job("new")
    Job.objects.filter(id=old.id).update(created_at=timezone.now() - timedelta(days=1))
    page = changelist(admin_client)
    assert page.index(">new</a>") < page.index(">old</a>"), "the newest job comes first"


def test_the_date_drill_down_offers_each_month_between_the_first_and_last_job(admin_client):
    march = make_job("march")
    april = make_job("april")
    Job.objects.filter(id=march.id).update(created_at=datetime(2026, 3, 30, 12, tzinfo=UTC))
    Job.objects.filter(id=april.id).update(created_at=datetime(2026, 4, 2, 12, tzinfo=UTC))
    with CaptureQueriesContext(connection) as queries:
        page = changelist(admin_client)
    assert ">March 2026</a>" in page, "the drill-down offers the first job's month"
    assert ">April 2026</a>" in page, "and the last job's"
    scans = [q["sql"] for q in queries if "DISTINCT" in q["sql"] and "created_at" in q["sql"]]
    assert not scans, "the drill-down never asks for the distinct months of every row"
    days = changelist(admin_client, created_at__year="2026", created_at__month="3")
    assert ">March 30</a>" in days, "within a month it offers the days"
    assert listed_keys(days) == {"march"}


# -- filters ------------------------------------------------------------------


def test_the_state_filter_shows_only_that_state(admin_client):
    make_job("q")
    make_job("f", state=State.FAILED)
    assert listed_keys(changelist(admin_client, state__exact="failed")) == {"f"}


def test_the_kind_filter_shows_only_that_kind(admin_client):
    make_job("a", kind="orders.ship")
    make_job("b", kind="mail.send")
    page = changelist(admin_client, kind="orders.ship")
    assert listed_keys(page) == {"a"}


def test_the_kind_filter_offers_kinds_from_handlers_runners_and_live_jobs(admin_client):
    make_job("live", kind="live.kind")
    make_runner("host", ["runner.kind"])
    page = changelist(admin_client)
    for kind in ("live.kind", "runner.kind", RECORDED):
        assert f"?kind={kind}" in page, f"the kind filter offers {kind}"


def test_the_has_error_filter_shows_only_jobs_with_an_error(admin_client):
    make_job("clean", state=State.DONE)
    make_job("broken", state=State.FAILED, last_error="boom")
    make_job("retrying", attempts=1, last_error="503")
    assert listed_keys(changelist(admin_client, has_error="yes")) == {"broken", "retrying"}


def test_the_lease_expired_filter_shows_only_running_jobs_whose_lease_ran_out(admin_client):
    now = timezone.now()
    make_job("stale", state=State.RUNNING, lease_expires_at=now - timedelta(seconds=30))
    make_job("fresh", state=State.RUNNING, lease_expires_at=now + timedelta(minutes=5))
    make_job("queued", run_at=now - timedelta(hours=1))
    assert listed_keys(changelist(admin_client, lease="expired")) == {"stale"}


def test_the_stuck_filter_shows_running_jobs_whose_runner_is_gone_or_lease_expired(
    admin_client,
):
    now = timezone.now()
    gone = make_runner("gone-host", ["a"], silent_for=timedelta(minutes=1))
    live = make_runner("live-host", ["a"])
    make_job("orphan", state=State.RUNNING, claimed_by=gone.name)
    make_job("expired", state=State.RUNNING, claimed_by=live.name, lease_expires_at=now)
    make_job("held", state=State.RUNNING, claimed_by=live.name)
    make_job("queued", run_at=now - timedelta(hours=1))
    make_job("settled", state=State.FAILED, claimed_by=gone.name)
    page = changelist(admin_client, stuck="yes")
    assert listed_keys(page) == {"orphan", "expired"}
    assert "stuck: runner gone or lease expired" in changelist(admin_client), "offered by name"


def test_the_waiting_for_a_handler_filter_shows_live_jobs_no_live_runner_can_run(admin_client):
    make_runner("alive", ["handled"])
    make_runner("dead", ["only.dead"], silent_for=timedelta(minutes=10))
    make_job("handled-1", kind="handled")
    make_job("dead-1", kind="only.dead")
    make_job("nobody-1", kind="nobody", state=State.RUNNING)
    make_job("nobody-settled", kind="nobody", state=State.FAILED)
    assert listed_keys(changelist(admin_client, handler="missing")) == {"dead-1", "nobody-1"}, (
        "live jobs of kinds only a gone runner or no runner has are waiting; settled ones are not"
    )


# -- search -------------------------------------------------------------------


def test_search_finds_jobs_by_key(admin_client):
    make_job("order-1234")
    make_job("invoice-9")
    assert listed_keys(changelist(admin_client, q="order-12")) == {"order-1234"}


def test_search_finds_a_job_by_its_id(admin_client):
    wanted = make_job("wanted")
    make_job("other")
    assert listed_keys(changelist(admin_client, q=str(wanted.id))) == {"wanted"}
    assert listed_keys(changelist(admin_client, q=wanted.id.hex.upper())) == {"wanted"}, (
        "any spelling of the UUID finds it"
    )


def test_search_finds_jobs_by_a_prefix_of_their_id_as_the_jobs_command_takes_it(admin_client):
    """The same spellings as `manage.py jobs show`: 8 or more hex digits, hyphens anywhere."""
    make_job("first", id=uuid.UUID("3f00a956-1c2d-4e5f-8a9b-0123456789ab"))
    make_job("second", id=uuid.UUID("3f00a956-ffff-4e5f-8a9b-0123456789ab"))
    make_job("next", id=uuid.UUID("3f00a957-0000-4000-8000-000000000000"))
    make_job("inside", id=uuid.UUID("00000000-0000-4000-8000-3f00a9560000"))

    assert listed_keys(changelist(admin_client, q="3f00a956")) == {"first", "second"}
    assert listed_keys(changelist(admin_client, q="3F00A956-1C2D")) == {"first"}
    assert listed_keys(changelist(admin_client, q="3f00a9561c2d4e5f")) == {"first"}
    assert listed_keys(changelist(admin_client, q="3f00a95")) == set(), (
        "seven digits are too few to be taken for an id"
    )


def test_search_by_an_id_prefix_still_finds_keys_holding_the_term(admin_client):
    make_job("build-deadbeef")
    wanted = make_job("other", id=uuid.UUID("deadbeef-0000-4000-8000-000000000000"))

    assert listed_keys(changelist(admin_client, q="deadbeef")) == {"build-deadbeef", wanted.key}


# -- the detail ---------------------------------------------------------------


def detail(client: Client, job: Job) -> str:
    response = client.get(reverse("admin:jobs_job_change", args=[job.id]))
    assert response.status_code == 200
    return response.content.decode()


def test_the_detail_shows_the_payload_as_pretty_json(admin_client):
    payload = {"order": {"id": 7, "lines": [1, 2]}, "a": "b"}
    page = detail(admin_client, make_job("k", payload=payload))
    pretty = escape(json.dumps(payload, indent=2, sort_keys=True))
    assert f'<pre class="jobs-pre">{pretty}</pre>' in page, "the payload is indented JSON"


def test_the_detail_shows_the_whole_last_error_in_a_monospace_block(admin_client):
    error = 'Traceback (most recent call last):\n  File "x.py", line 1\nValueError: no'
    page = detail(admin_client, make_job("k", state=State.FAILED, last_error=error))
    assert f'<pre class="jobs-pre jobs-error-block">{escape(error)}</pre>' in page, (
        "every line of the error is shown"
    )


#: The model's fields the job page shows through a display method of its own.
SHOWN_AS = {
    "payload": "payload_json",
    "last_error": "last_error_text",
    "state": "state_badge",
    "result": "result_json",
    "errors": "attempt_history_table",
    "claimed_by": "claimed_by_holder",
    "kind": "kind_shown",
    "key": "whole_key",
    "workflow_id": "workflow_link",
}


def shown_as(field: Field[Any, Any]) -> str:
    """The name of the row (its `field-<name>` class) that shows `field` on a job's page:
    every time is shown to the second by its `<name>_shown` method."""
    if isinstance(field, DateTimeField):
        return f"{field.name}_shown"
    return SHOWN_AS.get(field.name, field.name)


def test_the_detail_shows_every_field(admin_client):
    job = make_job("k", state=State.RUNNING, deadline=timezone.now() + timedelta(days=1))
    page = detail(admin_client, job)
    for field in Job._meta.concrete_fields:
        if field.generated:
            continue  # `live` is the database's copy of the state, which is shown
        assert f'class="field-{shown_as(field)}"' in page, f"the detail shows {field.name}"


def field_row(page: str, name: str) -> str:
    """The job page's row for the display named `name`."""
    return next(row for row in rows(page) if f'class="field-{name}"' in row)


def test_the_job_page_shows_every_time_to_the_second_with_the_zone(admin_client, settings):
    settings.TIME_ZONE = "Asia/Tokyo"
    base = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
    times: dict[str, Any] = {
        field.name: base + timedelta(minutes=n, seconds=n)
        for n, field in enumerate(Job._meta.concrete_fields)
        if isinstance(field, DateTimeField)
    }
    job = make_job("k", state=State.RUNNING, **times)
    Job.objects.filter(id=job.id).update(**times)  # created_at and updated_at as given
    entry = history.record(
        attempt=1,
        started_at=base - timedelta(hours=1, seconds=13),
        ended_at=base - timedelta(minutes=59, seconds=1),
        runner="host:1",
        outcome=history.Outcome.RETRY,
        error="503",
    )
    Job.objects.filter(id=job.id).update(errors=history.appended([], entry))
    page = detail(admin_client, job)
    for name, moment in times.items():
        local = f"{moment.astimezone(ZoneInfo('Asia/Tokyo')):%Y-%m-%d %H:%M:%S} JST"
        assert f">{local}<" in field_row(page, f"{name}_shown"), f"{name} reads {local}"
    table = page.split('class="jobs-history"')[1]
    assert "<td>2026-03-04 13:05:54.000 JST</td>" in table, (
        "the attempt's start is to the millisecond, in the site's zone"
    )
    assert "<td>2026-03-04 13:07:06.000 JST</td>" in table, "so is its end"
    assert not re.search(r"\d [ap]\.m\.", page), "no time is left in Django's own format"


def test_a_payload_key_and_error_holding_markup_render_as_text(admin_client):
    job = make_job(SCRIPT, state=State.FAILED, payload={"html": SCRIPT}, last_error=SCRIPT)
    for page in (changelist(admin_client), detail(admin_client, job)):
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page, "the markup is shown as text"
        assert "<script>alert" not in page, "the markup never reaches the page as markup"


def test_the_detail_is_read_only_even_for_a_superuser(admin_client):
    job = make_job("k", state=State.FAILED, attempts=5)
    page = detail(admin_client, job)
    assert 'name="_save"' not in page, "there is no save button"
    url = reverse("admin:jobs_job_change", args=[job.id])
    response = admin_client.post(url, {"state": "queued", "attempts": 0, "_save": "Save"})
    assert response.status_code == 403, "a job is never edited by form"
    assert (reload(job).state, reload(job).attempts) == (State.FAILED, 5), "nothing was written"


def test_there_is_no_page_to_add_a_job(admin_client):
    assert admin_client.get(reverse("admin:jobs_job_add")).status_code == 403
    assert reverse("admin:jobs_job_add") not in changelist(admin_client), "no add link either"


def test_nobody_deletes_jobs_from_the_admin_not_even_a_superuser(admin_client):
    job = make_job("k", state=State.DONE)
    response = admin_client.post(reverse("admin:jobs_job_delete", args=[job.id]), {"post": "yes"})
    assert response.status_code == 403, "deleting would skip abandon; cancel and the sweep do it"
    assert 'value="delete_selected"' not in changelist(admin_client), "no bulk delete either"
    assert Job.objects.filter(id=job.id).exists()


# -- actions ------------------------------------------------------------------


def test_run_now_makes_queued_jobs_due_and_reports_what_it_skipped(admin_client):
    later = make_job("later", run_at=timezone.now() + timedelta(hours=1))
    done = make_job("done", state=State.DONE)
    before = timezone.now()
    response = act(admin_client, "run_now", later, done)
    assert before <= reload(later).run_at <= timezone.now(), "the queued job is due now"
    assert reload(done).state == State.DONE, "the settled job is untouched"
    assert messages_of(response) == [
        "Run now: 1 job made due now.",
        "Run now: skipped 1 job, nothing written for it: done, not queued (1).",
    ]


def test_retry_queues_a_failed_job_again_with_a_fresh_budget(admin_client):
    failed = make_job("k", state=State.FAILED, attempts=5, last_error="boom")
    response = act(admin_client, "retry", failed)
    row = reload(failed)
    assert (row.state, row.attempts, row.finished_at) == (State.QUEUED, 0, None)
    assert messages_of(response) == ["Retry: 1 job queued again with a fresh attempt budget."]


def test_retry_is_refused_while_a_live_job_holds_the_identity(admin_client):
    failed = make_job("k", state=State.FAILED, attempts=5, last_error="boom")
    make_job("k")  # a newer job for the same kind and key, still queued
    before = reload(failed)
    response = act(admin_client, "retry", failed)
    after = reload(failed)
    assert (after.state, after.attempts, after.updated_at) == (
        State.FAILED,
        5,
        before.updated_at,
    ), "nothing is written for the refused row"
    assert messages_of(response) == [
        f"Retry: skipped 1 job, nothing written for it: a live job already holds {RECORDED}:k (1)."
    ]


def test_cancel_retires_queued_jobs_and_abandons_each_once_naming_the_user(
    admin_client, django_capture_on_commit_callbacks
):
    queued = make_job("k")
    with django_capture_on_commit_callbacks(execute=True):  # abandon runs once it commits
        response = act(admin_client, "cancel", queued, post="yes")
    row = reload(queued)
    assert (row.state, row.last_error) == (State.CANCELLED, "cancelled by admin:ops")
    reasons = list(Abandonment.objects.values_list("key", "reason"))
    assert reasons == [("k", "cancelled by admin:ops")], (
        "abandon is called once, with a reason naming who cancelled"
    )
    assert messages_of(response) == ["Cancel: 1 job cancelled."]

    with django_capture_on_commit_callbacks(execute=True):
        again = act(admin_client, "cancel", queued, post="yes")
    assert Abandonment.objects.count() == 1, "cancelling again does not abandon again"
    assert messages_of(again) == [
        "Cancel: skipped 1 job, nothing written for it: "
        "cancelled, not waiting, queued or running (1)."
    ]


def test_cancel_of_a_running_job_makes_its_late_settle_lose(admin_client):
    make_job("k", run_at=timezone.now() - timedelta(seconds=1))
    store = for_database()
    [claim] = store.claim(Admission(timezone.now(), {RECORDED: timedelta(minutes=5)}, 1))
    act(admin_client, "cancel", claim.job, post="yes")
    assert store.complete(claim.job, timezone.now()) is False, (
        "the attempt that was running no longer owns the row"
    )
    assert reload(claim.job).state == State.CANCELLED, "the cancellation stands"


def test_an_action_reports_a_job_that_no_longer_exists(admin_client):
    gone = make_job("k", run_at=timezone.now() + timedelta(hours=1))
    Job.objects.filter(id=gone.id).delete()
    response = act(admin_client, "run_now", gone)
    assert messages_of(response) == [
        "Run now: skipped 1 job, nothing written for it: no such job (1)."
    ], "a row deleted since the page was drawn (by the sweep, say) is reported, not ignored"


def test_actions_work_from_a_jobs_own_page_and_return_there(admin_client):
    queued = make_job("k")
    url = reverse("admin:jobs_job_change", args=[queued.id])
    assert 'value="cancel"' in detail(admin_client, queued), "the page offers the actions"
    response = admin_client.post(
        url,
        {"CHANGE_FORM-action": "cancel", "_selected_action": [str(queued.id)], "post": "yes"},
    )
    assert response.status_code == 302
    assert response["Location"] == url, "the operator is taken back to the job's page"
    assert reload(queued).state == State.CANCELLED


def test_a_viewer_can_look_but_cannot_run_an_action_or_edit(viewer_client):
    queued = make_job("k", run_at=timezone.now() + timedelta(hours=1))
    failed = make_job("f", state=State.FAILED, attempts=5)
    page = changelist(viewer_client)
    assert 'name="action"' not in page, "the viewer is offered no actions"
    for action, row in (("run_now", queued), ("retry", failed), ("cancel", queued)):
        act(viewer_client, action, row)
    assert reload(queued).state == State.QUEUED, "cancel did not touch the queued job"
    assert reload(queued).run_at > timezone.now(), "nor did run now"
    assert reload(failed).state == State.FAILED, "retry did not touch the failed job"
    assert Abandonment.objects.count() == 0
    url = reverse("admin:jobs_job_change", args=[queued.id])
    assert viewer_client.get(url).status_code == 200, "the viewer may read a job"
    cancel_here = {"CHANGE_FORM-action": "cancel", "_selected_action": [str(queued.id)]}
    assert viewer_client.post(url, cancel_here).status_code == 403, "nor act from its page"
    assert reload(queued).state == State.QUEUED


# -- counting a large table ---------------------------------------------------


def test_outside_postgresql_the_list_is_always_counted_exactly(admin_client, monkeypatch):
    if connection.vendor == "postgresql":
        pytest.skip("about SQLite and MySQL, whose row estimates the admin does not use")
    monkeypatch.setattr(jobs.admin.large_table, "ESTIMATE_COUNT_ABOVE", 1)
    for n in range(3):
        make_job(f"k{n}")
    page = changelist(admin_client)
    assert "about</span>" not in page, "only PostgreSQL keeps an estimate to use"
    assert "3 jobs" in page


@pytest.mark.postgresql
def test_an_unfiltered_list_of_a_large_table_takes_postgresqls_estimate(admin_client, monkeypatch):
    """A full COUNT(*) of a million rows on every page view is what makes an
    admin list slow; the unfiltered list uses the planner's estimate instead."""
    monkeypatch.setattr(jobs.admin.large_table, "ESTIMATE_COUNT_ABOVE", 20)
    for n in range(30):
        make_job(f"k{n}", state=State.DONE)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobs_job")
    for n in range(5):
        make_job(f"late{n}", state=State.FAILED)  # after ANALYZE: not in the estimate
    page = changelist(admin_client)
    assert re.search(r"about</span>\s*30 jobs", page), "the unfiltered count is the estimate"
    filtered = changelist(admin_client, state__exact="failed")
    assert "about</span>" not in filtered, "a filtered list is not estimated"
    assert "5 jobs" in filtered, "a filtered list is counted exactly"


@pytest.mark.postgresql
def test_a_small_postgresql_table_is_counted_exactly(admin_client, monkeypatch):
    for n in range(3):
        make_job(f"k{n}")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobs_job")
    page = changelist(admin_client)
    assert "about</span>" not in page, "below the threshold nothing is estimated"
    assert "3 jobs" in page, "below the threshold the list is counted"
