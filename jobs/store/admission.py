"""What one claim may take: the request every store's `claim` and
`settle_and_claim` execute (River calls it the fetch params).

Built once per pass by the runner (`jobs.runner.admission`), from its slots,
config, controls and handlers' limits; the store only executes it. Plain
values, no runner types, so the store can import it. `jobs.store.limits`
narrows it for each statement of a claim under limits.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any, NamedTuple

#: No limits, no rooms: a mapping nobody can change, shared by every admission.
_NONE: Mapping[str, int] = MappingProxyType({})


class Admission(NamedTuple):
    """Claim up to `limit` ready rows of the kinds in `leases`, at `now`, as `runner`.

    The first seven fields are what one statement reads; `kind_limits` and
    `queue_rooms` are what `jobs.store.limits` keeps to across the statements
    of a claim under limits (a store's own claim ignores them). Immutable, and
    a named tuple rather than a frozen dataclass: the runner builds one each
    pass, and a frozen dataclass's `__init__` sets each field through
    `object.__setattr__`, several times slower.
    """

    now: datetime
    #: Each kind it may claim, with the lease a claim of it writes (`now` plus it).
    leases: Mapping[str, timedelta]
    #: How many rows at the most: the runner's free slots.
    limit: int
    #: The claiming runner's name, written as `claimed_by`.
    runner: str = ""
    #: The queues it claims from; None for every queue.
    queues: Sequence[str] | None = None
    #: Queues a claim of every queue leaves out (the operator paused them).
    paused_queues: Sequence[str] = ()
    #: At most this many rows of each kind named, where the store
    #: `applies_kind_caps` (set by `jobs.store.limits` for one statement).
    kind_caps: Mapping[str, int] | None = None
    #: Each limited kind's concurrency limit, across every runner.
    kind_limits: Mapping[str, int] = _NONE
    #: The slots this runner may still give each capped queue of `queues`.
    queue_rooms: Mapping[str, int] = _NONE

    @property
    def empty(self) -> bool:
        """Whether it admits nothing: no free slot, or no kind to claim."""
        return self.limit < 1 or not self.leases

    def narrowed(
        self,
        leases: Mapping[str, timedelta],
        limit: int,
        queues: Sequence[str] | None,
        kind_caps: Mapping[str, int] | None,
    ) -> Admission:
        """The same request for one statement of a claim under limits: these
        kinds, at most `limit` rows, these queues, and these kinds' caps."""
        return self._replace(leases=leases, limit=limit, queues=queues, kind_caps=kind_caps)


def taking_either_form[Verb: Callable[..., Any]](verb: Verb, leading: int) -> Verb:
    """`verb` (a store's `claim`, `leading` 0, or `settle_and_claim`, 1) as its
    callers may call it: with an `Admission` after its `leading` arguments, or
    with that admission's fields in their order (`now, leases, limit, runner,
    queues, paused_queues, kind_caps`, as the claim took them before there was
    an admission), which build one. The runner always passes an `Admission`;
    the fields suit a test or a script claiming by hand."""

    @functools.wraps(verb)
    def call(store: Any, *args: Any, **named: Any) -> Any:
        if not named and len(args) == leading + 1 and type(args[leading]) is Admission:
            return verb(store, *args)  # the runner's call: one type check
        if "admission" in named:
            return verb(store, *args, **named)
        fields = {name: named.pop(name) for name in FIELDS if name in named}
        return verb(store, *args[:leading], Admission(*args[leading:], **fields), **named)

    return call  # type: ignore[return-value]


#: The fields a claim's old call named, in the order it took them.
FIELDS = Admission._fields
