"""`runjobs --metrics-port`: the runner's metrics over HTTP, for Prometheus to scrape.

One process serves prometheus_client's default registry (its own counters,
histograms and gauges, and the process's CPU and memory) plus the table's
gauges (`jobs.metrics.database`), read at each scrape. A supervisor
(`--processes N`) serves instead what its children recorded, summed
(prometheus_client's multiprocess mode): it sets `PROMETHEUS_MULTIPROC_DIR`
to a directory of its own before it starts them, tells the collector when
one exits (its live gauges go; its counts stay in the totals), and removes
the directory when it stops. The children serve nothing themselves.

The supervisor also serves the process metrics multiprocess mode leaves
out: its own and each live child's, by name (`jobs.metrics.processes`).

The endpoint listens on 127.0.0.1 unless told otherwise (`--metrics-host`):
what it says about the queue is for the machine's own scraper, or for a
network the operator chose. Only `/metrics` answers (prometheus_client's own
server answers every path alike, so a scraper pointed at the wrong one would
never hear of it); any other path is a 404 (`jobs.metrics.server`).

Every `runjobs` imports this module for its arguments; what only serving
needs (prometheus_client's registries, the HTTP server, the table's and the
processes' collectors, multiprocess mode's reader) is imported when an
endpoint starts, so a runner without `--metrics-port` does not pay for it
at start.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobs import log
from jobs.metrics import MULTIPROC_ENV

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from jobs.metrics.processes import ProcessesCollector

DEFAULT_HOST = "127.0.0.1"


@dataclass(frozen=True)
class Address:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


class MetricsUnavailable(Exception):
    """The endpoint could not listen (the port is taken, the host is not this machine's)."""


class Endpoint:
    """A running endpoint; `close` stops it."""

    def __init__(self, address: Address, registry: CollectorRegistry) -> None:
        from jobs.metrics import server

        try:
            self._server, self._thread = server.start(address.host, address.port, registry)
        except OSError as error:
            raise MetricsUnavailable(
                f"the metrics endpoint cannot listen on {address}: {error.strerror or error}"
            ) from error
        self.address = address
        log.event("metrics_listening", host=address.host, port=address.port)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


def serve_process(address: Address, using: str | None = None) -> Endpoint:
    """Serve this process's metrics and the table's gauges at `address`."""
    from prometheus_client import REGISTRY, CollectorRegistry

    from jobs.metrics.database import TableCollector

    registry = CollectorRegistry(auto_describe=False)
    registry.register(REGISTRY)
    registry.register(TableCollector(using, close_connection=True))
    return Endpoint(address, registry)


class Children:
    """A supervisor's side of multiprocess mode: the directory its children
    record into, and an endpoint summing them."""

    def __init__(self, address: Address, using: str | None = None) -> None:
        from prometheus_client import CollectorRegistry
        from prometheus_client.multiprocess import MultiProcessCollector

        from jobs.metrics.database import TableCollector
        from jobs.metrics.processes import ProcessesCollector

        self.directory = tempfile.mkdtemp(prefix="jobs-metrics-")
        self.processes: ProcessesCollector = ProcessesCollector()
        registry = CollectorRegistry(auto_describe=False)
        MultiProcessCollector(registry, path=self.directory)  # type: ignore[no-untyped-call]
        registry.register(self.processes)
        registry.register(TableCollector(using, close_connection=True))
        try:
            self.endpoint = Endpoint(address, registry)
        except MetricsUnavailable:
            shutil.rmtree(self.directory, ignore_errors=True)
            raise

    def environment(self) -> dict[str, str]:
        """What a child's environment adds, so that it records into the directory."""
        return {MULTIPROC_ENV: self.directory}

    def started(self, index: int, pid: int) -> None:
        """Child `index` now runs as `pid`: its process metrics are served."""
        self.processes.started(index, pid)

    def exited(self, pid: int) -> None:
        """Child `pid` exited: its live gauges leave the sums, its process metrics go."""
        from prometheus_client.multiprocess import mark_process_dead

        self.processes.exited(pid)
        mark_process_dead(pid, self.directory)  # type: ignore[no-untyped-call]

    def close(self) -> None:
        self.endpoint.close()
        shutil.rmtree(self.directory, ignore_errors=True)
