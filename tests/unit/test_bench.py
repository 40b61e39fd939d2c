"""The benchmark's own arithmetic: which run it reports when it repeats one.

A single run on a shared 2-core machine can differ from the next by a third,
so `benchjobs --repeat` reports the median run and every run's rate.
"""

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
