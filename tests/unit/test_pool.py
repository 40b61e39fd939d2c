"""The worker pool: every item gets a thread when it needs one, and short items
share the threads already awake.

Real threads, no database: what is proved is how items meet threads.
"""

import threading

import pytest

from jobs.runner.pool import WorkerPool
from tests.helpers import wait_until

#: How long a test waits for another thread before calling it hung.
WAIT = 10


def run_all(pool: WorkerPool[int], items: range, finished: threading.Semaphore) -> None:
    """Submit `items` and wait until the work has released `finished` once for each."""
    for item in items:
        pool.submit(item)
    for _ in items:
        assert finished.acquire(timeout=WAIT), "every item ran"


def test_items_that_block_all_run_at_once_each_on_a_thread_of_its_own():
    """A blocking item must never hold back the items behind it: 16 items
    that each wait for all 16 to be running can only finish if they are."""
    items = 16
    all_running = threading.Barrier(items, timeout=WAIT)
    finished = threading.Semaphore(0)

    def work(item: int) -> None:
        all_running.wait()
        finished.release()

    pool: WorkerPool[int] = WorkerPool(work, name="blocking")
    try:
        run_all(pool, range(items), finished)  # finishes only if all ran at once
    finally:
        pool.close()

    assert pool.size == 0, "closed"


def test_short_items_submitted_together_do_not_each_wake_an_idle_thread():
    """With 64 threads idle (left by 64 items that ran at once), 64 items that
    return at once are run by the few threads already awake: each wake-up
    costs more than such an item."""
    items = 64
    all_running = threading.Barrier(items, timeout=WAIT)
    short: set[str] = set()
    finished = threading.Semaphore(0)

    def work(item: int) -> None:
        if item < items:
            all_running.wait()
        else:
            short.add(threading.current_thread().name)
        finished.release()

    pool: WorkerPool[int] = WorkerPool(work, name="short")
    try:
        run_all(pool, range(items), finished)
        assert wait_until(lambda: pool.idle() == items), "their threads are idle"
        run_all(pool, range(items, 2 * items), finished)
    finally:
        pool.close()

    assert len(short) <= items // 4, f"{len(short)} threads woken for {items} short items"


def test_close_runs_the_items_already_submitted_before_the_threads_exit():
    ran: list[int] = []
    release = threading.Event()

    def work(item: int) -> None:
        release.wait(WAIT)
        ran.append(item)

    pool: WorkerPool[int] = WorkerPool(work, name="closing")
    for item in range(3):
        pool.submit(item)
    threading.Timer(0.05, release.set).start()
    pool.close(timeout=WAIT)

    assert sorted(ran) == [0, 1, 2]


def test_a_thread_whose_item_raises_goes_on_to_the_next_item():
    ran: list[int] = []
    finished = threading.Semaphore(0)

    def work(item: int) -> None:
        try:
            if item == 0:
                raise RuntimeError("a bug in the work")
            ran.append(item)
        finally:
            finished.release()

    pool: WorkerPool[int] = WorkerPool(work, name="raising")
    try:
        run_all(pool, range(3), finished)
    finally:
        pool.close()

    assert sorted(ran) == [1, 2], "the items after the one that raised still ran"


@pytest.mark.parametrize(
    "escape",
    [SystemExit(1), KeyboardInterrupt(), GeneratorExit()],
    ids=lambda error: type(error).__name__,
)
def test_a_thread_whose_item_raises_a_base_exception_lives_on_to_take_the_next_item(escape):
    """A SystemExit on a worker thread is no request to stop the process; let
    through, it ended the thread silently and the pool had one fewer."""
    threads: list[str] = []
    finished = threading.Semaphore(0)

    def work(item: int) -> None:
        try:
            threads.append(threading.current_thread().name)
            if item == 0:
                raise escape
        finally:
            finished.release()

    pool: WorkerPool[int] = WorkerPool(work, name="escaping")
    try:
        pool.submit(0)
        assert finished.acquire(timeout=WAIT), "the first item ran"
        assert wait_until(lambda: pool.idle() == 1, WAIT), "its thread went back to waiting"
        pool.submit(1)
        assert finished.acquire(timeout=WAIT), "the next item ran"
    finally:
        pool.close()

    assert threads[0] == threads[1], "the thread that raised took the next item itself"
    assert pool.size == 0, "closed"
