"""Fixtures for the runner's tests: a quick poll for every test, and a blocking handler."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from jobs.registry import Registry
from tests.integration.runner.support import Blocks, install


@pytest.fixture(autouse=True)
def quick_poll(configure: Callable[..., None]) -> None:
    """An idle pass in these tests should not cost the default second."""
    configure(poll_interval_ms=20)


@pytest.fixture
def blocked(registry: Registry) -> Iterator[Blocks]:
    """A blocking handler that is always released at teardown, so no thread is left hanging."""
    handler = install(registry, Blocks)
    yield handler
    handler.release.set()
