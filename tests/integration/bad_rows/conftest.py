"""Fixtures for the bad-rows tests: a quick poll for every test, and the recording
handler registered."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from jobs.registry import Registry
from tests.integration.bad_rows.support import KIND, Recording


@pytest.fixture(autouse=True)
def quick_poll(configure: Callable[..., None]) -> None:
    configure(poll_interval_ms=20)


@pytest.fixture
def handler(registry: Registry) -> Recording:
    registry.register(Recording)
    found = registry.get(KIND)
    assert isinstance(found, Recording)
    return found
