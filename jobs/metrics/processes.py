"""The `process_*` and `python_*` metrics of a supervisor and its children.

prometheus_client's multiprocess mode sums what each child wrote to its
files and nothing else: the process collectors, which read the running
process's own `/proc` entry, are left out, so `runjobs --processes N` would
serve no CPU or memory at all. The supervisor reads them instead, at each
scrape, from `/proc/<pid>` of itself and of each live child (the same
files prometheus_client reads, for the same user), one series per process,
labelled `process="supervisor"` or `process="runner-<index>"`: an index
rather than a pid, so a replaced child continues its series (its counter
resets, as a restarted process's does) instead of starting a new one.
`python_gc_*` can only be read from inside an interpreter: they are the
supervisor's own, labelled so. `python_info` is the one interpreter all run.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator

from prometheus_client.gc_collector import GCCollector
from prometheus_client.metrics_core import Metric
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector, CollectorRegistry

#: The `process` label of the supervisor's own series.
SUPERVISOR = "supervisor"


def child_name(index: int) -> str:
    """The `process` label of child `index`'s series."""
    return f"runner-{index}"


class ProcessesCollector(Collector):
    """The supervisor's and its live children's process metrics, by `process`.

    `started` and `exited` come from the supervisor's loop; `collect` from
    the endpoint's request threads, hence the lock.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._collectors: dict[str, ProcessCollector] = {SUPERVISOR: _reader("self")}
        self._pids: dict[int, str] = {}
        # Each registers itself somewhere: a registry of their own, never served.
        self._gc = GCCollector(registry=CollectorRegistry(auto_describe=False))
        self._platform = PlatformCollector(registry=CollectorRegistry(auto_describe=False))

    def started(self, index: int, pid: int) -> None:
        """Child `index` now runs as `pid`."""
        with self._lock:
            self._collectors[child_name(index)] = _reader(pid)
            self._pids[pid] = child_name(index)

    def exited(self, pid: int) -> None:
        """Child `pid` exited: its series go until its replacement starts."""
        with self._lock:
            name = self._pids.pop(pid, None)
            if name is not None:
                self._collectors.pop(name, None)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            readers = sorted(self._collectors.items())
        families: dict[str, Metric] = {}
        for name, reader in readers:
            _merge(families, reader.collect(), name)
        _merge(families, self._gc.collect(), SUPERVISOR)
        yield from families.values()
        yield from self._platform.collect()


def _reader(pid: int | str) -> ProcessCollector:
    return ProcessCollector(pid=lambda: pid, registry=None)


def _merge(families: dict[str, Metric], collected: Iterable[Metric], process: str) -> None:
    """Add `collected`'s samples to `families`, each labelled `process`."""
    for family in collected:
        merged = families.get(family.name)
        if merged is None:
            merged = families[family.name] = Metric(
                family.name, family.documentation, family.type, family.unit
            )
        for sample in family.samples:
            merged.add_sample(
                sample.name, {**sample.labels, "process": process}, sample.value, sample.timestamp
            )
