"""Fixtures for the settles' tests: a quick poll, a recording handler registered
next to one that always succeeds, and settle tries that do not sleep."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from jobs.registry import Registry
from jobs.runner.settle_tries import SettleTries
from tests.integration.settles.support import Bad, Good


@pytest.fixture(autouse=True)
def quick_poll(configure: Callable[..., None]) -> None:
    configure(poll_interval_ms=20, max_concurrent=8)


@pytest.fixture(autouse=True)
def no_pauses(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every settle's pauses between tries, recorded rather than slept."""
    paused: list[float] = []
    original = SettleTries.__init__

    def quick(self: SettleTries, *args: object, **kwargs: object) -> None:
        original(self, *args, **kwargs)  # type: ignore[arg-type]
        self.sleep = paused.append

    monkeypatch.setattr(SettleTries, "__init__", quick)
    return paused


@pytest.fixture
def bad(registry: Registry) -> Bad:
    registry.register(Bad)
    registry.register(Good)
    found = registry.get(Bad.kind)
    assert isinstance(found, Bad)
    return found


@pytest.fixture
def good(registry: Registry, bad: Bad) -> Good:
    found = registry.get(Good.kind)
    assert isinstance(found, Good)
    return found
