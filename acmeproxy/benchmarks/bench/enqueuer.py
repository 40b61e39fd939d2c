"""The latency part's enqueuing process: `python -m acmeproxy.benchmarks.bench.enqueuer
COUNT GAP PREFIX` enqueues COUNT stamp jobs one at a time, GAP seconds apart,
and prints one JSON line per job with the wall-clock time just before the
`enqueue` call, just before its COMMIT, and after the commit returned.

A process of its own, like the web server a user enqueues from, so the
wake-up measured is the one across processes. Django is set up before
anything touching the models is imported.
"""

from __future__ import annotations

import json
import os
import sys
import time


def drive(count: int, gap: float, prefix: str) -> None:
    from django.db import transaction

    from acmeproxy.benchmarks.jobs import STAMP, payload
    from jobs import JobSpec, enqueue

    for n in range(count):
        key = f"{prefix}{n}"
        spec = JobSpec.now(STAMP, key).with_payload(payload(n))
        before = time.time()
        with transaction.atomic():
            enqueue(spec)
            # Just before COMMIT: a runner may start the job before the
            # commit returns here, so "from commit" counts the commit itself.
            commit = time.time()
        after = time.time()
        print(json.dumps({"key": key, "before": before, "commit": commit, "after": after}))
        time.sleep(gap)


def main(argv: list[str]) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "acmeproxy.settings")
    import django

    django.setup()
    count, gap, prefix = int(argv[0]), float(argv[1]), argv[2]
    drive(count, gap, prefix)


if __name__ == "__main__":
    main(sys.argv[1:])
