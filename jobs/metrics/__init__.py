"""Prometheus metrics: what the runners did, and what the table holds now.

- `instruments`: the counters, histograms and per-runner gauges, recorded in
  prometheus_client's default registry by whichever process does the work
  (a web process counts its enqueues, a runner its attempts).
- `tally`: the runner's side of recording, batched: its loop applies a pass's
  worth of starts and settles at once, never one update per job.
- `database`: the gauges read from the table, once per scrape.
- `exposition`: `runjobs --metrics-port`'s HTTP endpoint, one process or a
  supervisor's children summed.
- `views`: the database gauges as a Django view, behind a permission or a token.

A runner without `--metrics-port` imports none of prometheus_client before
its first claim: `tally` imports the instruments at its first flush (the
library was a tenth of a runner's start), and `exposition` imports what
serving needs when an endpoint starts.
"""

#: Where prometheus_client's multiprocess mode keeps each process's values:
#: set in a supervisor's children, it chooses that mode as they import the
#: library (`instruments`).
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
