"""A job's queue and priority: what the spec names, else what its kind's handler
names, else the defaults ("default", 0), kept on the row by `enqueue` and by
`enqueue_many` on every database."""

from __future__ import annotations

import pytest

import jobs.queue
from jobs import Done, JobHandler, JobSpec, enqueue, enqueue_many
from jobs.models import Job
from jobs.registry import Registry

pytestmark = pytest.mark.django_db


class Mail(JobHandler):
    kind = "mail.send"
    queue = "emails"
    priority = 20

    def run(self, job):
        return Done()


@pytest.fixture
def handlers(monkeypatch):
    """The process's handlers, as `enqueue` reads them: only `Mail`."""
    registry = Registry()
    registry.register(Mail)
    monkeypatch.setattr(jobs.queue, "registry", registry)
    return registry


def stored(key: str) -> tuple[str, int]:
    return Job.objects.values_list("queue", "priority").get(key=key)


def test_a_spec_naming_neither_goes_to_the_default_queue_at_priority_zero():
    assert enqueue(JobSpec.now("reports.build", "r1"))
    assert stored("r1") == ("default", 0)


@pytest.mark.parametrize("many", [False, True], ids=["enqueue", "enqueue_many"])
def test_the_row_keeps_the_queue_and_priority_the_spec_names(many):
    spec = JobSpec.now("reports.build", "r1").with_queue("reports.eu-1").with_priority(-100)
    queued = enqueue_many([spec]) if many else [enqueue(spec)]
    assert queued == [True]
    assert stored("r1") == ("reports.eu-1", -100)


@pytest.mark.parametrize("many", [False, True], ids=["enqueue", "enqueue_many"])
def test_a_spec_naming_neither_takes_its_handlers_queue_and_priority(handlers, many):
    spec = JobSpec.now("mail.send", "m1")
    assert (enqueue_many([spec]) if many else [enqueue(spec)]) == [True]
    assert stored("m1") == ("emails", 20)


def test_what_the_spec_names_wins_over_its_handler_field_by_field(handlers):
    assert enqueue(JobSpec.now("mail.send", "own-queue").with_queue("bulk"))
    assert enqueue(JobSpec.now("mail.send", "own-priority").with_priority(100))
    assert stored("own-queue") == ("bulk", 20), "the handler still gives the priority"
    assert stored("own-priority") == ("emails", 100), "the handler still gives the queue"


def test_a_batch_keeps_each_specs_own_queue_and_priority(handlers):
    specs = [
        JobSpec.now("mail.send", "a"),
        JobSpec.now("reports.build", "b").with_priority(5),
        JobSpec.now("reports.build", "c").with_queue("q-1"),
    ]
    assert enqueue_many(specs) == [True, True, True]
    assert [stored(key) for key in "abc"] == [("emails", 20), ("default", 5), ("q-1", 0)]


def test_the_identity_is_per_kind_not_per_queue():
    assert enqueue(JobSpec.now("reports.build", "r1").with_queue("a"))
    assert not enqueue(JobSpec.now("reports.build", "r1").with_queue("b")), (
        "a live row holds (kind, key) whatever queue the second spec names"
    )
    assert Job.objects.filter(key="r1").count() == 1


def test_the_extremes_of_priority_and_the_longest_queue_name_round_trip():
    longest = "q" * 100
    assert enqueue(JobSpec.now("reports.build", "hi").with_priority(100).with_queue(longest))
    assert enqueue(JobSpec.now("reports.build", "lo").with_priority(-100))
    assert stored("hi") == (longest, 100)
    assert stored("lo") == ("default", -100)
