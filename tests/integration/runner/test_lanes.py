"""Lanes: the runners of one process split max_concurrent between them."""

from __future__ import annotations

import pytest

from jobs import Done, JobSpec, enqueue
from jobs.models import Job, RunnerProcess, State
from tests.integration.runner.support import Blocks, Succeeds

pytestmark = pytest.mark.django_db(transaction=True)


def test_lanes_split_max_concurrent_into_shares_that_add_up_to_it(make_runner, configure):
    configure(max_concurrent=8)
    shares = [make_runner(lane=lane, lanes=3) for lane in range(3)]
    config = shares[0].settings()

    assert [runner.slots.share(config) for runner in shares] == [3, 3, 2]

    configure(max_concurrent=1)
    pair = [make_runner(lane=lane, lanes=2) for lane in range(2)]
    assert [runner.slots.share(pair[0].settings()) for runner in pair] == [1, 0], (
        "a lane without a share claims nothing"
    )


def test_a_runner_refuses_a_lane_outside_its_number_of_lanes(make_runner):
    with pytest.raises(ValueError, match="lane 2 of 2"):
        make_runner(lane=2, lanes=2)


def test_two_lanes_together_never_run_more_than_max_concurrent(
    registry, make_runner, configure, blocked
):
    configure(max_concurrent=3)
    for n in range(10):
        assert enqueue(JobSpec.now(Blocks.kind, f"k{n}"))
    lanes = [make_runner(registry=registry, lane=lane, lanes=2) for lane in range(2)]

    assert [runner.run_pass() for runner in lanes] == [(2, 2), (1, 1)]
    assert blocked.wait_running(3)
    assert [runner.run_pass() for runner in lanes] == [(0, 0), (0, 0)], "every slot is busy"
    assert Job.objects.filter(state=State.RUNNING).count() == 3

    blocked.release.set()
    for runner in lanes:
        runner.drain()

    assert blocked.most_at_once == 3
    assert set(Job.objects.values_list("state", flat=True)) == {State.DONE}


def test_a_lane_reports_itself_as_a_runner_naming_its_lane_and_its_share_of_the_slots(
    registry, make_runner, configure
):
    configure(max_concurrent=8)
    seen: list[tuple[int, int, int, str]] = []

    class LooksAtRunners(Succeeds):
        kind = "test.looks_at_runners"

        def run(self, job: Job) -> Done:
            seen.extend(
                (r.lane, r.lanes, r.max_concurrent, str(r)) for r in RunnerProcess.objects.all()
            )
            return Done()

    registry.register(LooksAtRunners)
    assert enqueue(JobSpec.now(LooksAtRunners.kind, "k"))
    make_runner(registry=registry, lane=1, lanes=2).drain()

    ((lane, lanes, slots, shown),) = seen
    assert (lane, lanes, slots) == (1, 2, 4), "lane 1 of 2 with half of max_concurrent"
    assert shown.endswith(" lane 1 of 2"), shown
