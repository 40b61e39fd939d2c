"""`manage.py jobs enqueue` says what it inserted, not what a runner has made of the
row since; it takes the queue, the priority, and a payload from a file or
standard input; and bad input is refused with nothing written.

Standard input in a real process, with a payload no shell argument could
carry, is tests/acceptance/test_cli_process.py.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.core.management.base import CommandError
from django.utils import timezone
from freezegun import freeze_time

from jobs.cli import enqueue as enqueue_verb
from jobs.models import Job, State
from jobs.queue import enqueue
from tests.integration.cli.test_cli import jobs

pytestmark = pytest.mark.django_db


def _claimed(job: Job) -> None:
    """What a runner does to a row the moment it is visible: claims it."""
    job.state, job.attempts = State.RUNNING, 1
    job.lease_expires_at = timezone.now() + timedelta(seconds=30)


def _done(job: Job) -> None:
    """What a fast runner has done by then: settled it."""
    job.state, job.finished_at = State.DONE, timezone.now()


@pytest.mark.parametrize("runner", [_claimed, _done], ids=["claimed", "settled"])
@freeze_time("2026-03-01 12:00:00")
def test_enqueue_says_what_it_inserted_though_a_runner_took_the_row_at_once(runner, monkeypatch):
    def enqueue_then_a_runner_acts(spec, **kwargs):
        queued = enqueue(spec, **kwargs)
        job = Job.objects.get(kind=spec.kind, key=spec.key)
        runner(job)
        job.save()
        return queued

    monkeypatch.setattr(enqueue_verb, "enqueue", enqueue_then_a_runner_acts)

    status, said = jobs("enqueue", "test.record", "k1", "--delay", "2")

    job = Job.objects.get()
    assert status == 0
    assert said == (
        f"queued test.record:k1 (id {job.id}, queue default, priority 0, "
        "run_at 2026-03-01T12:00:02+00:00)\n"
    ), "the id, queue, priority and run_at inserted, not the runner's lease or a missing id"


@freeze_time("2026-03-01 12:00:00")
def test_enqueue_queues_into_the_queue_and_at_the_priority_given():
    status, said = jobs("enqueue", "test.record", "k1", "--queue", "emails", "--priority", "-7")

    job = Job.objects.get()
    assert status == 0
    assert (job.queue, job.priority) == ("emails", -7)
    assert said.endswith(
        f"queued test.record:k1 (id {job.id}, queue emails, priority -7, "
        "run_at 2026-03-01T12:00:00+00:00)\n"
    ), said


@pytest.mark.parametrize("priority", ["101", "-101", "high", "1.5"])
def test_a_priority_outside_the_specs_range_is_refused_and_nothing_queued(priority):
    with pytest.raises(CommandError, match="argument --priority: must be a whole number from -100"):
        jobs("enqueue", "test.record", "k1", "--priority", priority)
    assert not Job.objects.exists()


def test_enqueue_reads_the_payload_from_a_file(tmp_path):
    path = tmp_path / "payload.json"
    path.write_text(json.dumps({"order": 42, "lines": ["a" * 10] * 3}, indent=2))

    status, _ = jobs("enqueue", "test.record", "k1", "--payload-file", str(path))

    assert status == 0
    assert Job.objects.get().payload == {"order": 42, "lines": ["a" * 10] * 3}


@pytest.mark.parametrize(
    ("content", "refusal"),
    [
        (b"{nope", "argument --payload-file: '.*' is not valid JSON"),
        (b"[1, 2]", "argument --payload-file: '.*' must be a JSON object such as"),
        (b"", "is not valid JSON"),
        (b'{"a": "\xff"}', "is not valid JSON"),
    ],
    ids=["bad-json", "an-array", "empty", "not-utf-8"],
)
def test_a_payload_file_that_is_not_a_json_object_is_refused_and_nothing_queued(
    tmp_path, content, refusal
):
    path = tmp_path / "payload.json"
    path.write_bytes(content)

    with pytest.raises(CommandError, match=refusal):
        jobs("enqueue", "test.record", "k1", "--payload-file", str(path))
    assert not Job.objects.exists()


def test_a_payload_file_that_cannot_be_read_is_refused_in_words(tmp_path):
    with pytest.raises(CommandError, match=r"cannot read '.*missing\.json': No such file"):
        jobs("enqueue", "test.record", "k1", "--payload-file", str(tmp_path / "missing.json"))
    assert not Job.objects.exists()


def test_payload_and_payload_file_together_are_refused(tmp_path):
    path = tmp_path / "payload.json"
    path.write_text("{}")

    with pytest.raises(CommandError, match="not allowed with argument --payload"):
        jobs("enqueue", "test.record", "k1", "--payload", "{}", "--payload-file", str(path))
    assert not Job.objects.exists()
