"""The benchmark's own arithmetic: which run it reports when it repeats one.

A single run on a shared 2-core machine can differ from the next by a third,
so `benchjobs --repeat` reports the median run and every run's rate. And
how it reads a runner's memory over a drain.
"""

import subprocess
import sys

from acmeproxy.benchmarks import bench
from acmeproxy.benchmarks.bench import Result, median_of


def test_a_repeated_part_reports_its_median_run_and_every_runs_rate():
    rates = iter([(300, 10), (100, 30), (200, 20)])

    def run() -> list[Result]:
        drain, enqueue = next(rates)
        return [
            Result("drain", {"jobs_per_second": drain, "run": drain}),
            Result("enqueue", {"jobs_per_second": enqueue}),
        ]

    drain, enqueue = median_of(3, run)

    assert drain.numbers["jobs_per_second"] == 200
    assert drain.numbers["run"] == 200, "the median run's other numbers come with it"
    assert drain.numbers["runs_jobs_per_second"] == [300, 100, 200], "in the order they ran"
    assert enqueue.numbers["jobs_per_second"] == 20, "each part's median is its own"


def test_a_single_run_is_reported_as_it_is():
    (only,) = median_of(1, lambda: [Result("drain", {"jobs_per_second": 5})])

    assert only.numbers == {"jobs_per_second": 5}


def test_resident_memory_shows_a_process_that_grows_late_in_its_run():
    """What tells a runner that grows with every job from one that is flat:
    a process that takes 200 MB halfway through peaks far higher over its
    whole run than over its first quarter."""
    grows = "import time; time.sleep(1); held = b'x' * (200 * 2**20); time.sleep(1)"
    process = subprocess.Popen([sys.executable, "-c", grows])
    memory = bench.ResidentMemory(process.pid)
    assert process.wait(timeout=30) == 0

    quarter, whole = memory.peak(0.25), memory.peak()

    assert quarter is not None, "sampled from /proc"
    assert whole is not None
    assert whole - quarter > 150, f"{quarter} MB in the first quarter, {whole} MB in all"


def test_each_ceiling_shows_every_drain_as_a_fraction_of_it():
    results = [
        Result("drain (default config)", {"jobs_per_second": 2_000}),
        Result("drain (tuned)", {"jobs_per_second": 5_000}),
        Result("enqueue (one per transaction)", {"jobs_per_second": 900}),
        Result("ceiling (raw SKIP LOCKED batch loop)", {"jobs_per_second": 20_000}),
        Result("ceiling, 8 per pass (raw settle-and-claim loop)", {"jobs_per_second": 4_000}),
    ]

    bench.drains_against_ceilings(results)

    assert results[3].numbers["drains_as_fraction"] == {"default config": 0.1, "tuned": 0.25}
    assert results[4].numbers["drains_as_fraction"] == {"default config": 0.5, "tuned": 1.25}
    assert "drains_as_fraction" not in results[2].numbers, "only ceilings carry it"


def test_a_ceiling_skipped_on_sqlite_or_run_without_drains_carries_no_fractions():
    skipped = Result("ceiling", {"skipped": "PostgreSQL only"})
    alone = Result("ceiling (raw SKIP LOCKED batch loop)", {"jobs_per_second": 20_000})

    bench.drains_against_ceilings([Result("drain (tuned)", {"jobs_per_second": 5_000}), skipped])
    bench.drains_against_ceilings([alone])

    assert skipped.numbers == {"skipped": "PostgreSQL only"}
    assert alone.numbers == {"jobs_per_second": 20_000}
