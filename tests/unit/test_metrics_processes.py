"""The supervisor's process metrics (`jobs.metrics.processes`), read from /proc
without a database: a series per live process, gone with the process."""

from __future__ import annotations

import os
import subprocess
import sys

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from jobs.metrics.processes import ProcessesCollector


def resident_memory_by_process(collector: ProcessesCollector) -> dict[str, float]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    body = generate_latest(registry).decode()
    return {
        sample.labels["process"]: sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
        if sample.name == "process_resident_memory_bytes"
    }


def test_a_child_s_series_is_served_while_it_runs_and_goes_when_it_exits():
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(30)"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "up\n", "the child runs (its exec is done)"
        collector = ProcessesCollector()
        collector.started(3, child.pid)
        served = resident_memory_by_process(collector)
        assert set(served) == {"supervisor", "runner-3"}
        assert served["runner-3"] > 0, "the child's own memory, read from its /proc entry"
        collector.exited(child.pid)
        assert set(resident_memory_by_process(collector)) == {"supervisor"}, (
            "an exited child's series leave at once, not when a scrape fails to read it"
        )
    finally:
        child.kill()
        child.wait()


def test_the_supervisor_s_series_is_its_own_process():
    served = resident_memory_by_process(ProcessesCollector())
    with open(f"/proc/{os.getpid()}/statm") as statm:
        pages = int(statm.read().split()[1])
    assert abs(served["supervisor"] - pages * os.sysconf("SC_PAGE_SIZE")) < 64 * 1024 * 1024
