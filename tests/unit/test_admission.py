"""A pass's admission (`jobs.runner.admission`), built from plain parts: no
database, since what is proved is what a pass asks the store for."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from jobs.config import JobsSettings
from jobs.controls import Controls
from jobs.runner.admission import Admissions, lane_shares
from jobs.runner.attempt import Attempt, lease_for
from jobs.runner.slots import Slots
from jobs.store.admission import Admission

NOW = datetime(2030, 1, 1, tzinfo=UTC)
BUDGET = timedelta(minutes=5)


class InFlight:
    """What `rooms` reads of an attempt holding a slot: its job's queue."""

    def __init__(self, queue: str) -> None:
        self.job = self
        self.queue = queue


def admissions(*in_flight: str, **caps: int) -> Admissions:
    slots = Slots(threading.Event())
    slots.started([cast(Attempt, InFlight(queue)) for queue in in_flight])
    return Admissions("host:1", slots, ["emails", "reports"], caps, {"limited": 2})


def test_a_pass_admits_its_free_slots_and_the_kinds_not_paused_each_with_its_lease():
    settings = JobsSettings(heartbeat_seconds=0)
    controls = Controls(paused_kinds=frozenset({"paused"}), kind_limits={"limited": 1})
    budgets = {"plain": BUDGET, "paused": BUDGET, "limited": BUDGET}

    admitted = admissions().for_pass(NOW, 3, settings, budgets, controls, [])

    assert (admitted.now, admitted.limit, admitted.runner) == (NOW, 3, "host:1")
    assert admitted.leases == {"plain": lease_for(BUDGET), "limited": lease_for(BUDGET)}
    assert admitted.queues == ["emails", "reports"]
    assert admitted.kind_limits == {"limited": 1}, "the database's limit over the handler's"
    assert admitted.kind_caps is None, "caps are the claim loop's, one statement at a time"


def test_a_capped_queues_room_is_its_cap_less_its_attempts_in_flight_bar_those_this_pass_settles():
    settling: list[tuple[Any, Any]] = [(InFlight("emails"), None)]

    admitted = admissions("emails", "emails", "reports", emails=3).for_pass(
        NOW, 5, JobsSettings(), {"plain": BUDGET}, Controls(), settling
    )

    assert admitted.queue_rooms == {"emails": 2}


def test_a_queues_cap_and_max_concurrent_are_shared_between_lanes_alike():
    for total in range(1, 12):
        for lanes in range(1, 5):
            by_cap = [lane_shares({"q": total}, lane, lanes)["q"] for lane in range(lanes)]
            by_slots = [
                Slots(threading.Event(), lane, lanes).share(JobsSettings(max_concurrent=total))
                for lane in range(lanes)
            ]
            assert by_cap == by_slots
            assert sum(by_cap) == total


def test_a_narrowed_admission_keeps_who_claims_and_what_is_paused():
    admitted = Admission(NOW, {"plain": BUDGET}, 8, "host:1", None, ["reports"])

    one = admitted.narrowed({"plain": BUDGET}, 2, ["emails"], {"plain": 1})

    assert (one.limit, one.queues, one.kind_caps) == (2, ["emails"], {"plain": 1})
    assert (one.now, one.runner, one.paused_queues) == (NOW, "host:1", ["reports"])
    assert admitted.limit == 8, "the pass's own admission is left as it was"
