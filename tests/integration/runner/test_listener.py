"""A runner's listener stops when asked, at once: it waits on its socket and on the
stop request together, never on a tick of its own. Every runner's exit waits
for it (`Runner.close`), so a tick was paid by every deploy."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from jobs.notifier import for_database, sqlite_doorbell
from jobs.wakeup import Listener
from tests.doorbells import own_tempdir
from tests.helpers import wait_until
from tests.integration.runner.support import WAIT

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not for_database().wakes_other_processes,
        reason="only a store that wakes other processes has a listener",
    ),
]

#: A tick no test could sit out: a stop seen only at the tick would time out.
AN_HOUR = 3600.0


@pytest.fixture
def long_ticks(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Ticks an hour long, in this process's own temp dir (SQLite's doorbell
    directory lives there)."""
    monkeypatch.setattr(sqlite_doorbell, "TICK_SECONDS", AN_HOUR)
    with own_tempdir(monkeypatch):
        yield


def listener_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "jobs-listener"]


def test_a_listening_listener_stops_at_once_rather_than_at_its_next_tick(long_ticks):
    listening = threading.Event()
    listener = Listener(None, on_work=listening.set, on_config=lambda: None)
    listener.start()
    wait_until(listening.is_set, WAIT, "the listener listens")

    asked = time.monotonic()
    listener.stop(WAIT)
    took = time.monotonic() - asked

    assert not listener_threads(), "the listener's thread has ended"
    assert took < 1, f"the stop ended the listener's wait at once, not after {took:.1f}s"
