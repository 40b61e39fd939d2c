"""`manage.py jobs enqueue`: queue one job through `jobs.queue.enqueue`, the only door in."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import CommandError
from django.db import DEFAULT_DB_ALIAS
from django.utils import timezone

from jobs.cli import arguments, verb
from jobs.cli.text import Write, terminal_safe
from jobs.cli.verb import NOT_ALL_DONE, OK, Options, Verbs
from jobs.models import LIVE_STATES, Job
from jobs.presentation import next_run
from jobs.queue import enqueue
from jobs.registry import registry
from jobs.spec import InvalidJobSpec, JobSpec

#: enqueue's help, as `--help` shows it.
HELP = "Queue a job. Exits 1, writing nothing, if a live job already holds KIND:KEY."


def add_parser(verbs: Verbs) -> None:
    """`enqueue`'s kind and key, and what a `JobSpec` may add to them."""
    parser = verb.add(verbs, "enqueue", HELP, handle)
    low, high = arguments.DELAY_RANGE
    parser.add_argument("kind", metavar="KIND")
    parser.add_argument("key", metavar="KEY")
    parser.add_argument(
        "--payload", type=arguments.payload, default=None, help="A JSON object (default {})."
    )
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


def handle(write: Write, options: Options) -> int:
    """`enqueue`'s options, to `enqueue_job`."""
    return enqueue_job(
        write,
        options["kind"],
        options["key"],
        payload=options["payload"],
        delay=options["delay"],
        max_attempts=options["max_attempts"],
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
    using: str = DEFAULT_DB_ALIAS,
) -> int:
    """Queue one job through `jobs.queue.enqueue`; a live duplicate is an answer, status 1."""
    spec = JobSpec.now(kind, key).with_payload(payload or {}).with_max_attempts(max_attempts)
    try:
        if delay:
            spec = spec.with_delay(delay)
        queued = enqueue(spec, using=using)
    except InvalidJobSpec as error:
        raise CommandError(
            f"Invalid job: {terminal_safe(str(error))}. Nothing was queued."
        ) from None
    live = Job.objects.using(using).filter(kind=kind, key=key, state__in=LIVE_STATES).first()
    if not queued:
        held_by = f": id {live.id}, {live.state}" if live else ""
        write(f"already queued (a live job holds {kind}:{key}{held_by})")
        return NOT_ALL_DONE
    detail = f" (id {live.id}, {next_run(live, timezone.now())})" if live else ""
    write(f"queued {kind}:{key}{detail}")
    if registry.get(kind) is None:
        write(
            f"note: no handler for kind {kind!r} is registered in this project; "
            "only a runner that has one will run it"
        )
    return OK
