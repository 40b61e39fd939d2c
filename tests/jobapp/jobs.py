"""Handlers for tests that run real `runjobs` processes (found by autodiscovery).

Each records its executions, so a test can check the books afterwards: which
attempts ran, in which process, and whether they finished.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from datetime import timedelta

from django.utils import timezone

from jobs import Done, Failed, JobHandler, JobSpec, Retry, Workflow, register
from jobs.models import Job
from jobs.signals import job_finished
from tests.jobapp.models import Abandonment, Execution


def _record(job: Job) -> Execution:
    return Execution.objects.create(
        job_id=job.id, key=job.key, attempt=job.attempts, pid=os.getpid(), started_at=timezone.now()
    )


def _finish(execution: Execution) -> None:
    execution.finished_at = timezone.now()
    execution.save(update_fields=["finished_at"])


@register
class RecordHandler(JobHandler):
    """Records the execution and succeeds."""

    kind = "test.record"

    def run(self, job: Job) -> Done:
        _finish(_record(job))
        return Done()

    def abandon(self, job: Job, reason: str) -> None:
        Abandonment.objects.create(job_id=job.id, key=job.key, reason=reason, pid=os.getpid())


@register
class SleepHandler(JobHandler):
    """Sleeps `payload["seconds"]` on the attempts listed in `payload["sleep_on"]`
    (every attempt when absent), then succeeds; `payload["retry"]` makes it Retry instead."""

    kind = "test.sleep"

    def budget(self) -> timedelta:
        return timedelta(seconds=float(os.environ.get("TEST_SLEEP_LEASE", "2")))

    def run(self, job: Job) -> Done | Retry:
        execution = _record(job)
        sleep_on = job.payload.get("sleep_on")
        if sleep_on is None or job.attempts in sleep_on:
            # Not `time.sleep`: under libfaketime with a clock set back
            # (tests/faults/test_clocks.py) its clock_nanosleep fails (EINVAL).
            threading.Event().wait(float(job.payload.get("seconds", 0)))
        _finish(execution)
        if job.payload.get("retry"):
            return Retry("asked to retry")
        return Done()

    def abandon(self, job: Job, reason: str) -> None:
        Abandonment.objects.create(job_id=job.id, key=job.key, reason=reason, pid=os.getpid())


@register
class NoopHandler(JobHandler):
    """Succeeds at once and records nothing: the memory test's load."""

    kind = "test.noop"

    def run(self, job: Job) -> Done:
        return Done()


@register
class PoisonHandler(JobHandler):
    """Records the execution, then kills its own process before it can settle."""

    kind = "test.poison"

    def budget(self) -> timedelta:
        return timedelta(seconds=float(os.environ.get("TEST_POISON_LEASE", "1")))

    def run(self, job: Job) -> Done:
        _record(job)
        os._exit(1)

    def abandon(self, job: Job, reason: str) -> None:
        Abandonment.objects.create(job_id=job.id, key=job.key, reason=reason, pid=os.getpid())


@register
class RefuseHandler(JobHandler):
    """Records the execution and fails for good. Its `abandon` first appends a
    line to the file `TEST_ABANDON_LOG` names, if set (a count outside the
    database, which a killed transaction cannot lose), then records an
    `Abandonment` (unless `payload["abandon_writes"]` is false), sleeps
    `payload["abandon_seconds"]`, and raises when `payload["abandon"]` is
    `"raise"`. Its `recover` raises when `TEST_RECOVER_RAISES` is set. With
    `TEST_DIE_AFTER_RETIREMENT` set, the process SIGKILLs itself as soon as a
    retirement of its kind commits, before the call of `abandon` is claimed.
    With `payload["raise"]` set, `run` raises instead (`RuntimeError: boom on
    attempt N`), after a `KeyError` it handles, as a real failure does."""

    kind = "test.refuse"

    def budget(self) -> timedelta:
        return timedelta(seconds=float(os.environ.get("TEST_REFUSE_LEASE", "1")))

    def run(self, job: Job) -> Failed:
        _finish(_record(job))
        if job.payload.get("raise"):
            try:
                raise KeyError("upstream")
            except KeyError:
                raise RuntimeError(f"boom on attempt {job.attempts}")  # noqa: B904 - chained, as real ones are
        return Failed("refused on purpose")

    def abandon(self, job: Job, reason: str) -> None:
        if os.environ.get("TEST_ABANDON_LOG"):
            with open(os.environ["TEST_ABANDON_LOG"], "a") as book:
                book.write(f"{job.id} {os.getpid()} {time.time():.6f}\n")
        if job.payload.get("abandon_writes", True):
            Abandonment.objects.create(job_id=job.id, key=job.key, reason=reason, pid=os.getpid())
        time.sleep(float(job.payload.get("abandon_seconds", 0)))
        if job.payload.get("abandon") == "raise":
            raise RuntimeError("abandon raises on purpose")

    def recover(self) -> None:
        if os.environ.get("TEST_RECOVER_RAISES"):
            raise RuntimeError("recover raises on purpose")


