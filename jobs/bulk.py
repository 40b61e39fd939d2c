"""Acting on every job a filter matches, not only the ids an operator can paste.

An incident leaves thousands of failed jobs behind one error ("retry every
`orders.relay` that failed in the last 2 h with a 503"); a page of selected
rows or a list of ids does not reach them. So a bulk action is two steps.
`count` says how many jobs match and in which states, and the operator
confirms that number (the admin's page, the command's `--yes` or prompt).
`act` then walks what was counted, a batch at a time, each batch its own
short transaction through the store's batch verbs (`jobs.store.batches`) or
the one-row cancel (`jobs.retirement`), and reports what it did and why it
left the rest.

Cheap at any size, and never in a runner's way: the walk goes through the
table by primary key in windows of `WINDOW` rows (the window's upper id is
one index read ahead), so no statement scans more than a window whatever the
table holds or how few rows match; a transaction locks one batch (`BATCH`
rows; a cancel's `CANCEL_BATCH`) at most, for a fraction of a second, so
runners keep claiming and settling beside it. What is acted on is fenced to
what was counted: a row that changed after the count (its `updated_at`) is
left alone and reported as changed, so the number confirmed is the most that
can be touched. `CAP` bounds how many jobs one action may confirm.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction
from django.db.models import Count, QuerySet
from django.utils import timezone

from jobs import history_actions, log, retirement
from jobs.bulk_filter import Filter, Selection, parse_since
from jobs.models import Job, State
from jobs.registry import Registry
from jobs.registry import registry as default_registry
from jobs.store import Store, batches, for_database
from jobs.wakeup import wake_runners

__all__ = ["CANCEL", "RETRY", "RUN_NOW", "Filter", "Selection", "act", "count", "parse_since"]

#: Rows written in one transaction: small enough that a runner waiting on one
#: of them waits milliseconds, large enough that a million rows are a thousand
#: commits, not a million.
BATCH = 1_000

#: Rows one transaction of a bulk cancel retires: each goes through the one
#: retirement (`jobs.retirement.cancel`: its lock, its attempt record, its
#: hooks), a few milliseconds a row, so a batch of `BATCH` would hold its
#: locks for seconds, and a runner settling one of them would wait as long.
CANCEL_BATCH = 100

#: Rows of the whole table, by primary key, one statement of the walk reads at
#: most: what bounds a statement's time when few rows match among many.
WINDOW = 10_000

#: The most jobs one action may be confirmed for, unless the caller raises it
#: (`jobs retry --max`): a filter that matches more is refused, before anything
#: is written, as most likely too broad.
CAP = 100_000


@dataclass(frozen=True)
class Action:
    """A bulk action, in the words its confirmation and report use."""

    #: Its name in the log, and as the admin posts it.
    name: str
    #: Its name in a sentence: "run now".
    said: str
    #: The states of the rows it acts on; rows in others are skipped.
    states: tuple[str, ...]
    #: What it did to each row it touched.
    done: str

    def skip_reason(self, state: str) -> str:
        """Why a row in `state` is left, as `jobs.operations` says it for one."""
        *others, last = self.states
        return f"{state}, not {', '.join(others)} or {last}" if others else f"{state}, not {last}"


RETRY = Action(
    "retry", "retry", (State.FAILED, State.CANCELLED), "queued again with a fresh attempt budget"
)
CANCEL = Action("cancel", "cancel", (State.WAITING, State.QUEUED, State.RUNNING), "cancelled")
RUN_NOW = Action("run_now", "run now", (State.QUEUED,), "made due now")

#: A retry's reason for a row whose `(kind, key)` a live job holds.
HELD = "a live job already holds its kind and key"
#: The reason for a row of a batch deleted (by the retention sweep) before its write.
GONE = "no such job"


class TooMany(ValueError):
    """More jobs match than the cap allows one action: nothing was written."""


@dataclass(frozen=True)
class Counted:
    """How many jobs a selection matched, by state, when counted."""

    action: Action
    #: When the count began: rows that changed after it are not acted on.
    at: datetime
    by_state: dict[str, int]
    said: str = ""

    @property
    def acting(self) -> int:
        """The matching jobs in a state the action acts on: the number to confirm."""
        return sum(n for state, n in self.by_state.items() if state in self.action.states)

    def skipped(self) -> Counter[str]:
        """The matching jobs in other states, by the reason they are left."""
        return Counter(
            {
                self.action.skip_reason(state): n
                for state, n in self.by_state.items()
                if state not in self.action.states and n
            }
        )

    def within(self, cap: int) -> None:
        """Raise `TooMany` if more than `cap` jobs would be acted on."""
        if self.acting > cap:
            raise TooMany(
                f"{self.acting:,} jobs match ({self.said or 'the filter'}), more than the "
                f"{cap:,} one action may touch: narrow the filter, or raise the cap"
            )

    def __str__(self) -> str:
        text = f"{self.action.said.capitalize()} {self.acting:,} job{_s(self.acting)}"
        text += f" matching {self.said}" if self.said else ""
        if skipped := self.skipped():
            text += "; would skip " + _reasons(skipped)
        return text


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def _reasons(skipped: Counter[str]) -> str:
    return ", ".join(f"{n:,} ({why})" for why, n in skipped.most_common())


@dataclass
class Outcome:
    """What an action did with what was counted."""

    counted: Counted
    touched: int = 0
    #: Of the cancelled jobs, those that were running: their attempt runs on
    #: and its result is discarded.
    running: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    batches: int = 0

    @property
    def changed(self) -> int:
        """Counted jobs left because they changed (or went) after the count."""
        walked = self.touched + self.skipped.total() - self.counted.skipped().total()
        return max(self.counted.acting - walked, 0)

    def __str__(self) -> str:
        text = f"{self.touched:,} {self.counted.action.done}"
        if self.running:
            text += (
                f" ({self.running:,} of them running: the attempt runs on, its result discarded)"
            )
        if self.skipped:
            text += "; skipped " + _reasons(self.skipped)
        if self.changed:
            text += f"; {self.changed:,} left, changed since counted"
        return text


def count(selection: Selection, action: Action, now: datetime | None = None) -> Counted:
    """How many jobs `selection` matches, by state, read a window at a time."""
    at = now or timezone.now()
    by_state: Counter[str] = Counter()
    check = selection.check
    for window in _windows(selection.jobs):
        if check is None:
            for state, n in window.order_by().values_list("state").annotate(n=Count("id")):
                by_state[state] += n
        else:
            for state, error in window.order_by().values_list("state", "last_error"):
                by_state[state] += check(error)
    return Counted(action, at, {s: n for s, n in by_state.items() if n}, selection.said)


def act(
    selection: Selection,
    counted: Counted,
    *,
    by: str,
    max_attempts: int | None = None,
    registry: Registry | None = None,
    progress: Callable[[Outcome], None] | None = None,
) -> Outcome:
    """Act on what `counted` counted of `selection`, a batch at a time (each
    batch its own transaction), leaving rows that changed since; the outcome.

    `by` names who acted (a cancel's reason, the log). `max_attempts` gives a
    retry's jobs that budget from now instead of their own. `progress` is
    called after each batch.
    """
    action, store = counted.action, for_database(selection.jobs.db)
    outcome = Outcome(counted, skipped=counted.skipped())
    fenced = selection.jobs.filter(updated_at__lte=counted.at, state__in=action.states)
    size = CANCEL_BATCH if action is CANCEL else BATCH
    for ids in _batches(fenced, selection.check, size):
        now, touched = timezone.now(), outcome.touched
        with transaction.atomic(using=store.using):
            if action is RETRY:
                left = _retry(store, ids, now, by, max_attempts, outcome)
            elif action is RUN_NOW:
                left = _run_now(store, ids, now, by, outcome)
            else:
                left = _cancel(store, ids, now, by, registry or default_registry, outcome)
        _word_skips(store, action, left, outcome)
        outcome.batches += 1
        if outcome.touched > touched and action is not CANCEL:
            wake_runners(store.using)  # each batch is claimable once it commits
        if progress is not None:
            progress(outcome)
    log.event(
        "bulk_action_finished",
        outcome="done",
        action=action.name,
        selection=counted.said,
        by=by,
        counted=counted.acting,
        touched=outcome.touched,
        skipped=outcome.skipped.total(),
        changed=outcome.changed,
    )
    return outcome


def _retry(
    store: Store,
    ids: list[uuid.UUID],
    now: datetime,
    by: str,
    budget: int | None,
    outcome: Outcome,
) -> list[uuid.UUID]:
    done = batches.requeue(store, ids, now, budget)
    requeued = [job_id for job_id, *_ in done.requeued]
    batches.note_action(
        store, requeued, history_actions.operator_action(history_actions.Action.RETRIED, by, now)
    )
    for job_id, kind, key in done.requeued:
        log.event("job_requeued", outcome="requeued", job_id=job_id, kind=kind, key=key)
    outcome.touched += len(done.requeued)
    if done.held:
        outcome.skipped[HELD] += len(done.held)
    written = {job_id for job_id, *_ in done.requeued} | {job_id for job_id, *_ in done.held}
    return [job_id for job_id in ids if job_id not in written]


def _run_now(
    store: Store, ids: list[uuid.UUID], now: datetime, by: str, outcome: Outcome
) -> list[uuid.UUID]:
    written = batches.run_now(store, ids, now)
    batches.note_action(
        store,
        list(written),
        history_actions.operator_action(history_actions.Action.RUN_NOW, by, now),
    )
    outcome.touched += len(written)
    return [job_id for job_id in ids if job_id not in written]


def _cancel(
    store: Store,
    ids: list[uuid.UUID],
    now: datetime,
    by: str,
    handlers: Registry,
    outcome: Outcome,
) -> list[uuid.UUID]:
    """Each row through the one retirement (`jobs.retirement.cancel`), inside the
    batch's transaction; each `abandon` is called once the batch commits."""
    rows = Job.objects.using(store.using).filter(id__in=ids).values_list("id", "kind", "state")
    found = {job_id: (kind, state) for job_id, kind, state in rows}
    left = []
    for job_id in ids:
        kind, state = found.get(job_id, ("", ""))
        handler = handlers.get(kind) if kind else None
        if retirement.cancel(store, job_id, handler, f"cancelled by {by}", now, by=by) is None:
            left.append(job_id)
            continue
        outcome.touched += 1
        outcome.running += state == State.RUNNING
    return left


def _word_skips(store: Store, action: Action, left: list[uuid.UUID], outcome: Outcome) -> None:
    """Why each of `left` (rows of a batch not written) was left: its state now."""
    if not left:
        return
    states = dict(Job.objects.using(store.using).filter(id__in=left).values_list("id", "state"))
    for job_id in left:
        state = states.get(job_id)
        outcome.skipped[GONE if state is None else action.skip_reason(state)] += 1


def _windows(jobs: QuerySet[Job]) -> Iterator[QuerySet[Job]]:
    """`jobs` a window of the table at a time: each the rows among the next
    `WINDOW` by primary key, its upper id found by one index read ahead."""
    ids = Job.objects.using(jobs.db).order_by("id").values_list("id", flat=True)
    low: uuid.UUID | None = None
    while True:
        ahead = ids if low is None else ids.filter(id__gt=low)
        window = jobs if low is None else jobs.filter(id__gt=low)
        edge = list(ahead[WINDOW - 1 : WINDOW])
        if not edge:
            yield window
            return
        yield window.filter(id__lte=edge[0])
        low = edge[0]


def _batches(
    jobs: QuerySet[Job], check: Callable[[str], bool] | None, size: int
) -> Iterator[list[uuid.UUID]]:
    """The ids of `jobs` (those whose `last_error` passes `check`, if given), at
    most `size` at a time, in id order (keyset: each read starts past the last)."""
    for window in _windows(jobs):
        last: uuid.UUID | None = None
        while True:
            page = (window if last is None else window.filter(id__gt=last)).order_by("id")
            if check is None:
                rows = [(job_id, "") for job_id in page.values_list("id", flat=True)[:size]]
            else:
                rows = list(page.values_list("id", "last_error")[:size])
            if not rows:
                break
            last = rows[-1][0]
            ids = [job_id for job_id, error in rows if check is None or check(error)]
            if ids:
                yield ids
            if len(rows) < size:
                break
