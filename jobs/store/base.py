"""The store's contract: every verb the queue and the runner use, and what each promises.

Every write after a claim is a compare-and-set on that claim (id, `running`,
the attempt number and the lease it wrote) and returns whether it won, so a
late or stale attempt can never overwrite a newer one: the loser is told and
writes nothing. Verbs take `now` as an argument; only the runner reads the
clock. `jobs.store.orm.OrmStore` writes the verbs that are the same on every
database once; each vendor module extends it with the statements whose SQL
differs (the claim, the insert). Waking runners is beside the store, in
`jobs.notifier`, except a wake-up sent by the insert itself (`inserts_notify`).
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field

from jobs import history
from jobs.models import Job, LimitedAttempt, State
from jobs.store.admission import Admission, taking_either_form
from jobs.store.room import ConnectionLimit as ConnectionLimit
from jobs.store.room import ConnectionRoom as ConnectionRoom
from jobs.store.rows import Claim


@dataclass(slots=True)
class NewJob:
    """A validated row to insert, as `jobs.queue` builds it from a spec.

    Not frozen: a frozen dataclass sets each field through `object.__setattr__`,
    which made building one five times slower, a tenth of `enqueue_many`'s
    Python per spec. Nothing writes to one after it is built, except
    `with_ids`, which gives each row without an id its own.
    """

    #: None for a row of `enqueue_many`: a store that must send an id gives
    #: it one with `with_ids`, PostgreSQL's database makes its own. `insert`
    #: is always handed an id (`enqueue` makes it, or its caller chooses it).
    id: uuid.UUID | None
    kind: str
    key: str
    payload: dict[str, Any]  # already checked to be a JSON object
    #: The payload as the JSON text `JobSpec.validate` checked.
    payload_json: str
    #: The spec's own budget, or None to take the configured one.
    max_attempts: int | None
    #: The budget to use when the spec has none and the config row is unusable.
    default_max_attempts: int
    run_at: datetime
    deadline: datetime | None
    #: The spec's, else its handler's, else the defaults: never None here.
    queue: str
    priority: int
    now: datetime
    #: The W3C traceparent of the span that queued it (`jobs.tracing`), or
    #: None: tracing absent, or no span current.
    traceparent: str | None = None


#: The longest a renewal waits for a lock other than a row's (a table lock,
#: a counted attempt's row): a renewal that would wait longer fails, and its
#: rows are tried again at the next heartbeat.
RENEW_LOCK_TIMEOUT = timedelta(seconds=1)


@dataclass(frozen=True, slots=True)
class Renewal:
    """What a renewal did with the attempts it was given."""

    #: The jobs whose leases it extended.
    renewed: frozenset[uuid.UUID]
    #: Those it left for the next heartbeat: their attempt still owns the row,
    #: but another session holds a lock on it. Any other attempt it was given
    #: no longer owns its row (cancelled, or taken by another runner).
    held: frozenset[uuid.UUID] = frozenset()


class Store:
    """The only door to the `jobs_job` table for the queue and the runner."""

    def __init__(self, using: str) -> None:
        self.using = using

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # Every store's claims take an `Admission`, or its fields (`taking_either_form`).
        super().__init_subclass__(**kwargs)
        for name, leading in (("claim", 0), ("settle_and_claim", 1)):
            if name in cls.__dict__:
                setattr(cls, name, taking_either_form(cls.__dict__[name], leading))

    @property
    def connection(self) -> BaseDatabaseWrapper:
        return connections[self.using]

    def runner_cursor(self) -> Any:
        """A cursor for a runner's own statements (its claims and batch settles),
        kept out of the query log Django keeps under DEBUG unless someone is
        reading it (`CaptureQueriesContext`): a runner started under Django's
        default `DEBUG = True` paid for logging every pass, for a log nobody
        reads outside a request."""
        connection = self.connection
        if connection.force_debug_cursor or not connection.queries_logged:
            return connection.cursor()
        connection.ensure_connection()
        connection.validate_thread_sharing()
        with connection.wrap_database_errors:
            return connection.make_cursor(connection.create_cursor())

    def database_now(self) -> datetime | None:
        """The database server's clock, read now (`jobs.clock` measures its
        offset to the runner's); None where the database shares the runner's
        machine and clock (SQLite)."""
        return None

    def prepare(self, column: str, value: Any) -> Any:
        """A Python value as the database driver wants it for `column` of
        `jobs_job`: for statements written by hand, here and in tests."""
        field = Job._meta.get_field(column)
        assert isinstance(field, Field), f"{column} is a concrete column"
        return field.get_db_prep_save(value, self.connection)

    # -- enqueue -------------------------------------------------------------

    def insert(self, row: NewJob) -> bool:
        """Insert a queued row unless a live row holds its identity; True if inserted.

        Never raises for the identity conflict, so it cannot break a caller's
        transaction. A row without its own `max_attempts` takes the config
        row's in the same statement (`default_max_attempts` when that row is
        unusable), so a change made in any process reaches the next enqueue
        everywhere. Where the store `inserts_notify`, an inserted row has
        already notified other processes (on commit): the caller does not.
        """
        raise NotImplementedError

    #: Whether an inserted row has already notified: `insert` and `insert_many`
    #: send the wake-up inside their own statement or transaction (PostgreSQL's
    #: NOTIFY), so the caller asks no notifier (`jobs.notifier`) to send it again.
    inserts_notify = False

    @property
    def wakes_other_processes(self) -> bool:
        """Deprecated: whether runners in other processes can be woken is the
        notifier's to say (`jobs.notifier.for_database(using)`); kept for
        callers written before the store lost its wake-up plumbing."""
        warnings.warn(
            "Store.wakes_other_processes is deprecated: ask "
            "jobs.notifier.for_database(using).wakes_other_processes",
            DeprecationWarning,
            stacklevel=2,
        )
        from jobs import notifier  # the one way back to the notifier: deprecated

        return notifier.for_database(self.using).wakes_other_processes

    def insert_many(self, rows: Sequence[NewJob]) -> list[bool]:
        """Insert many queued rows in one transaction, each unless its identity is
        held (by a live row, or by an earlier row of `rows`); for each row,
        whether it was. Notifies as `insert` does, once for the batch. Each row
        inserted has its `id` set (the `job_enqueued` signal names it)."""
        raise NotImplementedError

    # -- the runner's pass ---------------------------------------------------

    def claim(self, admission: Admission) -> list[Claim]:
        """Claim up to the admission's `limit` ready rows of the kinds in its
        `leases` (and, when its `queues` names some, in those queues only;
        never in its `paused_queues`),
        in claim order: highest priority, then earliest `run_at`, then oldest.
        Where the store `applies_kind_caps`, at most `kind_caps[kind]` rows of
        each kind it names (the first in claim order; others are taken in
        their place, as far as the limit goes).

        Ready means `queued` with `run_at <= now`, or `running` with a lease
        that expired by `now`. Each claimed row becomes `running`, its
        `attempts` grows by one, its lease is written as `now` plus its
        kind's entry in `leases`, and `claimed_by` as `runner`. Two
        concurrent claims never return one row. A row a handler cannot use
        still comes back, marked `unusable`
        (`jobs.store.rows.claim_from_row`); a reclaimed row comes back with
        the attempt it was taken from (`Claim.previous`).
        """
        raise NotImplementedError

    def settle_and_claim(
        self, done: Sequence[tuple[Job, Any]], admission: Admission
    ) -> tuple[set[uuid.UUID], list[Claim]]:
        """`complete_many(done)` then `claim(admission)`: the runner's pass, as few round
        trips as the vendor allows, in one transaction (one commit per pass).
        Returns the settled ids and the claims."""
        raise NotImplementedError

    #: Whether `claim` keeps to `kind_caps` in one statement. Where it does
    #: not, `jobs.store.limits` claims at most the smallest cap at a time.
    applies_kind_caps = False

    @contextmanager
    def gated(self, kinds: Sequence[str]) -> Iterator[set[str]]:
        """A transaction in which this claim alone may claim each kind it yields,
        of `kinds` (those under a concurrency limit): `jobs.store.limits`
        counts and claims inside it. A kind another claim holds at that moment
        is left out at once, never waited for; every gate held is let go when
        the transaction ends, so the next claim of the kind sees this one's
        rows. Where one transaction at a time writes (SQLite), that is every
        kind."""
        with transaction.atomic(using=self.using):
            yield set(kinds)

    # -- fenced settles: each only while the attempt `job` describes owns the row

    def complete(self, job: Job, now: datetime, result: Any = None) -> bool:
        """Settle `done`, keeping `result` (JSON) when there is one."""
        raise NotImplementedError

    def complete_many(self, done: Sequence[tuple[Job, Any]], now: datetime) -> set[uuid.UUID]:
        """Settle many attempts `done` (each with its result) in one transaction.

        Each row is fenced on its own attempt; returns the ids that settled.
        """
        raise NotImplementedError

    def retry(
        self, job: Job, now: datetime, run_at: datetime, error: str, entry: history.Entry
    ) -> bool:
        """Back to `queued` at `run_at`, keeping the attempt count; `entry` joins
        the attempt record (`Job.errors`, and `job.errors` when it won)."""
        raise NotImplementedError

    def retire(
        self, job: Job, now: datetime, error: str, entry: history.Entry, state: str = "failed"
    ) -> bool:
        """Settle for good as `state` (`failed` by default), `entry` joining the
        attempt record as in `retry`, and its handler's `abandon` marked owed
        (`Job.abandon_owed_at`, `now`) in the same write: see `claim_abandon`."""
        raise NotImplementedError

    def note(self, job: Job, entry: history.Entry) -> bool:
        """Append `entry` to the attempt record, changing nothing else (a
        reclaimed row's entry for the attempt it was taken from)."""
        raise NotImplementedError

    def renew(self, jobs: Sequence[Job], until: datetime, limited: Sequence[uuid.UUID]) -> Renewal:
        """Extend the leases of the attempts `jobs` describe to `until`, and those
        of the counted attempts of limited kinds among them (`limited`).

        Each is fenced on its attempt as a settle is (id, `running`, the
        attempt number and the lease it holds): a row another runner has
        claimed since, an operator cancelled, or that was requeued and claimed
        again, is left alone. Never waits on a row another session has
        locked: that row is left for the next heartbeat (`Renewal.held`);
        a vendor with row locks skips it, with a short lock timeout for the
        rest (`RENEW_LOCK_TIMEOUT`). Here, for SQLite, whose one write lock
        is waited for under the connection's busy timeout, no row is ever
        held by another session.
        """
        fence = {job.id: (job.attempts, job.lease_expires_at) for job in jobs}
        with transaction.atomic(using=self.using):
            rows = Job.objects.using(self.using).filter(id__in=list(fence), state=State.RUNNING)
            owned = frozenset(
                job_id
                for job_id, attempts, lease in rows.values_list(
                    "id", "attempts", "lease_expires_at"
                )
                if fence[job_id] == (attempts, lease)
            )
            if owned:
                rows.filter(id__in=owned).update(lease_expires_at=until)
                counted = [job_id for job_id in limited if job_id in owned]
                if counted:
                    LimitedAttempt.objects.using(self.using).filter(job_id__in=counted).update(
                        lease_expires_at=until
                    )
        return Renewal(owned)

    def reschedule(self, job: Job, now: datetime, run_at: datetime) -> bool:
        """Back to `queued` at `run_at` with a fresh attempt budget; identity kept."""
        raise NotImplementedError

    # -- operator verbs ------------------------------------------------------

    def run_now(self, job_id: uuid.UUID, now: datetime) -> bool:
        """Bring a queued row's `run_at` forward to `now`; False unless it is queued."""
        raise NotImplementedError

    def cancel(self, job_id: uuid.UUID, now: datetime, reason: str) -> Job | None:
        """Retire a live row as `cancelled`, its `abandon` marked owed as by
        `retire`; the row as it was (its `errors` as written, with the
        cancel's entry), or None if it was not live.

        Not fenced on an attempt: cancelling is meant to overrule whichever
        attempt holds the row, whose own settle will then lose.
        """
        raise NotImplementedError

    def note_action(self, job_id: uuid.UUID, entry: history.Entry) -> bool:
        """Append `entry` (an operator's action) to the row's attempt record,
        the row locked for it; False if there is no such row. Run it in the
        transaction of the action it notes, so both are written or neither."""
        raise NotImplementedError

    def requeue(self, job_id: uuid.UUID, now: datetime) -> bool:
        """Queue a failed or cancelled row again at `now` with a fresh attempt
        budget. An `abandon` still owed is owed no more: the retirement it was
        owed for is undone, and a job retired again owes one again.

        Raises IntegrityError when a live row already holds its identity; the
        caller runs this in a savepoint.
        """
        raise NotImplementedError

    # -- the debt of an `abandon` call (`jobs.retirement`) ---------------------

    def claim_abandon(self, job_id: uuid.UUID) -> bool:
        """Take the `abandon` call owed for `job_id`'s retirement: clear its mark,
        True if this statement cleared it, and so alone may make the call;
        False when nothing is owed (paid, being paid, or never owed).

        One conditional statement, which the caller runs outside any
        transaction: the claim commits (and, on PostgreSQL, is flushed) before
        the call starts, so two processes never both win it, and a crash
        during the call cannot bring the debt back.
        """
        raise NotImplementedError

    def owed_abandons(self, kinds: Sequence[str], before: datetime, limit: int) -> list[Job]:
        """Up to `limit` retired rows of `kinds` whose `abandon` is still owed,
        marked before `before`, oldest debt first: those a crash or a process
        without the handler left to pay. Read through an index of the debts
        alone (`jobs_job_abandon_owed`), so looking when none is owed reads no row."""
        raise NotImplementedError

    # -- maintenance ---------------------------------------------------------

    def prune(self, before: datetime, limit: int) -> int:
        """Delete up to `limit` settled rows that finished before `before`; the count."""
        raise NotImplementedError

    # -- what the database knows without counting ------------------------------

    def estimated_rows(self) -> int | None:
        """The table's row count as the database's statistics last saw it, reading
        no row; None where it keeps no such figure, or has not gathered it yet.

        For screens that would otherwise count a million rows on every view.
        """
        return None

    def state_shares(self) -> dict[str, float] | None:
        """Each common value of `state` with the share of rows that hold it, as the
        statistics last saw them; None where there are none."""
        return None

    @contextmanager
    def screen_reads(self) -> Iterator[None]:
        """The reads of a screen (the dashboard, `jobs stats`, a scrape), each
        a small aggregate over an index range, under whatever setting keeps
        such reads cheap on this database (none here)."""
        yield

    # -- connections (`jobs.runner.connection_budget` uses these) -------------

    def connection_room(self) -> ConnectionRoom | None:
        """How many connections the server allows this session's role and
        database, and how many are open now; None where there is no server
        (SQLite)."""
        return None

    def out_of_connections(self, error: BaseException) -> bool:
        """Whether `error` is the server refusing a new connection because its
        limits are reached (`max_connections`, a role's or database's own)."""
        return False
