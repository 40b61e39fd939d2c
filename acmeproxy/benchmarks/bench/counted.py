"""The instructions part's client process: `python -m acmeproxy.benchmarks.bench.counted
MODE COUNT`, run under callgrind, enqueues COUNT payload jobs, `enqueue` one
call (and transaction) each for MODE `enqueue`, or one `enqueue_many` call of
COUNT specs for MODE `enqueue_many`, building each spec included.

A process of its own, so what callgrind counts is the client's work and the
start-up every run shares; the instructions part subtracts a run with COUNT
0. Every run, the empty one too, first opens its connection and makes one
`enqueue` and one `enqueue_many` of one spec (keys starting `warm-`): a
first call imports the store's modules and sets up what later calls reuse,
~79 million instructions on PostgreSQL, which would add ~40,000 to each of
2,000 calls' share. Django is set up before anything touching the models is
imported.
"""

from __future__ import annotations

import os
import sys

MODES = ("enqueue", "enqueue_many")
#: The keys of the jobs every run enqueues before the ones it is counted for.
WARM = "warm-"


def drive(mode: str, count: int) -> None:
    from django.db import connection

    from acmeproxy.benchmarks.jobs import NOOP, payload
    from jobs import JobSpec, enqueue, enqueue_many

    connection.ensure_connection()
    enqueue(JobSpec.now(NOOP, f"{WARM}one").with_payload(payload(0)))
    enqueue_many([JobSpec.now(NOOP, f"{WARM}many").with_payload(payload(0))])
    if mode == "enqueue":
        for n in range(count):
            enqueue(JobSpec.now(NOOP, f"e{n}").with_payload(payload(n)))
    else:
        enqueue_many(JobSpec.now(NOOP, f"m{n}").with_payload(payload(n)) for n in range(count))


def main(argv: list[str]) -> None:
    mode, count = argv[0], int(argv[1])
    if mode not in MODES:
        raise SystemExit(f"MODE is one of {', '.join(MODES)}, not {mode!r}")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "acmeproxy.settings")
    import django

    django.setup()
    drive(mode, count)


if __name__ == "__main__":
    main(sys.argv[1:])
