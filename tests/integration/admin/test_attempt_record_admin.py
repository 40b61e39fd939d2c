"""A job's attempt record as the admin and `manage.py jobs show` tell it: how
long each attempt took to the millisecond, a reclaimed attempt as its runner
lost (not as a run of six minutes), an expired lease marked expired, and each
operator's Retry, Run now and Cancel with who and when."""

from __future__ import annotations

import io
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from jobs import history, operations
from jobs.history import Outcome
from jobs.history_actions import Action
from jobs.models import Job, State
from tests.integration.admin.support import act, as_read
from tests.jobapp import tasks

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 12, 7, 1, 30, 0, tzinfo=UTC)


def job_with(*entries: history.Entry, **fields: object) -> Job:
    stored: list[dict[str, object]] = []
    for entry in entries:
        stored = history.appended(stored, entry)
    values = {
        "kind": "orders.ship",
        "key": "k",
        "state": State.FAILED,
        "max_attempts": 5,
        "attempts": len(entries),
        "run_at": T0,
        "errors": stored,
        **fields,
    }
    return Job.objects.create(**values)


def attempt(outcome: Outcome, started: datetime, ended: datetime, **more: object):
    return history.record(
        attempt=1,
        started_at=started,
        ended_at=ended,
        runner="host:1",
        outcome=outcome,
        error="boom",
        **more,  # type: ignore[arg-type]
    )


def history_table(client, job: Job) -> str:
    page = client.get(reverse("admin:jobs_job_change", args=[job.id])).content.decode()
    return as_read(page).split('class="jobs-history"')[1].split("</table>")[0]


def shown(job: Job) -> str:
    out = io.StringIO()
    call_command("jobs", "show", str(job.id), stdout=out)
    return out.getvalue()


def test_a_sub_second_attempt_took_its_milliseconds_not_0s(admin_client):
    job = job_with(attempt(Outcome.RETRY, T0, T0 + timedelta(milliseconds=340)))
    table = history_table(admin_client, job)
    assert "<td>340 ms</td>" in table, "the admin says how quick it was"
    assert "0s" not in table
    assert "took 340 ms" in shown(job), "and so does jobs show"


def test_a_reclaimed_attempt_says_its_runner_was_lost_and_when_it_was_last_heard(admin_client):
    heard = T0 + timedelta(seconds=3, milliseconds=125)
    lost = attempt(Outcome.RECLAIMED, T0, T0 + timedelta(minutes=6, seconds=57), heard_at=heard)
    job = job_with(lost)
    table = history_table(admin_client, job)
    assert "runner lost; last heartbeat at 2026-12-07 01:30:03.125 UTC" in table
    assert "6m 57s" not in table, "start to reclaim is not how long it ran"
    text = shown(job)
    assert "runner lost; last heartbeat at 2026-12-07 01:30:03 UTC" in text
    assert "6m 57s" not in text


def test_a_reclaimed_attempt_whose_heartbeat_is_unknown_says_so(admin_client):
    job = job_with(attempt(Outcome.RECLAIMED, T0, T0 + timedelta(minutes=7)))
    assert "runner lost; last heartbeat not known" in history_table(admin_client, job)


def test_a_running_jobs_expired_lease_is_marked_expired_on_its_page(admin_client):
    now = timezone.now()
    stuck = job_with(
        state=State.RUNNING,
        started_at=now - timedelta(minutes=5),
        lease_expires_at=now - timedelta(minutes=2),
        claimed_by="host:1",
    )
    page = admin_client.get(reverse("admin:jobs_job_change", args=[stuck.id])).content.decode()
    row = page.split('class="field-lease_expires_at_shown"')[1].split("</tr>")[0]
    assert re.search(r'jobs-badge-gone">expired 2 min ago</span>', row), row
    healthy = job_with(key="k2", state=State.RUNNING, lease_expires_at=now + timedelta(minutes=2))
    page = admin_client.get(reverse("admin:jobs_job_change", args=[healthy.id])).content.decode()
    row = page.split('class="field-lease_expires_at_shown"')[1].split("</tr>")[0]
    assert "expired" not in row, "a lease still good is not marked"


def test_an_admin_retry_and_run_now_are_on_the_record_with_who_and_when(admin_client):
    job = job_with(attempt(Outcome.FAILED, T0, T0 + timedelta(seconds=1)))
    before = timezone.now()
    act(admin_client, "retry", job)
    act(admin_client, "run_now", job)
    job.refresh_from_db()
    *_, retried, made_due = job.attempt_history
    assert (retried.outcome, made_due.outcome) == (Action.RETRIED, Action.RUN_NOW)
    assert retried.error.startswith("retried by admin:ops"), retried.error
    assert made_due.error.startswith("run now by admin:ops"), made_due.error
    assert retried.ended_at is not None
    assert retried.ended_at >= before, "when it was done"
    assert job.error_count == 1, "an operator's action is no attempt that did not end done"
    table = history_table(admin_client, job)
    assert "retried by admin:ops" in table
    assert "run now by admin:ops" in table
    assert "AttemptFailed" in table, "the failed attempt keeps its class"
    assert table.count("AttemptFailed") == 1, "an action has no error class"


def test_a_cli_retry_and_cancel_are_on_the_record_and_in_jobs_show_with_who():
    job = job_with(attempt(Outcome.FAILED, T0, T0 + timedelta(seconds=1)))
    call_command("jobs", "retry", str(job.id), "--by", "cli:alice", stdout=io.StringIO())
    call_command("jobs", "cancel", str(job.id), "--by", "cli:bob", stdout=io.StringIO())
    job.refresh_from_db()
    outcomes = [(entry.outcome, entry.error) for entry in job.attempt_history]
    assert outcomes[1:] == [
        (
            Action.RETRIED,
            "retried by cli:alice: queued again, due now, with a fresh attempt budget",
        ),
        (Outcome.CANCELLED, "cancelled by cli:bob"),
    ]
    text = shown(job)
    assert "retried by cli:alice" in text
    assert "cancelled by cli:bob" in text
    assert re.search(r"#2  retried\n    at:        \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\n", text), (
        text
    )


def test_an_operators_retry_is_no_error_of_the_task_api():
    result = tasks.add.enqueue(1, 2)
    Job.objects.filter(id=result.id).update(state=State.FAILED)
    report = operations.retry([result.id], by="ops")
    assert report.touched == 1
    assert tasks.add.get_result(result.id).errors == [], "a retry is not a failed attempt"
