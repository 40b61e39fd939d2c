"""The fault suite: real `runjobs` processes against real PostgreSQL, with faults
injected (SIGKILL, a database restart, a database that is not up yet, handlers
that hang, kill their process or raise), then the books checked.

The books are `tests.jobapp.Execution` (one row per attempt that reached its
handler: job, attempt number, process, start, end) against `jobs_job`. Every
scenario checks the same things:

- no job lost: every job queued is settled as the scenario expects;
- no claim given twice: a job's executions carry distinct attempt numbers, none
  above the row's `attempts`;
- attempts counted right: a job settled by its handler has `attempts` equal to
  its last execution's attempt number;
- no completed attempt repeated unless its settle was lost. An execution with
  `finished_at` set ran its handler to the end; a later execution of the same job
  is only allowed when that earlier settle provably never landed: its process
  was SIGKILLed after it (the batch settle died with the process), or its
  runner logged the settle as failed (`job_settle_failed`, the database was
  down), timed out (`job_timed_out`), or discarded (`job_result_discarded`)
  for that job and attempt. Any other repeat is counted as unexplained and fails.

A PostgreSQL crash cannot be checked that way: the crash may forget the
execution rows with the commits under test, and a handler's own commit would
flush the WAL the runner's passes leave unflushed. So the crash scenario
(`test_postgresql_crash.py`) runs the ledger handler of `tests.faults.jobs`,
which records each attempt in files outside the database (`tests.faults.ledger`),
and `books.audit_crash` holds the rows to that ledger: every job done, by a run
with its final attempt number, and every rerun put down to a commit the crash
forgot (a Done, or a claim handed out again with the same attempt number, run
at most a second before the crash) or to a settle its runner logged as failed.

Each scenario writes its figures to `tests/artifacts/faults.json` as it ends;
`python -m tests.faults.report` renders `docs/reliability.md` from them.
The helpers live in `tests.faults.books`, so the report imports no Django.
"""
