"""What an operator can do to jobs: run now, retry, cancel.

The admin actions and the `jobs` command both call these, so identity,
attempts and fencing stay the store's business. Each operation takes ids,
touches what it may, and reports how many rows it touched and why it skipped
the rest, in words an operator can act on.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from django.db import DEFAULT_DB_ALIAS, IntegrityError, transaction
from django.utils import timezone

from jobs import log, retirement
from jobs.history_actions import Action, operator_action
from jobs.models import Job
from jobs.registry import Registry
from jobs.registry import registry as default_registry
from jobs.store import for_database
from jobs.wakeup import wake_runners


@dataclass
class Report:
    """How many rows an operation touched, and why it skipped the others."""

    touched: int = 0
    skipped: Counter[str] = field(default_factory=Counter)

    def skip(self, why: str) -> None:
        self.skipped[why] += 1

    def __str__(self) -> str:
        text = f"{self.touched} touched"
        if self.skipped:
            text += "; skipped " + ", ".join(f"{n} ({why})" for why, n in self.skipped.items())
        return text


def _found(
    ids: Iterable[uuid.UUID | str], using: str | None, report: Report
) -> Iterator[tuple[uuid.UUID, Job]]:
    """Each requested job that exists, as it is now; the missing ones are reported."""
    wanted = [uuid.UUID(str(i)) for i in ids]
    jobs = Job.objects.using(using or DEFAULT_DB_ALIAS).filter(id__in=wanted)
    found = {job.id: job for job in jobs.only("id", "kind", "key", "state")}
    for job_id in wanted:
        if job_id in found:
            yield job_id, found[job_id]
        else:
            report.skip("no such job")


def run_now(ids: Iterable[uuid.UUID | str], *, by: str = "", using: str | None = None) -> Report:
    """Make queued jobs due now, and wake the runners to claim them. Each job's
    record notes it, with `by` (who asked)."""
    report, store, now = Report(), for_database(using), timezone.now()
    entry = operator_action(Action.RUN_NOW, by, now)
    for job_id, job in _found(ids, using, report):
        with transaction.atomic(using=store.using):
            made_due = store.run_now(job_id, now) and store.note_action(job_id, entry)
        if made_due:
            report.touched += 1
        else:
            report.skip(f"{job.state}, not queued")
    if report.touched:
        wake_runners(store.using)
    return report


def retry(ids: Iterable[uuid.UUID | str], *, by: str = "", using: str | None = None) -> Report:
    """Queue failed or cancelled jobs again, due now, with a fresh attempt budget.
    Each job's record notes it, with `by` (who asked).

    A job whose `(kind, key)` a live job already holds is skipped with that
    reason and nothing is written for it.
    """
    report, store, now = Report(), for_database(using), timezone.now()
    entry = operator_action(Action.RETRIED, by, now)
    for job_id, job in _found(ids, using, report):
        try:
            with transaction.atomic(using=store.using):
                requeued = store.requeue(job_id, now) and store.note_action(job_id, entry)
        except IntegrityError:
            report.skip(f"a live job already holds {job.kind}:{job.key}")
            continue
        if requeued:
            report.touched += 1
            log.event(
                "job_requeued", outcome="requeued", job_id=job_id, kind=job.kind, key=job.key, by=by
            )
        else:
            report.skip(f"{job.state}, not failed or cancelled")
    if report.touched:
        wake_runners(store.using)
    return report


def cancel(
    ids: Iterable[uuid.UUID | str],
    *,
    by: str,
    using: str | None = None,
    registry: Registry | None = None,
) -> Report:
    """Retire waiting, queued or running jobs as `cancelled`, calling each handler's
    `abandon` once; a workflow's steps waiting for one cancelled are then cancelled
    by its release rule (`jobs.workflows.release`).

    `by` names who cancelled (it goes into the reason). A running attempt is
    not interrupted, but its settle is fenced out, so its result is discarded.
    """
    handlers = registry if registry is not None else default_registry
    report, store, now = Report(), for_database(using), timezone.now()
    reason = f"cancelled by {by}"
    for job_id, job in _found(ids, using, report):
        handler = handlers.get(job.kind)
        if retirement.cancel(store, job_id, handler, reason, now, by=by) is None:
            report.skip(f"{job.state}, not waiting, queued or running")
        else:
            report.touched += 1
    return report
