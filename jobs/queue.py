"""The enqueue side: the only path that creates job rows.

`enqueue` validates the whole spec before writing, inserts with the database's
own conflict handling (so a refused duplicate is an answer, not an error, and
never breaks the caller's transaction), and wakes the runners when the
caller's transaction commits (`jobs.wakeup.wake_runners`: at once in this
process; in others through the store where it can, else at their next poll).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from datetime import datetime

from django.db import DatabaseError, transaction
from django.utils import timezone

from jobs import config, log, observers, tracing
from jobs.registry import registry
from jobs.spec import DEFAULT_PRIORITY, DEFAULT_QUEUE, JobSpec
from jobs.store import NewJob, for_database
from jobs.wakeup import wake_runners


def enqueue(spec: JobSpec, *, using: str | None = None, job_id: uuid.UUID | None = None) -> bool:
    """Queue `spec`; False when a live job already holds its `(kind, key)`.

    Raises `InvalidJobSpec` (writing nothing) for a spec that can never be
    queued, and the database's error for a database failure. Inside
    `transaction.atomic()` the row becomes visible, and runners are woken,
    only when the caller commits. `job_id` chooses the new row's id, for
    callers that must hand it out (the `django.tasks` backend).
    """
    payload_json = spec.validate()
    store = for_database(using)
    row = _row(spec, payload_json, job_id or uuid.uuid4(), timezone.now(), _default_attempts())
    inserted = store.insert(row)
    if inserted:
        wake_runners(store.using, notified=store.inserts_notify)
        observers.enqueued([row], store.using)
    return inserted


def enqueue_many(specs: Iterable[JobSpec], *, using: str | None = None) -> list[bool]:
    """Queue many specs at once; for each, whether it was queued (as `enqueue` says).

    Every spec is validated before anything is written, so one bad spec
    raises `InvalidJobSpec` and queues none. A spec whose identity a live job
    holds, or an earlier spec in the same call, is refused with False. One
    transaction, and on PostgreSQL one round trip (a statement per
    thousand specs, pipelined: see `PostgreSQLStore.insert_many`).
    """
    specs = list(specs)
    payloads = [spec.validate() for spec in specs]
    if not specs:
        return []
    store, now, attempts = for_database(using), timezone.now(), _default_attempts()
    rows = [
        _row(spec, payload, None, now, attempts)
        for spec, payload in zip(specs, payloads, strict=True)
    ]
    queued = store.insert_many(rows)  # which gives each row its id
    if any(queued):
        wake_runners(store.using, notified=store.inserts_notify)  # as `enqueue`
        observers.enqueued([row for row, new in zip(rows, queued, strict=True) if new], store.using)
    return queued


def _default_attempts() -> int:
    """The budget a row takes when neither its spec nor the config row gives one."""
    return config.initial().max_attempts


def routing(spec: JobSpec) -> tuple[str, int]:
    """The queue and priority `spec` is queued with: its own where it gives them,
    else its kind's handler's (checked when it registered), else the defaults
    for a kind with no handler here. What `enqueue` writes, for a caller that
    reports what it queued without reading the row back."""
    queue, priority = spec.queue, spec.priority
    if queue is None or priority is None:
        handler = registry.get(spec.kind)
        if queue is None:
            queue = DEFAULT_QUEUE if handler is None else handler.queue
        if priority is None:
            priority = DEFAULT_PRIORITY if handler is None else handler.priority
    return queue, priority


def _row(
    spec: JobSpec,
    payload_json: str,
    job_id: uuid.UUID | None,
    now: datetime,
    default_max_attempts: int,
) -> NewJob:
    queue, priority = routing(spec)
    return NewJob(
        id=job_id,
        kind=spec.kind,
        key=spec.key,
        payload=spec.payload,
        payload_json=payload_json,
        max_attempts=spec.max_attempts,
        default_max_attempts=default_max_attempts,
        run_at=spec.run_at,
        deadline=spec.deadline,
        queue=queue,
        priority=priority,
        now=now,
        traceparent=tracing.traceparent(),
    )


def enqueue_or_log(spec: JobSpec, *, using: str | None = None) -> bool:
    """`enqueue`, logging a database failure and answering False instead of raising.

    For callers with nowhere to report one, such as `recover`. The insert runs
    in a savepoint, so a failure leaves the caller's transaction usable.
    """
    try:
        with transaction.atomic(using=using):
            return enqueue(spec, using=using)
    except DatabaseError as error:
        log.event(
            "job_enqueue_failed",
            logging.ERROR,
            outcome="failure",
            kind=spec.kind,
            key=spec.key,
            error=error,
        )
        return False
