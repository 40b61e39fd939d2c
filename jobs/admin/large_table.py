"""What keeps the job list fast on a large table: its count and its date drill-down.

An admin list pays for two things on every page view that grow with the
table: the paginator's COUNT(*) and the date hierarchy's DISTINCT over every
row. `EstimatedCountPaginator` takes an unfiltered PostgreSQL count from the
table's statistics; `CalendarQuerySet` answers the drill-down from the two
ends of the `created_at` index. Both are exact wherever exact is cheap.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime, time, timedelta
from datetime import tzinfo as tzinfo_type
from functools import cached_property
from typing import Literal

from django.conf import settings
from django.core.paginator import Paginator
from django.db.models import Max, Min, QuerySet
from django.utils import timezone

from jobs.models import Job
from jobs.store import for_database

#: Above this many rows (PostgreSQL's own estimate) an unfiltered job list
#: takes its count from the table statistics instead of counting every row.
ESTIMATE_COUNT_ABOVE = 100_000


class EstimatedCountPaginator(Paginator):  # type: ignore[type-arg]  # generic only in the stubs
    """Counts exactly, except an unfiltered list of a large PostgreSQL table.

    Counting a million rows on every page view is what makes an admin list
    slow. With no filter, search or date drill-down applied, the count is the
    whole table, and PostgreSQL already keeps an estimate of that; a filtered
    list is smaller and is counted exactly. `estimated` tells the template to
    say "about".
    """

    estimated = False

    @cached_property
    def count(self) -> int:
        estimate = self._estimate()
        if estimate is not None:
            self.estimated = True
            return estimate
        return super().count

    def _estimate(self) -> int | None:
        rows = self.object_list
        if not isinstance(rows, QuerySet) or rows.query.where:
            return None
        estimate = for_database(rows.db).estimated_rows()
        if estimate is None or estimate < ESTIMATE_COUNT_ABOVE:
            return None
        return estimate


class CalendarQuerySet(QuerySet[Job]):
    """The job list's queryset, whose `datetimes()` reads two index entries, not every row.

    The admin's date drill-down asks for each year, month or day that holds a
    row: a DISTINCT over the whole table on every page view. This answers from
    the first and last `created_at` alone (the two ends of the
    `jobs_job_created` index) and offers every year, month or day between
    them; one with no jobs simply shows an empty list.
    """

    def datetimes(  # type: ignore[override]  # the drill-down only iterates the result
        self,
        field_name: str,
        kind: Literal["year", "month", "week", "day", "hour", "minute", "second"],
        order: Literal["ASC", "DESC"] = "ASC",
        tzinfo: tzinfo_type | None = None,
    ) -> Iterable[datetime]:
        if kind not in ("year", "month", "day") or not settings.USE_TZ:
            return super().datetimes(field_name, kind, order, tzinfo)
        zone = tzinfo or timezone.get_current_timezone()
        ends = self.aggregate(first=Min(field_name), last=Max(field_name))
        if ends["first"] is None:
            return []
        day: date = ends["first"].astimezone(zone).date()
        last: date = ends["last"].astimezone(zone).date()
        if kind == "year":
            day = day.replace(month=1, day=1)
        elif kind == "month":
            day = day.replace(day=1)
        found = []
        while day <= last:
            found.append(datetime.combine(day, time.min, tzinfo=zone))
            if kind == "day":
                day += timedelta(days=1)
            elif kind == "month":
                day = date(day.year + day.month // 12, day.month % 12 + 1, 1)
            else:
                day = date(day.year + 1, 1, 1)
        return found[::-1] if order == "DESC" else found
