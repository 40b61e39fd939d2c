"""A job id as a person gives it: the whole UUID, or its first 8 or more hex digits.

An operator copies an id from `jobs list`, a log line or the README's
`3f0c…`, and a prefix is as good as the whole while only one job has it. The
`jobs` command and the admin's search read ids here, so both take the same
spellings: hyphens anywhere are ignored (a pasted `3f00a956-1c2d` is the first
twelve digits), any case. Fewer than 8 digits is refused rather than matched:
a table of a million jobs has dozens of ids sharing any 4 digits.

How a prefix is found depends on how the database stores a `UUIDField`, and
one query does not serve all three. PostgreSQL's `uuid` and SQLite's
`char(32)` of hex sort as the id's own digits do, so a prefix is the range
from the prefix padded with `0` to the prefix padded with `f`: an index range
on the primary key. MariaDB's `uuid` (Django's type for it there) sorts the
id's groups in reverse (`nnnnnnnnnnnn-vsss-Vhhh-mmmm-llllllll`), putting the
first digits last, so that range misses; there the id's text is matched with
`LIKE '3f00a956-1c%'`, a scan of the smallest index, which is not fast on a
large table but is right.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from itertools import pairwise

from django.db import connections
from django.db.models import Q

#: The fewest hex digits a prefix may have.
MIN_DIGITS = 8

#: Where the hyphens of a UUID's text fall, counted in hex digits.
HYPHENS_AFTER = (8, 12, 16, 20)

HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class IdPrefix:
    """The first `MIN_DIGITS` to 31 hex digits of a job id, lower case, no hyphens."""

    digits: str

    def __str__(self) -> str:
        return self.hyphenated()

    def hyphenated(self) -> str:
        """The digits as they begin a UUID's text: `3f00a956-1c`."""
        cuts = [0, *(n for n in HYPHENS_AFTER if n < len(self.digits)), len(self.digits)]
        return "-".join(self.digits[a:b] for a, b in pairwise(cuts))

    def bounds(self) -> tuple[uuid.UUID, uuid.UUID]:
        """The lowest and highest ids that begin with the digits."""
        pad = 32 - len(self.digits)
        return uuid.UUID(self.digits + "0" * pad), uuid.UUID(self.digits + "f" * pad)


def parse(text: str) -> uuid.UUID | IdPrefix:
    """A whole id, or a prefix of one; `ValueError` with a sentence for anything else."""
    text = text.strip()
    try:
        return uuid.UUID(text)
    except ValueError:
        pass
    digits = text.replace("-", "").lower()
    if not digits or not set(digits) <= HEX or len(digits) > 32:
        raise ValueError(
            f"{text!r} is not a job id (a UUID such as {uuid.UUID(int=0)}, "
            f"or its first {MIN_DIGITS} or more hex digits)"
        )
    if len(digits) < MIN_DIGITS:
        raise ValueError(
            f"{text!r} is too short to find a job by: give at least {MIN_DIGITS} hex "
            "digits of its id"
        )
    return IdPrefix(digits)


def matching(ident: uuid.UUID | IdPrefix, using: str) -> Q:
    """The condition on `Job.id` for the job `ident` names, or every job its prefix begins."""
    if isinstance(ident, uuid.UUID):
        return Q(id=ident)
    connection = connections[using]
    if connection.vendor == "mysql" and connection.features.has_native_uuid_field:
        # MariaDB's uuid order is not the text's (the module's docstring).
        return Q(id__startswith=ident.hyphenated())
    return Q(id__range=ident.bounds())
