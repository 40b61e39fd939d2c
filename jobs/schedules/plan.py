"""What should be scheduled: `settings.JOBS_SCHEDULES` and the handlers'
`schedule` attributes, read and checked into `Planned` schedules.

Read at each runner's start (the reconcile) and by the system check, which
report the same sentences: a schedule that cannot work is refused before a
runner starts, never discovered at its first fire time. What a planned
schedule is stored as (`Planned.definition`) is what every runner settling an
occurrence reads back, so the database, not each process's settings, decides
the next fire time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.tasks import Task, task_backends
from django.tasks.exceptions import InvalidTaskBackend
from django.utils import timezone
from django.utils.module_loading import import_string

from jobs.registry import Registry
from jobs.schedules.timing import Timing, TimingError
from jobs.spec import KEY_MAX_LENGTH, InvalidJobSpec, JobSpec, priority_problem, queue_name_problem

#: Every schedule's job key starts with this; the rest is its name.
KEY_PREFIX = "schedule:"
NAME_MAX_LENGTH = KEY_MAX_LENGTH - len(KEY_PREFIX)

SKIP, ONCE = "skip", "once"
_OPTIONS = frozenset(
    {"kind", "task", "cron", "every", "payload", "args", "kwargs", "timezone", "queue"}
    | {"priority", "missed"}
)


class ScheduleError(ValueError):
    """A schedule that cannot work; the message names it."""


@dataclass(frozen=True)
class Planned:
    """One schedule, checked: its job's kind and payload, and its timing."""

    name: str
    kind: str
    timing: Timing
    missed: str = SKIP
    payload: Mapping[str, Any] | None = None
    queue: str | None = None
    priority: int | None = None

    @property
    def key(self) -> str:
        return KEY_PREFIX + self.name

    def definition(self) -> dict[str, Any]:
        """As stored on the schedule's row (`jobs.models.Schedule.definition`)."""
        return {
            "cron": self.timing.cron,
            "every": self.timing.every,
            "timezone": self.timing.zone,
            "missed": self.missed,
            "payload": dict(self.payload or {}),
            "queue": self.queue,
            "priority": self.priority,
        }

    @classmethod
    def stored(cls, name: str, kind: str, definition: Mapping[str, Any]) -> Planned:
        """The schedule a row's definition describes; ScheduleError if it was
        edited into something no schedule means."""
        try:
            timing = Timing(definition.get("cron"), definition.get("every"), definition["timezone"])
        except (TimingError, KeyError, TypeError, AttributeError) as error:
            raise ScheduleError(f"schedule {name!r} in the database: {error}") from None
        missed = definition.get("missed", SKIP)
        return cls(
            name,
            kind,
            timing,
            missed if missed in (SKIP, ONCE) else SKIP,
            definition.get("payload") or {},
            definition.get("queue"),
            definition.get("priority"),
        )

    def spec(self, run_at: datetime) -> JobSpec:
        """The occurrence's job, due at `run_at`."""
        return JobSpec(
            kind=self.kind,
            key=self.key,
            payload=dict(self.payload or {}),
            run_at=run_at,
            queue=self.queue,
            priority=self.priority,
        )


def name_of(key: str) -> str | None:
    """The schedule a job's key says it is an occurrence of, or None."""
    return key[len(KEY_PREFIX) :] if key.startswith(KEY_PREFIX) else None


def planned(registry: Registry) -> dict[str, Planned]:
    """Every schedule to keep; ScheduleError naming the first that cannot work."""
    found, problems = _read(registry)
    if problems:
        raise ScheduleError(problems[0])
    return found


def problems(registry: Registry) -> list[str]:
    """What is wrong with the declared schedules, a sentence each."""
    return _read(registry)[1]


def _read(registry: Registry) -> tuple[dict[str, Planned], list[str]]:
    found: dict[str, Planned] = {}
    problems: list[str] = []
    declared = getattr(settings, "JOBS_SCHEDULES", None) or {}
    if not isinstance(declared, Mapping):
        return {}, [f"JOBS_SCHEDULES must be a dict of name to options, got {declared!r}"]
    for name, options in declared.items():
        try:
            found[name] = _declared(name, options, registry)
        except ScheduleError as error:
            problems.append(f"JOBS_SCHEDULES[{name!r}]: {error}")
    for handler in registry:
        schedule = getattr(handler, "schedule", None)
        if schedule is None:
            continue
        where = f"{type(handler).__qualname__}.schedule"
        if handler.kind in declared:
            problems.append(f"{where}: JOBS_SCHEDULES declares {handler.kind!r} as well")
            continue
        try:
            found[handler.kind] = _declared(
                handler.kind, {"kind": handler.kind, **_short(schedule)}, registry
            )
        except ScheduleError as error:
            problems.append(f"{where}: {error}")
    return found, problems


