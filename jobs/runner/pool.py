"""Worker threads that outlive a stuck attempt.

A thread cannot be cancelled, so an attempt that overruns its budget keeps its
thread until the handler returns. The pool therefore grows instead of waiting:
every submit either hands the item to a thread that is free or starts a new
one, and the producer, not the pool, decides how many attempts may run.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import traceback
from collections.abc import Callable

from django.conf import settings
from django.db import connections

from jobs import log


def forget_queries() -> None:
    """Clear the query log DEBUG keeps on this thread's connections.

    Django logs every query while DEBUG is on and clears the log when a
    request starts; a runner's loop and its workers never start one, so each
    connection kept its last 9,000 queries (the claim's text names every id it
    settles): a 100,000-job drain grew a runner by ~22 MB. The loop calls this
    each pass and a worker after each attempt. A log someone is reading
    (`CaptureQueriesContext` forces the debug cursor) is left alone.
    """
    if not settings.DEBUG:
        return  # nothing is logged without DEBUG
    for connection in connections.all(initialized_only=True):
        if not connection.force_debug_cursor:
            connection.queries_log.clear()


class WorkerPool[T]:
    def __init__(self, work: Callable[[T], None], name: str) -> None:
        self._work = work
        self._name = name
        self._queue: queue.SimpleQueue[T | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._free = 0
        self._threads: list[threading.Thread] = []

    def submit(self, item: T) -> None:
        with self._lock:
            if self._free:
                self._free -= 1
            else:
                thread = threading.Thread(
                    target=self._serve, name=f"{self._name}-{len(self._threads) + 1}", daemon=True
                )
                self._threads.append(thread)
                thread.start()
        self._queue.put(item)

    def _serve(self) -> None:
        try:
            while (item := self._queue.get()) is not None:
                try:
                    self._work(item)
                except Exception as error:
                    # The work reports its own failures; anything that still
                    # escapes must not kill a thread the pool counts as free.
                    log.event(
                        "worker_error",
                        logging.ERROR,
                        error=repr(error),
                        traceback=traceback.format_exc(),
                    )
                finally:
                    forget_queries()
                    with self._lock:
                        self._free += 1
        finally:
            # Each thread holds its own database connections; close them here
            # rather than leave them to the garbage collector.
            connections.close_all()

    def close(self, timeout: float = 5.0) -> None:
        """Ask every thread to finish and wait up to `timeout` seconds in all.

        A thread still inside a handler is not waited for beyond that: it is a
        daemon, and its attempt's row is recovered by lease expiry.
        """
        with self._lock:
            threads = list(self._threads)
            self._threads.clear()
            self._free = 0
        for _ in threads:
            self._queue.put(None)
        give_up = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, give_up - time.monotonic()))

    def idle(self) -> int:
        """How many threads are waiting for work."""
        with self._lock:
            return self._free

    @property
    def size(self) -> int:
        return len(self._threads)
