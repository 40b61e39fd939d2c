"""`runjobs --burst` as a real process: drains what is ready, then exits 0."""

import pytest

from jobs import JobSpec, enqueue
from jobs.models import Job
from tests.jobapp.models import Execution

pytestmark = pytest.mark.django_db(transaction=True)


def test_runjobs_burst_drains_every_ready_job_then_exits_zero(runjobs):
    for n in range(5):
        assert enqueue(JobSpec.now("test.record", f"k{n}"))
    process = runjobs("--burst")
    assert process.wait() == 0, process.output()
    assert set(Job.objects.filter(kind="test.record").values_list("state", flat=True)) == {"done"}
    assert Execution.objects.count() == 5, "every job ran exactly once"


def test_runjobs_with_two_lanes_drains_every_ready_job_once_then_exits_zero(runjobs):
    for n in range(20):
        assert enqueue(JobSpec.now("test.record", f"k{n}"))
    process = runjobs("--burst", "--lanes", "2")
    assert process.wait() == 0, process.output()
    assert set(Job.objects.filter(kind="test.record").values_list("state", flat=True)) == {"done"}
    assert Execution.objects.count() == 20, "every job ran exactly once"
