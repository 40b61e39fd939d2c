"""`runjobs --metrics-port` as real processes: the endpoint a Prometheus scrapes.

One runner serves its own metrics and the table's gauges; under `--processes
2` the supervisor's one endpoint sums what both children recorded
(prometheus_client's multiprocess mode). Every body is read with
prometheus_client's own parser, as a scrape would read it.
"""

from __future__ import annotations

import signal
import socket
import urllib.error
import urllib.request
from collections import Counter

import pytest
from prometheus_client.parser import text_string_to_metric_families

from jobs import JobSpec, enqueue_many
from jobs.models import Job, State
from tests.acceptance import wait_for_log
from tests.acceptance.test_supervisor_process import every_child_pid, supervise  # noqa: F401
from tests.helpers import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def scrape(port: int) -> Samples:
    """GET the endpoint and parse it; fails on anything a scrape could not read."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        assert response.status == 200
        body = response.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels`."""
    wanted = set(labels.items())
    return sum(value for (n, ls), value in samples.items() if n == name and wanted <= set(ls))


def settled(keys: int) -> None:
    """Wait until `keys` of the test's jobs (not the sweep's) have settled."""
    wait_until(
        lambda: (
            Job.objects.filter(
                state__in=[State.DONE, State.FAILED], kind__startswith="test."
            ).count()
            == keys
        ),
        30,
        f"{keys} jobs settle",
    )


def test_one_runner_s_endpoint_serves_its_counts_and_the_table_s_gauges(runjobs):
    port = free_port()
    queued = [JobSpec.now("test.record", f"r{n}") for n in range(5)]
    assert all(enqueue_many([*queued, JobSpec.now("test.refuse", "no")]))
    runner = runjobs("--metrics-port", str(port), env={"JOBS_POLL_INTERVAL_MS": "50"})
    wait_for_log(runner, "metrics_listening")
    settled(6)

    # The settle of the last job commits before the pass that flushes it.
    wait_until(lambda: total(scrape(port), "jobs_attempts_finished_total") == 6, 10, "counted")
    samples = scrape(port)
    assert total(samples, "jobs_attempts_started_total", kind="test.record") == 5
    assert total(samples, "jobs_attempts_finished_total", kind="test.record", outcome="done") == 5
    assert total(samples, "jobs_attempts_finished_total", kind="test.refuse", outcome="failed") == 1
    assert total(samples, "jobs_attempt_duration_seconds_count") == 6
    assert total(samples, "jobs_enqueued_total", kind="test.record") == 0, (
        "the test queued them, not this process"
    )
    assert samples["jobs_ready", (("queue", "default"),)] == 0
    assert samples["jobs_live_runners", ()] == 1
    assert samples["jobs_stuck", ()] == 0
    runners = {dict(ls)["runner"] for (n, ls) in samples if n == "jobs_slots_free"}
    assert len(runners) == 1, "one runner, one series"
    assert total(samples, "process_resident_memory_bytes") > 0, "the process's own, too"


def test_under_two_processes_the_supervisor_s_endpoint_sums_both_children(
    supervise,  # noqa: F811
    configure,
):
    configure(max_concurrent=1)
    jobs = 16
    spec = [JobSpec.now("test.sleep", f"s{n}").with_payload({"seconds": 0.15}) for n in range(jobs)]
    assert all(enqueue_many(spec))
    port = free_port()
    supervisor = supervise(2, "--metrics-port", str(port))
    wait_for_log(supervisor, "metrics_listening")
    settled(jobs)

    by_child = Counter(Job.objects.filter(kind="test.sleep").values_list("claimed_by", flat=True))
    assert len(by_child) == 2, f"both children ran some: {by_child}"
    wait_until(
        lambda: total(scrape(port), "jobs_attempts_finished_total", kind="test.sleep") == jobs,
        10,
        "counted",
    )
    samples = scrape(port)
    assert total(samples, "jobs_attempts_finished_total", kind="test.sleep", outcome="done") == jobs
    assert total(samples, "jobs_attempts_started_total", kind="test.sleep") == jobs
    running = {dict(ls)["runner"] for (n, ls) in samples if n == "jobs_slots_free"}
    assert running == set(by_child), "each live child's own slots, by its runner name"
    assert len(every_child_pid(supervisor)) == 2


def test_a_taken_port_is_a_clear_error_before_any_job_runs(runjobs):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert all(enqueue_many([JobSpec.now("test.record", "untouched")]))
        runner = runjobs("--metrics-port", str(port))
        status = runner.wait(30)
    assert status == 1
    assert f"cannot listen on 127.0.0.1:{port}" in runner.output()
    assert Job.objects.get(key="untouched").state == State.QUEUED, "nothing ran"


def status_of(port: int, path: str) -> int:
    """The HTTP status the endpoint answers a GET of `path` with."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def test_only_slash_metrics_answers_200_on_either_endpoint_and_every_other_path_404(
    runjobs,
    supervise,  # noqa: F811
):
    """A scraper pointed at the wrong path must hear so, not get a body that
    looks right (prometheus_client answers any path alike)."""
    one, several = free_port(), free_port()
    runner = runjobs("--metrics-port", str(one))
    supervisor = supervise(2, "--metrics-port", str(several))
    wait_for_log(runner, "metrics_listening")
    wait_for_log(supervisor, "metrics_listening")
    for port in (one, several):
        assert status_of(port, "/metrics") == 200
        assert status_of(port, "/metrics?name[]=jobs_ready") == 200, "a query is still a scrape"
        for path in ("/", "/favicon.ico", "/metricsx", "/metrics/", "/admin/"):
            assert status_of(port, path) == 404, f"{path} on port {port} is not the metrics"


def test_under_two_processes_the_endpoint_gives_each_process_s_cpu_and_memory_by_name(
    supervise,  # noqa: F811
):
    """Multiprocess mode drops the process collectors; the supervisor reads
    /proc for itself and each live child, one series per process."""
    port = free_port()
    supervisor = supervise(2, "--metrics-port", str(port))
    wait_for_log(supervisor, "metrics_listening")
    wait_until(
        lambda: supervisor.output().count("runner_process_ready") == 2, 30, "both children ready"
    )
    samples = scrape(port)
    names = {"supervisor", "runner-0", "runner-1"}
    for metric in ("process_resident_memory_bytes", "process_cpu_seconds_total"):
        by_process = {dict(ls)["process"] for (n, ls) in samples if n == metric}
        assert by_process == names, f"{metric} for the supervisor and each child: {by_process}"
        for process in names:
            assert total(samples, metric, process=process) > 0, f"{metric} of {process}"
    assert total(samples, "process_open_fds", process="runner-1") > 0
    assert total(samples, "python_gc_objects_collected_total", process="supervisor") > 0, (
        "the supervisor's own interpreter, named as its"
    )
    assert any(n == "python_info" for (n, _) in samples)


def test_a_supervisor_s_children_stop_without_prometheus_client_s_label_removal_warning(
    supervise,  # noqa: F811
):
    """Each child's runner forgets its gauges at stop; in multiprocess mode that
    is the supervisor marking the child dead, not `remove` (which warns)."""
    port = free_port()
    supervisor = supervise(2, "--lanes=2", "--metrics-port", str(port))
    wait_until(lambda: supervisor.output().count("runner_process_ready") == 2, 30, "both ready")
    supervisor.process.send_signal(signal.SIGTERM)
    assert supervisor.wait(30) == 0, supervisor.output()
    output = supervisor.output()
    assert "supervisor_stopped" in output
    assert "Removal of labels" not in output, output
    assert "Warning" not in output, output
