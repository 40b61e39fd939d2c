"""Django signals for every job transition, for a project's own side effects
(an audit row, a metric, a message to a channel).

Each is sent with the job's kind as `sender`, so a receiver can listen to one
kind (`@receiver(job_finished, sender="orders.relay")`) or to all. Nothing is
built or sent when no receiver is connected (`Signal.has_listeners`), so an
unused signal costs the runner a dictionary lookup. A receiver that raises is
logged (`jobs_signal_receiver_failed`) and changes nothing: the enqueue, the
attempt and the settle go on as if it had not been called.

- `job_enqueued(sender=kind, job_id, key, queue, priority, run_at, using)`:
  after the transaction that inserted the row commits (at once outside
  `transaction.atomic()`); never for a refused duplicate or a rollback.
- `job_started(sender=kind, job, attempt)`: on the worker thread, after the
  claim has committed, just before the handler runs; `job` is the claimed row.
- `job_finished(sender=kind, job, attempt, outcome)`: after the settle of an
  attempt has committed; `outcome` is one of `OUTCOMES`: "done", "retry",
  "failed", "timed_out" (a retry or, out of attempts, a retirement),
  "cancelled" (an operator's; `attempt` is the attempts spent), "released"
  (handed back at shutdown). A settle that lost its row sends nothing.
- `job_abandoned(sender=kind, job, reason)`: after the handler's `abandon`
  returned and its transaction committed (the retirement committed before
  it), once per retirement.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from django.db import transaction
from django.dispatch import Signal

from jobs import log
from jobs.history import Outcome


class KindSignal(Signal):
    """A signal whose sender is a job's kind, a string.

    Django matches a receiver's `sender` by identity (`id()`), and a kind read
    from a row is never the same string object as the literal a project
    connected with: both sides use the interned string instead, so
    `sender="orders.relay"` hears every job of that kind.
    """

    def connect(
        self, receiver: Any, sender: Any = None, weak: bool = True, dispatch_uid: Any = None
    ) -> None:
        super().connect(receiver, _interned(sender), weak, dispatch_uid)

    def disconnect(
        self, receiver: Any = None, sender: Any = None, dispatch_uid: Any = None
    ) -> bool:
        return super().disconnect(receiver, _interned(sender), dispatch_uid)

    def has_listeners(self, sender: Any = None) -> bool:
        return super().has_listeners(_interned(sender))


def _interned(sender: Any) -> Any:
    return sys.intern(sender) if type(sender) is str else sender


job_enqueued = KindSignal()
job_started = KindSignal()
job_finished = KindSignal()
job_abandoned = KindSignal()

#: What `job_finished` says an attempt came to (`jobs.history.Outcome`).
OUTCOMES = tuple(outcome for outcome in Outcome if outcome is not Outcome.RECLAIMED)


def send(signal: Signal, kind: str, **arguments: Any) -> None:
    """Send `signal` for a job of `kind` now, if anyone listens; a receiver
    that raises is logged, never raised."""
    kind = sys.intern(kind)  # as the receivers' (`KindSignal`), without its frames
    if not Signal.has_listeners(signal, kind):
        return
    for receiver, answer in signal.send_robust(sender=kind, **arguments):
        if isinstance(answer, Exception):
            log.event(
                "jobs_signal_receiver_failed",
                logging.ERROR,
                outcome="failure",
                receiver=getattr(receiver, "__qualname__", repr(receiver)),
                kind=kind,
                error=repr(answer),
            )


def on_commit(signal: Signal, kind: str, database: str | None, /, **arguments: Any) -> None:
    """`send`, once the current transaction on `database` commits (nothing if
    it rolls back; at once outside a transaction)."""
    if signal.has_listeners(kind):
        transaction.on_commit(lambda: send(signal, kind, **arguments), using=database)