def _die(sender: str, job: Job, attempt: int, outcome: str, **kwargs: object) -> None:
    """`job_finished` is told on the retirement's commit, before the claim of its
    `abandon` call: dying here is a crash between the two."""
    if outcome == "failed":
        os.kill(os.getpid(), signal.SIGKILL)


if os.environ.get("TEST_DIE_AFTER_RETIREMENT"):
    job_finished.connect(_die, sender=RefuseHandler.kind, weak=False)


@register
class ExitHandler(JobHandler):
    """Records the execution, then calls `sys.exit(1)`, as a library calling `exit()` might."""

    kind = "test.exit"

    def run(self, job: Job) -> Done:
        _record(job)
        sys.exit(1)


@register
class LimitedHandler(JobHandler):
    """Sleeps `payload["seconds"]` and succeeds; at most two attempts of the kind
    at once across every runner (`concurrency_limit`)."""

    kind = "test.limited"
    concurrency_limit = 2

    def run(self, job: Job) -> Done:
        execution = _record(job)
        time.sleep(float(job.payload.get("seconds", 0)))
        _finish(execution)
        return Done()


# -- Poison containment and recycling (issue 34): processes that die, leak, fail to start --

#: Set in a supervisor's environment, this module fails to import in its
#: children only (they alone have `JOBS_SUPERVISOR_PID`): a child that can
#: never start, as a broken deploy's would be.
if os.environ.get("TEST_CHILD_IMPORT_FAILS") and os.environ.get("JOBS_SUPERVISOR_PID"):
    raise ImportError("tests.jobapp.jobs fails to import in a supervisor's child, on purpose")


@register
class SigkillHandler(JobHandler):
    """Records the execution, then SIGKILLs its own process, as the OOM killer
    would: nothing runs after it, not even Python's exit handlers."""

    kind = "test.sigkill"

    def budget(self) -> timedelta:
        return timedelta(seconds=float(os.environ.get("TEST_POISON_LEASE", "1")))

    def run(self, job: Job) -> Done:
        _record(job)
        os.kill(os.getpid(), signal.SIGKILL)
        raise AssertionError("unreachable: the process is gone")

    def abandon(self, job: Job, reason: str) -> None:
        Abandonment.objects.create(job_id=job.id, key=job.key, reason=reason, pid=os.getpid())


#: What `LeakHandler` has leaked in this process, kept for ever.
LEAKED: list[bytes] = []


@register
class LeakHandler(JobHandler):
    """Records the execution, leaks `payload["mb"]` MB (20 by default) of
    memory that is really resident (written, not merely reserved), succeeds."""

    kind = "test.leak"

    def run(self, job: Job) -> Done:
        execution = _record(job)
        LEAKED.append(b"\x01" * (int(job.payload.get("mb", 20)) * 1024 * 1024))
        _finish(execution)
        return Done()


from tests.jobapp import schedule_jobs  # noqa: E402, F401  (the schedules tests' handlers)

# isort: split
# The bad-outcomes fault scenario's handlers (tests/faults/test_bad_outcomes.py).
from tests.jobapp import bad_outcomes  # noqa: E402, F401


@register
class FlowHandler(JobHandler):
    """A workflow's step: records its execution and returns its key with the
    results of the steps it waited for; `payload["fail"]` makes it `Failed`,
    `payload["retry_once"]` its first attempt a `Retry`."""

    kind = "test.flow"

    def run(self, job: Job) -> Done | Failed | Retry:
        execution = _record(job)
        if job.payload.get("fail"):
            _finish(execution)
            return Failed("told to fail")
        if job.payload.get("retry_once") and job.attempts == 1:
            _finish(execution)
            return Retry("told to retry")
        results = job.dependency_results()
        _finish(execution)
        return Done(result={"key": job.key, "saw": sorted(results)})

    def abandon(self, job: Job, reason: str) -> None:
        Abandonment.objects.create(job_id=job.id, key=job.key, reason=reason, pid=os.getpid())


@register
class GrowHandler(JobHandler):
    """A workflow's step that grows its workflow (`Workflow.of`): adds
    `payload["count"]` test.flow steps keyed "<key>-<n>", then each of
    `payload["adds"]` ({"kind", "key", "payload", "after", "when"}; `after`
    names steps, "@current" the running one), records its execution and
    returns its key with the results it waited for."""

    kind = "test.grow"

    def run(self, job: Job) -> Done:
        execution = _record(job)
        flow = Workflow.of(job)
        for n in range(job.payload.get("count", 0)):
            flow.add(JobSpec.now(FlowHandler.kind, f"{job.key}-{n}"))
        for add in job.payload.get("adds", []):
            spec = JobSpec.now(add.get("kind", FlowHandler.kind), add["key"])
            after = [
                flow.current if name == "@current" else flow.step(name)
                for name in add.get("after", [])
            ]
            flow.add(
                spec.with_payload(add.get("payload", {})),
                after=after,
                when=add.get("when", "done"),
            )
        flow.enqueue()
        results = job.dependency_results()
        _finish(execution)
        return Done(result={"key": job.key, "saw": sorted(results)})
