"""Schedules: work declared once to run at cron or interval fire times, on any
number of runners, with no leader and no extra process.

A schedule is one live job of its kind whose key is "schedule:<name>": the
live identity makes "one occurrence at a time" a fact of the database. The
occurrence's `run_at` is its fire time; it runs as any job does (its own
attempt budget, retries with backoff, a lease another runner takes after a
crash), and when it ends for good the next occurrence is queued in the same
transaction, due at the next fire time reckoned from the one it stood for.

- `plan`: what `settings.JOBS_SCHEDULES` and the handlers' `schedule` declare,
  checked (the system check `jobs.E007` and `runjobs` say the same sentence).
- `timing`: fire times (cronsim for cron, in the schedule's zone), pure.
- `reconcile`: at each runner's start, the rows made to match the declarations.
- `occurrences`: after a claim, run or skip (disabled, missed); after an end,
  the successor.
- `operator`: enabling and disabling, and the listing the admin and CLI show.
"""
