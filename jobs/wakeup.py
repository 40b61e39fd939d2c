"""Waking runners: the one place that knows how a runner hears of new work or a new config.

A runner sleeps until woken or until its poll interval passes, so how it is
woken sets how soon work starts (README, "Wake-up grain"):

- In the process that queued the work, at once: `wake_runners` rings the
  `doorbell` when the transaction commits (a runner woken earlier would not
  see the row, and a rolled-back one wakes nobody).
- In other processes, within milliseconds where the database's notifier
  (`jobs.notifier`) can carry a notice: its `notify` sends it at commit and
  never on rollback, and each runner's `Listener` hears it through its
  `notices`. PostgreSQL sends a NOTIFY inside the transaction (an insert's
  own statement sends it: `Store.inserts_notify`), heard on a LISTEN
  connection of the runner's own; SQLite, whose processes share one machine,
  sends a datagram after the commit to a Unix socket each runner binds beside
  the others (`jobs.notifier.sqlite_doorbell`). A SQLite runner that cannot
  bind one says so once and polls.
- On MySQL nothing crosses processes: a runner finds the work at its next
  poll, at most `poll_interval_ms` later.

A saved `JobsConfig` row wakes runners the same way, with `CONFIG_NOTICE`, so
they apply it at once (`config_saved`, connected in `JobsAppConfig.ready()`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from django.db import DEFAULT_DB_ALIAS, DatabaseError, transaction

from jobs import live_config, log
from jobs.notifier import for_database
from jobs.stopping import Stopping

#: The payload of the notice that says "the config row was saved"; any other
#: payload means "there is work".
CONFIG_NOTICE = "config"

#: The listener's first wait before reconnecting to a database that dropped
#: it, doubling up to the last.
RECONNECT_FIRST_SECONDS = 0.5
RECONNECT_MAX_SECONDS = 5.0


class Doorbell:
    """Process-wide doorbell: each runner subscribes its own event, `ring` sets them all.

    One event per runner, so a runner clearing its own doorbell never swallows
    another's.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: set[threading.Event] = set()

    def subscribe(self) -> threading.Event:
        event = threading.Event()
        with self._lock:
            self._events.add(event)
        return event

    def unsubscribe(self, event: threading.Event) -> None:
        with self._lock:
            self._events.discard(event)

    def ring(self) -> None:
        with self._lock:
            events = list(self._events)
        for event in events:
            event.set()


#: The doorbell of every runner in this process.
doorbell = Doorbell()


def wake_runners(using: str | None = None, *, notice: str = "", notified: bool = False) -> None:
    """Wake every runner when the current transaction commits (at once in autocommit).

    Runners in other processes through the notifier's `notify`, with `notice`
    as its payload, unless `notified`: the insert has already sent it (where
    the store `inserts_notify`, so an enqueue costs no round trip more than
    its insert). Runners in this process through the doorbell, rung on commit.
    """
    if not notified:
        notifier = for_database(using)
        notifier.notify(notice)
        using = notifier.using
    transaction.on_commit(doorbell.ring, using=using)


def config_saved(sender: type[Any], *, using: str, **kwargs: Any) -> None:
    """`post_save` of `JobsConfig` (and a `Control` saved or deleted): runners
    apply the change at once, not at their
    next config check; those in this process see the save counted before the
    doorbell rings (`jobs.live_config.generation`)."""
    transaction.on_commit(live_config.saved, using=using)
    wake_runners(using, notice=CONFIG_NOTICE)


class Listener:
    """The thread that keeps one runner listening for other processes' notices.

    It holds the notifier's listening connection (`Notifier.notices`) and, when the
    database drops it, logs `runner_listener_lost` and reconnects with a
    doubling wait, the runner polling meanwhile. After each (re)connect it
    calls `on_work` once, since work queued while nobody listened announced
    itself to nobody; then `on_config` for each `CONFIG_NOTICE` and `on_work`
    for any other notice. Only where the notifier `wakes_other_processes`.
    """

    def __init__(
        self,
        using: str | None,
        *,
        on_work: Callable[[], None],
        on_config: Callable[[], None],
    ) -> None:
        self.using = using or DEFAULT_DB_ALIAS
        self.on_work = on_work
        self.on_config = on_config
        self._stopping = Stopping()
        self._thread: threading.Thread | None = None
        self._retry_in = RECONNECT_FIRST_SECONDS

    def start(self) -> None:
        self._thread = threading.Thread(target=self._listen, name="jobs-listener", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop listening; wait up to `timeout` seconds for the thread to end.

        The notifier's wait hears `Stopping` at once, so this takes as long as
        the thread needs to close its connection, not a tick of its wait.
        """
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                return  # stuck in the driver: it may still select on the socket pair
        self._stopping.close()

    def _listen(self) -> None:
        notifier = for_database(self.using)
        while not self._stopping.is_set():
            try:
                for payload in notifier.notices(self._stopping, self._listening):
                    if payload == CONFIG_NOTICE:
                        self.on_config()
                    else:
                        self.on_work()
            except DatabaseError as error:
                log.event(
                    "runner_listener_lost",
                    logging.WARNING,
                    outcome="reconnecting",
                    error=str(error).strip(),
                    retry_in_seconds=self._retry_in,
                )
                self._stopping.wait(self._retry_in)
                self._retry_in = min(self._retry_in * 2, RECONNECT_MAX_SECONDS)

    def _listening(self, channel: str) -> None:
        """The notifier is listening again: anything sent before was missed."""
        log.event("runner_listening", channel=channel)
        self._retry_in = RECONNECT_FIRST_SECONDS
        self.on_work()
