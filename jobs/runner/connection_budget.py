"""How many database connections a runner process opens, and whether the server
has that many left: checked once at start, and again when a handler is refused one.

What a process opens, counted from the code (README, "Connections"):

- each lane (`runjobs --lanes`): its loop's connection (claims, the settles
  of `Done`s, the config row), its heartbeat thread's (the clock read and
  the leases renewed, `jobs.runner.heartbeat`), and, where the database
  carries wake-ups (PostgreSQL) and the runner is not a `--burst`, its
  listener's;
- each worker thread: its own, opened by the first attempt on it that
  touches the database (the handler's queries, a settle that is not `Done`,
  an attempt-record entry), kept while the thread lives. The threads grow to
  `max_concurrent` (the lanes' shares add up to it), and past it by one for
  each attempt still running after its budget (its thread is never taken back);
- the metrics endpoint (`--metrics-port`): one while a scrape reads the table.

Below that, the server refuses the connections past its limit: a handler's
query is refused (its attempt ends as a `Retry`, `jobs.runner.executor`), and
so would be the settle that follows on that thread. So when the server
cannot hold the whole budget, or once it refuses a handler a connection,
worker threads hand their connection back after each attempt
(`pool.hand_back_connections`): the connections the process can have then
pass from thread to thread instead of staying with the first threads that
opened them.
"""

from __future__ import annotations

import logging
import threading
import time

from django.db import DatabaseError, InterfaceError, connections

from jobs import config as jobs_config
from jobs import live_config, log, notifier
from jobs.runner import pool
from jobs.store import Store, for_database

#: What this process needs, once `check` has counted it; None before.
_needed: int | None = None
#: Set once a refusal to a handler has been logged: logged once a process.
_refusal_logged = threading.Event()


def needed(max_concurrent: int, lanes: int, *, listens: bool, metrics: bool) -> int:
    """The connections a runner process opens at most (see the module's docstring),
    not counting attempts left running past their budget."""
    return max_concurrent + lanes * (3 if listens else 2) + (1 if metrics else 0)


def check(using: str, *, lanes: int, burst: bool, metrics: bool) -> int | None:
    """Compare what this process needs with what the server has room for, and
    log `runner_connection_budget`: INFO when it fits, WARNING when it does
    not (the worker threads then hand their connections back), ERROR when not
    even each lane's loop can have one, or when the server refused the check
    its connection. The connections this process holds already count as its
    own. Returns the room found, None where there is no server to ask (SQLite)
    or it did not answer (the runner waits for it, `jobs.runner.startup`)."""
    global _needed
    store = for_database(using)
    try:
        room = store.connection_room()
        settings = live_config.current(using)
    except (DatabaseError, InterfaceError) as error:
        if store.out_of_connections(error):
            _needed = _needed_by(jobs_config.initial().max_concurrent, store, lanes, burst, metrics)
            pool.hand_back_connections()
            log.event(
                "runner_connection_budget",
                logging.ERROR,
                outcome="refused",
                needed=_needed,
                error=log.first_line(error),
                reason="the server refused this runner a connection at start: raise its "
                "max_connections (or the role's or database's CONNECTION LIMIT) by what "
                "this process needs, or lower max_concurrent",
            )
        return None
    if room is None:
        return None
    _needed = _needed_by(settings.max_concurrent, store, lanes, burst, metrics)
    tightest = room.tightest()
    # What this process can hold: what is left, and the one it holds already.
    can_hold = max(0, tightest.left) + 1
    limit = f"{tightest.name} ({tightest.allows}, {tightest.in_use} in use)"
    if can_hold >= _needed:
        log.event(
            "runner_connection_budget",
            outcome="fits",
            needed=_needed,
            room=can_hold,
            max_connections=room.max_connections,
        )
        return can_hold
    # What is left for the worker threads once each lane has its own.
    pool.hand_back_connections(at_most=can_hold - (_needed - settings.max_concurrent))
    log.event(
        "runner_connection_budget",
        logging.WARNING if can_hold >= lanes else logging.ERROR,
        outcome="short" if can_hold >= lanes else "cannot_run",
        needed=_needed,
        room=can_hold,
        max_connections=room.max_connections,
        limited_by=limit,
        reason=(
            f"this process opens up to {_needed} connections ({settings.max_concurrent} "
            f"for max_concurrent's worker threads, and {_needed - settings.max_concurrent} "
            f"for its {lanes} lane(s): each one's loop, heartbeat and listener); the server "
            f"has room for "
            f"{can_hold}. "
            + (
                f"At most {max(1, can_hold - (_needed - settings.max_concurrent))} attempts "
                "run at once, each worker thread handing its connection back after each "
                "attempt (the others wait their turn). "
                if can_hold >= lanes
                else "Not every lane can even open its own connection. "
            )
            + f"Raise {tightest.name} by {_needed - can_hold}, or lower max_concurrent."
        ),
    )
    return can_hold


def _needed_by(max_concurrent: int, store: Store, lanes: int, burst: bool, metrics: bool) -> int:
    """`needed` on a database server (SQLite's wake-ups take no connection)."""
    listens = notifier.for_database(store.using).wakes_other_processes and not burst
    return needed(max_concurrent, lanes, listens=listens, metrics=metrics)


#: The pauses between a worker's tries to open its connection before an
#: attempt, while the process hands connections back (`ready`): about three
#: seconds in all, for a connection another thread closed to be let go by the
#: server (a backend exits a moment after its client closes) or for another
#: process to close one.
CONNECT_PAUSES = (0.02, 0.05, 0.1, 0.2, 0.4, 0.8, 1.6)


def ready(store: Store) -> None:
    """While worker threads hand their connections back (the server cannot
    give each one its own), open this thread's connection before its attempt,
    waiting for the server to have room: the handler's queries, and the
    attempt's settle, then find it open instead of each being refused.

    A connection still refused after `CONNECT_PAUSES` is left to the attempt:
    its handler's first query is refused, and that is its `Retry`. Nothing
    here when connections are kept: opened on first use, as Django does."""
    if not pool.handing_back():
        return
    connection = connections[store.using]
    for pause in (*CONNECT_PAUSES, None):
        try:
            connection.ensure_connection()
        except (DatabaseError, InterfaceError) as error:
            if pause is None or not store.out_of_connections(error):
                return
            time.sleep(pause)
        else:
            return


def handler_failed(store: Store, error: BaseException) -> None:
    """A handler's attempt raised `error` (its `Retry`): when its own
    connection was refused for want of room, hand worker connections back
    from now on (logged once); when its connection is broken, close it, so
    the settle that follows on this thread opens a fresh one rather than fail
    on it. On a worker thread, in the failed attempt's path only."""
    if store.out_of_connections(error):
        pool.hand_back_connections()
        if not _refusal_logged.is_set():
            _refusal_logged.set()
            log.event(
                "runner_connection_budget",
                logging.WARNING,
                outcome="refused",
                needed=_needed if _needed is not None else "-",
                error=log.first_line(error),
                reason="a handler's query was refused a connection; its attempt is retried, "
                "and worker threads hand their connections back after each attempt from now on",
            )
        return
    if not isinstance(error, DatabaseError):
        return
    connection = connections[store.using]
    if (
        connection.connection is not None
        and connection.errors_occurred
        and not connection.is_usable()
    ):
        connection.close()
