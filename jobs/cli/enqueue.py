"""`manage.py jobs enqueue`: queue one job through `jobs.queue.enqueue`, the only door in.

It says what it inserted (the id it chose, the kind, key, queue, priority and
run_at it gave), never a re-read of the row: by the time a row is read back a
runner may have claimed it or settled it, and the operator would read the
runner's progress as what they asked for.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from django.core.management.base import CommandError
from django.db import DEFAULT_DB_ALIAS

from jobs.cli import arguments, names, verb
from jobs.cli.text import Write, terminal_safe
from jobs.cli.verb import NOT_ALL_DONE, OK, Options, Verbs
from jobs.models import LIVE_STATES, Job
from jobs.queue import enqueue, routing
from jobs.spec import PRIORITY_MAX, PRIORITY_MIN, InvalidJobSpec, JobSpec

#: enqueue's help, as `--help` shows it.
HELP = "Queue a job. Exits 1, writing nothing, if a live job already holds KIND:KEY."


def add_parser(verbs: Verbs) -> None:
    """`enqueue`'s kind and key, and what a `JobSpec` may add to them."""
    parser = verb.add(verbs, "enqueue", HELP, handle)
    parser.add_argument("kind", metavar="KIND", type=arguments.kind)
    parser.add_argument("key", metavar="KEY")
    payload = parser.add_mutually_exclusive_group()
    payload.add_argument(
        "--payload", type=arguments.payload, default=None, help="A JSON object (default {})."
    )
    payload.add_argument(
        "--payload-file",
        type=arguments.payload_file,
        default=None,
        metavar="PATH",
        help="Read the payload, a JSON object, from the file PATH, or from standard input "
        "for '-': for a payload longer than a shell argument can hold.",
    )
    low, high = arguments.DELAY_RANGE
    parser.add_argument(
        "--delay",
        type=arguments.delay,
        default=None,
        help=f"Run no sooner than this many seconds ({low} to {high:,}, ten years).",
    )
    low, high = arguments.MAX_ATTEMPTS_RANGE
    parser.add_argument(
        "--max-attempts",
        type=arguments.max_attempts,
        default=None,
        help=f"The attempt budget for this job, {low} to {high:,} "
        "(default: the configured max_attempts).",
    )
    parser.add_argument(
        "--queue",
        type=arguments.queue_name,
        default=None,
        help="The queue it waits in (default: its kind's handler's queue, else 'default').",
    )
    parser.add_argument(
        "--priority",
        type=arguments.priority,
        default=None,
        help=f"{PRIORITY_MIN} to {PRIORITY_MAX}, higher runs first "
        "(default: its kind's handler's priority, else 0).",
    )
    names.strict_argument(parser, refused="queueing")


def handle(write: Write, options: Options) -> int:
    """`enqueue`'s options, to `enqueue_job`."""
    return enqueue_job(
        write,
        options["kind"],
        options["key"],
        payload=options["payload"] if options["payload_file"] is None else options["payload_file"],
        delay=options["delay"],
        max_attempts=options["max_attempts"],
        queue=options["queue"],
        priority=options["priority"],
        strict=options["strict"],
        using=options["database"],
    )


def enqueue_job(
    write: Write,
    kind: str,
    key: str,
    *,
    payload: dict[str, Any] | None = None,
    delay: timedelta | None = None,
    max_attempts: int | None = None,
    queue: str | None = None,
    priority: int | None = None,
    strict: bool = False,
    using: str = DEFAULT_DB_ALIAS,
) -> int:
    """Queue one job through `jobs.queue.enqueue`, saying what was inserted; a live
    duplicate is an answer, status 1."""
    spec = (
        JobSpec.now(kind, key)
        .with_payload(payload or {})
        .with_max_attempts(max_attempts)
        .with_queue(queue)
        .with_priority(priority)
    )
    named = [("kind", kind)] + ([("queue", queue)] if queue is not None else [])
    names.check(write, named, strict=strict, using=using, done="Nothing was queued.")
    job_id = uuid.uuid4()  # chosen here, so that it can be said without a read
    try:
        if delay:
            spec = spec.with_delay(delay)
        queued = enqueue(spec, using=using, job_id=job_id)
    except InvalidJobSpec as error:
        raise CommandError(
            f"Invalid job: {terminal_safe(str(error))}. Nothing was queued."
        ) from None
    if not queued:
        write(already_queued(kind, key, using))
        return NOT_ALL_DONE
    queue, priority = routing(spec)
    write(
        f"queued {kind}:{key} (id {job_id}, queue {queue}, priority {priority}, "
        f"run_at {spec.run_at.isoformat()})"
    )
    return OK


def already_queued(kind: str, key: str, using: str) -> str:
    """The refusal of a duplicate, naming the live job that holds the identity."""
    live = Job.objects.using(using).filter(kind=kind, key=key, state__in=LIVE_STATES).first()
    # Settled between the refused insert and this read: its id no longer holds it.
    held_by = f": id {live.id}, {live.state}" if live else ", settled since"
    return f"already queued (a live job holds {kind}:{key}{held_by})"
