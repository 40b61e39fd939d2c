"""The operator's live controls, as runners read them: paused queues and kinds,
and kinds' concurrency limits set in the database (`jobs.models.Control`).

Read with the config row, at the same grain (each runner's config re-read,
and at once where saves wake runners), and just as forgiving: a row edited
by hand into something no control means is logged once and ignored, and the
rest stay in force. `change` is the one writer the admin and the CLI share,
so each change is logged the same way, naming who made it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.db import transaction
from django.utils import timezone

from jobs import log
from jobs.models import Control
from jobs.spec import KIND_MAX_LENGTH as KIND_MAX_LENGTH  # importable here as before
from jobs.spec import concurrency_limit_problem, kind_problem, queue_name_problem

T = TypeVar("T")


@dataclass(frozen=True)
class Controls:
    """What the control rows say, the unusable ones left out."""

    paused_queues: frozenset[str] = frozenset()
    paused_kinds: frozenset[str] = frozenset()
    #: Each kind's limit set in the database, in place of its handler's.
    kind_limits: Mapping[str, int] = field(default_factory=dict)

    def scope(
        self, leases: Mapping[str, T], queues: Sequence[str] | None
    ) -> tuple[dict[str, T], list[str] | None, list[str]]:
        """What a claim may take: the kinds of `leases` not paused, the queues
        of `queues` not paused (None for every queue), and the paused queues
        a claim of every queue must leave out. A runner whose queues are all
        paused claims nothing (no kind)."""
        if not self.paused_kinds and not self.paused_queues:
            return dict(leases), (None if queues is None else list(queues)), []
        kinds = {kind: lease for kind, lease in leases.items() if kind not in self.paused_kinds}
        if queues is None:
            return kinds, None, sorted(self.paused_queues)
        served = [queue for queue in queues if queue not in self.paused_queues]
        return (kinds if served else {}), served, []

    def limits(self, handler_limits: Mapping[str, int], kinds: Iterable[str]) -> dict[str, int]:
        """The limit in force for each of `kinds` that has one: the database's,
        else its handler's (`handler_limits`)."""
        if not self.kind_limits and not handler_limits:
            return {}
        limits = {}
        for kind in kinds:
            limit = self.kind_limits.get(kind, handler_limits.get(kind))
            if limit is not None:
                limits[kind] = limit
        return limits


def applied(previous: Controls, current: Controls) -> Controls:
    """`current`, logged (`runner_controls_applied`) when it differs from
    `previous`: the line that says a change has reached this runner."""
    if current != previous:
        log.event(
            "runner_controls_applied",
            paused_queues=",".join(sorted(current.paused_queues)) or "-",
            paused_kinds=",".join(sorted(current.paused_kinds)) or "-",
            limits=",".join(f"{k}={n}" for k, n in sorted(current.kind_limits.items())) or "-",
        )
    return current


def problem(row: Control) -> str | None:
    """Why `row` means no control, or None when it is usable."""
    if row.scope == Control.Scope.QUEUE:
        if found := queue_name_problem(row.name):
            return found
        if row.concurrency_limit is not None:
            return "a queue has no concurrency_limit (a kind does)"
        return None
    if row.scope == Control.Scope.KIND:
        if found := kind_problem(row.name):
            return found
        return concurrency_limit_problem(row.concurrency_limit)
    return f"scope must be 'queue' or 'kind', got {row.scope!r}"


class LiveControls:
    """A runner's reader: every row each read, each unusable one logged once
    (until it changes) and left out."""

    def __init__(self, using: str | None = None) -> None:
        self.using = using
        self._reported: dict[int, str] = {}

    def __call__(self) -> Controls:
        queues, kinds, limits = set(), set(), {}
        reported: dict[int, str] = {}
        for row in Control.objects.using(self.using).order_by("pk"):
            found = problem(row)
            if found is not None:
                reported[row.pk] = found
                if self._reported.get(row.pk) != found:
                    log.event(
                        "jobs_control_invalid",
                        logging.ERROR,
                        outcome="ignored",
                        control=row.pk,
                        error=found,
                    )
                continue
            if row.scope == Control.Scope.QUEUE and row.paused:
                queues.add(row.name)
            elif row.scope == Control.Scope.KIND:
                if row.paused:
                    kinds.add(row.name)
                if row.concurrency_limit is not None:
                    limits[row.name] = row.concurrency_limit
        self._reported = reported
        return Controls(frozenset(queues), frozenset(kinds), limits)


@dataclass(frozen=True)
class Change:
    """What a call to `pause` or `set_limit` did."""

    #: The control row as it stands after the call; None when there is none
    #: (a resume or a cleared limit of something no row controls).
    row: Control | None
    #: Whether anything was written (and logged). False when the row already
    #: said so: its `changed_by` and `changed_at` still name the last real change.
    changed: bool


#: What each column of a control is when nothing is controlled, as a new row starts.
_UNCONTROLLED: Mapping[str, Any] = {"paused": False, "concurrency_limit": None}


def pause(scope: str, name: str, by: str, paused: bool = True, using: str | None = None) -> Change:
    """Pause (or with `paused=False`, resume) a queue or a kind, as `by`."""
    return _change(scope, name, by, {"paused": paused}, using=using)


def set_limit(kind: str, by: str, limit: int | None, using: str | None = None) -> Change:
    """Set a kind's concurrency limit in the database (0 holds it), or with
    None give it back to its handler, as `by`."""
    return _change(Control.Scope.KIND, kind, by, {"concurrency_limit": limit}, using=using)


def _change(
    scope: str,
    name: str,
    by: str,
    values: Mapping[str, Any],
    *,
    using: str | None = None,
) -> Change:
    """Write `values` on the control row of (`scope`, `name`), creating it, as
    `by`; logged naming who. Raises ValueError for what no control can mean,
    writing nothing.

    A change that changes nothing writes nothing: no row is created to say a
    queue never paused is not paused (it would only stand in the way of the
    admin's "Add control"), and a row that already says so keeps naming who
    made it so and when."""
    at = timezone.now()
    with transaction.atomic(using=using):
        found = Control.objects.using(using).select_for_update().filter(scope=scope, name=name)
        existing = found.first()
        row = existing or Control(scope=scope, name=name)
        before = {column: getattr(row, column) for column in values}
        for column, value in values.items():
            setattr(row, column, value)
        if error := problem(row):
            raise ValueError(error)
        if existing is None and all(_UNCONTROLLED[c] == v for c, v in values.items()):
            return Change(None, changed=False)
        if existing is not None and before == dict(values):
            return Change(existing, changed=False)
        row.changed_by, row.changed_at = by, at
        row.save(using=using)
    logged("jobs_control_changed", scope, name, by, **values)
    return Change(row, changed=True)


def logged(event: str, scope: str, name: str, by: str, **values: Any) -> None:
    """The log line of a change to a control: the queue or kind, who, and what."""
    fields: dict[str, Any] = {scope: name, "by": by, **values}
    log.event(event, **fields)
