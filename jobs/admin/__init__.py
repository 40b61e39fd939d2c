"""The admin: a window onto the queue, built to be the screen kept open during an incident.

- Jobs (`job`): a list that stays fast on a million rows (newest first from the
  `created_at` index, no full COUNT per page view on PostgreSQL, no filter or
  date drill-down that scans history to list its choices: `large_table`,
  `filters`), a read-only detail with every time to the second and the
  attempt record (`job_detail`, `attempts`), and three actions (run now,
  retry, cancel) that go through `jobs.operations`, so identity, attempts and
  fencing stay the store's business; cancel asks first (`confirm`). Nothing
  here writes a job row itself.
- Runners (`runners`): who is running right now, and, listed apart, who has
  gone silent (two missed heartbeats), until the runners forget them.
- The dashboard (`dashboard`): the queue's numbers from `jobs.stats`, one page,
  no JavaScript.
- The live config (`config`): a singleton form. There is one config row; the
  admin offers no way to add a second or delete it, and the list page goes
  straight to the form. Invalid values are refused by the form (the model's
  validators and `clean`) and never saved.
- The operator's controls (`controls`): pause and resume a queue or kind, set
  a kind's concurrency limit; each change stamped with who made it.
- A workflow's page (`workflow_page`, linked from each of its jobs): every
  step with its state and timing, its graph drawn inline
  (`workflow_graph`), and Cancel, asked first, through
  `jobs.workflows.operator`.
- Schedules (`schedules`): every schedule with its timing in words, next and
  last fire and how the last ended; disable, enable and run now, stamped with
  who. Read-only otherwise: the rows belong to the runners' reconcile.

Every page says things in the words of `jobs.presentation`, as
`manage.py jobs` does; `display` marks them up, shows every instant in one
format (`display.stamp`: to the second, with the zone; templates use the
`stamp` filter of `jobs.templatetags.jobs_admin`), and lets long names wrap
only between their parts (`display.breakable`). This module registers the
model admins with the default site; the others only define them.
"""

from __future__ import annotations

from django.contrib import admin

from jobs.admin.config import JobsConfigAdmin
from jobs.admin.controls import ControlAdmin
from jobs.admin.job import JobAdmin
from jobs.admin.runners import RunnerProcessAdmin
from jobs.admin.schedules import ScheduleAdmin
from jobs.models import Control, Job, JobsConfig, RunnerProcess, Schedule

admin.site.register(Job, JobAdmin)
admin.site.register(RunnerProcess, RunnerProcessAdmin)
admin.site.register(JobsConfig, JobsConfigAdmin)
admin.site.register(Control, ControlAdmin)
admin.site.register(Schedule, ScheduleAdmin)

__all__ = ["ControlAdmin", "JobAdmin", "JobsConfigAdmin", "RunnerProcessAdmin", "ScheduleAdmin"]
