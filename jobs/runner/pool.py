"""Worker threads that outlive a stuck attempt.

A thread cannot be cancelled, so an attempt that overruns its budget keeps its
thread until the handler returns. The pool therefore grows instead of waiting:
an item no idle thread can take starts a new one, and the producer, not the
pool, decides how many attempts may run.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
import traceback
from collections.abc import Callable, Iterable

from django.db import connections

from jobs import hot_settings, log

#: How many calls of `forget_queries` on one thread clear the log once.
FORGET_QUERIES_EVERY = 100

_calls = threading.local()

#: Set when the database cannot give every worker thread a connection of its
#: own (`jobs.runner.connection_budget`): each thread then closes its
#: connections after each item. Kept, the few connections there are stayed
#: with the first threads that opened them while every other thread's
#: queries, and the settles after them, were refused; handed back, they go to
#: whichever thread asks next. Process-wide, as the server's limit is: never
#: cleared, since a server that was full once may be again (reconnecting
#: costs an attempt that touches the database a few milliseconds).
_hand_back = threading.Event()
#: With `_hand_back`, when the number of connections the process can have is
#: known: how many threads of every pool of the process may run an item at
#: once, so that each has a connection for its handler and its settle, and
#: the others wait for one rather than be refused it.
_gate: threading.BoundedSemaphore | None = None


def hand_back_connections(at_most: int | None = None) -> None:
    """From now on, every worker thread closes its connections after each item;
    with `at_most` (the first time it is given), no more than that many
    threads run items at once in this process, the others waiting their turn."""
    global _gate
    if at_most is not None and _gate is None:
        _gate = threading.BoundedSemaphore(max(1, at_most))
    _hand_back.set()


def handing_back() -> bool:
    """Whether worker threads close their connections after each item."""
    return _hand_back.is_set()


def forget_queries() -> None:
    """Clear the query log DEBUG keeps on this thread's connections, every
    `FORGET_QUERIES_EVERY` calls.

    Django logs every query while DEBUG is on and clears the log when a
    request starts; a runner's loop and its workers never start one, so each
    connection kept its last 9,000 queries and a long drain grew the runner.
    The loop calls this each pass and a worker after each attempt, so a log
    holds at most about a hundred passes' or attempts' queries. Not on every
    call: finding this thread's connections (an asgiref `Local`) costs more
    than a no-op job (README, "Costs behind the hot path"). A log someone is reading
    (`CaptureQueriesContext` forces the debug cursor) is left alone.
    """
    if not hot_settings.debug():
        return  # nothing is logged without DEBUG
    calls = getattr(_calls, "count", 0) + 1
    _calls.count = calls % FORGET_QUERIES_EVERY
    if calls < FORGET_QUERIES_EVERY:
        return
    for connection in connections.all(initialized_only=True):
        if not connection.force_debug_cursor:
            connection.queries_log.clear()


class WorkerPool[T]:
    """Threads for items, one item per thread at a time, never fewer threads
    than items waiting for one.

    Threads are woken one at a time: `submit` wakes one (or starts one when
    none is idle), and each thread that takes an item while more wait wakes
    the next, unless another is already on its way. Short items are then run
    by the few threads already awake, one after another, instead of each
    waking a thread of its own: waking a thread, and handing it the GIL, cost
    more than a no-op job. An item that blocks delays the next one by one
    wake-up at most (tens of microseconds), since a taker always wakes the next
    before running its own.
    """

    def __init__(self, work: Callable[[T], None], name: str) -> None:
        self._work = work
        self._name = name
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._items: collections.deque[T] = collections.deque()
        #: Threads waiting for an item.
        self._idle = 0
        #: A thread has been woken (or started) to take an item and is not
        #: there yet: the next wake-up waits until it is.
        self._waking = False
        self._closing = False
        self._threads: list[threading.Thread] = []

    def submit(self, item: T) -> None:
        self.submit_many([item])

    def submit_many(self, items: Iterable[T]) -> None:
        with self._lock:
            self._items.extend(items)
            self._call_next()

    def _call_next(self) -> None:
        """With the lock held: make sure a thread is coming for the items left."""
        if not self._items or self._waking or self._closing:
            return
        self._waking = True
        if self._idle:
            self._wake.notify()
            return
        thread = threading.Thread(
            target=self._serve, name=f"{self._name}-{len(self._threads) + 1}", daemon=True
        )
        self._threads.append(thread)
        thread.start()

    def _take(self, woken: bool) -> T | None:
        """The next item, waiting for one; None when the pool is closing and empty."""
        with self._lock:
            if woken:
                self._waking = False
            while not self._items:
                if self._closing:
                    return None
                self._idle += 1
                self._wake.wait()
                self._idle -= 1
                self._waking = False
            item = self._items.popleft()
            self._call_next()
            return item

    def _serve(self) -> None:
        try:
            woken = True  # started by `_call_next`, as a woken thread is
            while (item := self._take(woken)) is not None:
                woken = False
                gate = _gate
                if gate is not None:
                    gate.acquire()
                try:
                    self._work(item)
                except BaseException as error:
                    # The work reports its own failures; anything that still
                    # escapes, a SystemExit included (on this thread it is no
                    # request to stop the process), must not end a thread the
                    # pool counts on.
                    log.event(
                        "worker_error",
                        logging.ERROR,
                        error=repr(error),
                        traceback=traceback.format_exc(),
                    )
                finally:
                    forget_queries()
                    if _hand_back.is_set():
                        connections.close_all()
                    if gate is not None:
                        gate.release()
        finally:
            # Each thread holds its own database connections; close them here
            # rather than leave them to the garbage collector.
            connections.close_all()

    def close(self, timeout: float = 5.0) -> None:
        """Ask every thread to finish and wait up to `timeout` seconds in all.

        Items already submitted are still run. A thread still inside a
        handler is not waited for beyond that: it is a daemon, and its
        attempt's row is recovered by lease expiry.
        """
        with self._lock:
            threads = list(self._threads)
            self._threads.clear()
            self._closing = True
            self._wake.notify_all()
        give_up = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, give_up - time.monotonic()))

    def idle(self) -> int:
        """How many threads are waiting for an item."""
        with self._lock:
            return self._idle

    @property
    def size(self) -> int:
        return len(self._threads)
