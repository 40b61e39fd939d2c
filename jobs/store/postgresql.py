"""PostgreSQL: the claim as one statement with `FOR UPDATE SKIP LOCKED`.

Concurrent runners skip each other's locked rows instead of queueing on them,
which is what lets many `runjobs` processes on many machines share one table.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from jobs.store.base import CLAIM_COLUMNS, Claim, Store

_RETURNING = ", ".join(f'j."{column}"' for column in CLAIM_COLUMNS)

#: Lock up to N ready rows (skipping rows another claim holds), then move them
#: to running, count the attempt and write each kind's lease, reporting what
#: state each row was in before. The range on run_at serves both kinds of
#: ready row from the jobs_job_ready index: a running row's run_at is in the
#: past too.
CLAIM_SQL = f"""
    UPDATE jobs_job AS j
    SET state = 'running',
        attempts = j.attempts + 1,
        lease_expires_at = lease.expires,
        started_at = %(now)s,
        updated_at = %(now)s
    FROM (
        SELECT id, state AS prior_state
        FROM jobs_job
        WHERE state IN ('queued', 'running')
          AND run_at <= %(now)s
          AND kind = ANY(%(kinds)s)
          AND (state = 'queued' OR lease_expires_at <= %(now)s)
        ORDER BY run_at
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) AS ready,
    unnest(%(kinds)s::text[], %(expires)s::timestamptz[]) AS lease(kind, expires)
    WHERE j.id = ready.id AND lease.kind = j.kind
    RETURNING {_RETURNING}, ready.prior_state
"""


class PostgreSQLStore(Store):
    def claim(self, now: datetime, leases: Mapping[str, timedelta], limit: int) -> list[Claim]:
        if limit < 1 or not leases:
            return []
        kinds = list(leases)
        params: dict[str, Any] = {
            "now": now,
            "kinds": kinds,
            "expires": [now + leases[kind] for kind in kinds],
            "limit": limit,
        }
        with self.connection.cursor() as cursor:
            cursor.execute(CLAIM_SQL, params)
            rows = cursor.fetchall()
        return [Claim(self.job_from_row(row[:-1]), row[-1] == "running") for row in rows]