def _short(schedule: object) -> dict[str, Any]:
    """A handler's `schedule` as the options it stands for."""
    if isinstance(schedule, str):
        return {"cron": schedule}
    return {"every": schedule}


def _declared(name: object, options: object, registry: Registry) -> Planned:
    if not isinstance(name, str) or not 0 < len(name) <= NAME_MAX_LENGTH:
        raise ScheduleError(f"a schedule's name must be 1 to {NAME_MAX_LENGTH} characters")
    if not isinstance(options, Mapping):
        raise ScheduleError(f"options must be a dict, got {options!r}")
    unknown = sorted(set(options) - _OPTIONS)
    if unknown:
        raise ScheduleError(f"unknown options {unknown}; known: {sorted(_OPTIONS)}")
    every = options.get("every")
    if isinstance(every, timedelta):
        every = every.total_seconds()
    zone = options.get("timezone", settings.TIME_ZONE or "UTC")
    try:
        timing = Timing(options.get("cron"), every, zone)
    except TimingError as error:
        raise ScheduleError(str(error)) from None
    missed = options.get("missed", SKIP)
    if missed not in (SKIP, ONCE):
        raise ScheduleError(f"missed must be {SKIP!r} or {ONCE!r}, got {missed!r}")
    if ("kind" in options) == ("task" in options):
        raise ScheduleError("give either 'kind' (a handler's) or 'task' (a dotted path), not both")
    if "task" in options:
        kind, payload, queue, priority = _task(options)
    else:
        kind, payload = options["kind"], options.get("payload", {})
        if "args" in options or "kwargs" in options:
            raise ScheduleError("'args' and 'kwargs' are for a task; a kind takes 'payload'")
        if registry.get(kind) is None:
            raise ScheduleError(f"no handler is registered for kind {kind!r}")
        queue, priority = None, None
    queue = options.get("queue", queue)
    priority = options.get("priority", priority)
    if queue is not None and (problem := queue_name_problem(queue)):
        raise ScheduleError(problem)
    if priority is not None and (problem := priority_problem(priority)):
        raise ScheduleError(problem)
    schedule = Planned(name, kind, timing, missed, payload, queue, priority)
    try:
        schedule.spec(timezone.now()).validate()
    except InvalidJobSpec as error:
        raise ScheduleError(str(error)) from None
    return schedule


def _task(options: Mapping[str, Any]) -> tuple[str, dict[str, Any], str, int]:
    """A `django.tasks` task's job: its kind, payload, queue and priority."""
    from jobs import tasks

    if "payload" in options:
        raise ScheduleError("a task takes 'args' and 'kwargs', not 'payload'")
    path = options["task"]
    try:
        task = import_string(path)
    except (ImportError, TypeError, ValueError) as error:
        raise ScheduleError(f"cannot import task {path!r}: {error}") from None
    if not isinstance(task, Task):
        raise ScheduleError(f"{path!r} is not a django.tasks task (decorate it with @task)")
    try:
        backend = task_backends[task.backend]
    except InvalidTaskBackend as error:
        raise ScheduleError(f"task {path!r}: {error}") from None
    if not isinstance(backend, tasks.JobsBackend):
        raise ScheduleError(
            f"task {path!r} uses the backend {task.backend!r}, which is not jobs.tasks.JobsBackend"
        )
    args, kwargs = options.get("args", []), options.get("kwargs", {})
    if not isinstance(args, list | tuple) or not isinstance(kwargs, Mapping):
        raise ScheduleError("'args' must be a list and 'kwargs' a dict")
    try:
        payload = tasks.payload_for(task, args, kwargs, backend.alias)
    except (TypeError, ValueError) as error:
        raise ScheduleError(f"task {path!r}: arguments must be JSON: {error}") from None
    return tasks.KIND, payload, task.queue_name, int(task.priority)
