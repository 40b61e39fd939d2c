"""The queue measured as its users meet it, and beside that, as it flatters it.

A queue is judged in its worst minute: a burst arriving at a runner that was
idle, on a database busy with other work, into a table nobody has analyzed.
So the headline figures (`AS_MET`) are taken the way a user meets the queue:
jobs carry a payload, an ordinary `manage.py runjobs` is already running and
idle when the backlog is committed, completion is counted from another
process, latency runs from just before `enqueue` in a process of its own to
the handler's first line, and no part tunes the table (no ANALYZE, VACUUM
FULL, warm-up or rewrite) before it measures. Each figure is also divided by
a raw loop doing the same database work, measured in the same run, because
this machine's speed moves by a factor of two from hour to hour. The old
figures stay (`FAVOURABLE`), labelled by the setup that flatters them.

Every part runs against the database `DATABASE_URL` names and writes only
kinds starting `bench.`, deleting them afterwards; use a scratch database all
the same, since its runners take any other ready work there.

Modules, one concern each: `measure` (results, statistics, the table),
`stage` (rows written in bulk, statistics states), `runner` (the `runjobs`
process and the driver's view of it), `drains`, `enqueue`, `latency` (with
`enqueuer`, its enqueuing process), `ceiling` (the raw loops), `load`
(pgbench beside a drain), `scale`, `ratios` (ratios and issue 24's targets),
`instructions` (callgrind's counts, with `counted`, its client process),
`budget` (the committed instruction budget and the 2 % rule), `suite`
(which parts run, in what order). Nothing here imports the models at
import time, so `enqueuer` can set Django up first.
"""
