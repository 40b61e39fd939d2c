"""What a store reads of the server's room for connections
(`Store.connection_room`), for the runner's connection budget
(`jobs.runner.connection_budget`). Plain values: no database here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ConnectionLimit:
    """One limit on how many connections a session's server, role or database
    may hold, as `Store.connection_room` read it."""

    #: What an operator changes to raise it, e.g. `max_connections`.
    name: str
    #: The connections it allows this session's role (past any reserved for others).
    allows: int
    #: The connections open now that count against it, this session's included.
    in_use: int

    @property
    def left(self) -> int:
        return self.allows - self.in_use


@dataclass(frozen=True, slots=True)
class ConnectionRoom:
    """What the server has room for: `max_connections` and each other limit
    that applies to this session (`Store.connection_room`)."""

    max_connections: int
    limits: tuple[ConnectionLimit, ...]

    def tightest(self) -> ConnectionLimit:
        """The limit with the fewest connections left."""
        return min(self.limits, key=lambda limit: limit.left)
