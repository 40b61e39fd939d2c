"""`runjobs --metrics-port`: the runner's metrics over HTTP, for Prometheus to scrape.

One process serves prometheus_client's default registry (its own counters,
histograms and gauges, and the process's CPU and memory) plus the table's
gauges (`jobs.metrics.database`), read at each scrape. A supervisor
(`--processes N`) serves instead what its children recorded, summed
(prometheus_client's multiprocess mode): it sets `PROMETHEUS_MULTIPROC_DIR`
to a directory of its own before it starts them, tells the collector when
one exits (its live gauges go; its counts stay in the totals), and removes
the directory when it stops. The children serve nothing themselves.

The endpoint listens on 127.0.0.1 unless told otherwise (`--metrics-host`):
what it says about the queue is for the machine's own scraper, or for a
network the operator chose.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass

from prometheus_client import REGISTRY, CollectorRegistry, start_http_server
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

from jobs import log
from jobs.metrics.database import TableCollector

#: Where prometheus_client's multiprocess mode keeps each process's values.
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

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
        try:
            self._server, self._thread = start_http_server(
                address.port, addr=address.host, registry=registry
            )
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
    registry = CollectorRegistry(auto_describe=False)
    registry.register(REGISTRY)
    registry.register(TableCollector(using, close_connection=True))
    return Endpoint(address, registry)


class Children:
    """A supervisor's side of multiprocess mode: the directory its children
    record into, and an endpoint summing them."""

    def __init__(self, address: Address, using: str | None = None) -> None:
        self.directory = tempfile.mkdtemp(prefix="jobs-metrics-")
        registry = CollectorRegistry(auto_describe=False)
        MultiProcessCollector(registry, path=self.directory)  # type: ignore[no-untyped-call]
        registry.register(TableCollector(using, close_connection=True))
        try:
            self.endpoint = Endpoint(address, registry)
        except MetricsUnavailable:
            shutil.rmtree(self.directory, ignore_errors=True)
            raise

    def environment(self) -> dict[str, str]:
        """What a child's environment adds, so that it records into the directory."""
        return {MULTIPROC_ENV: self.directory}

    def exited(self, pid: int) -> None:
        """Child `pid` exited: its live gauges leave the sums."""
        mark_process_dead(pid, self.directory)  # type: ignore[no-untyped-call]

    def close(self) -> None:
        self.endpoint.close()
        shutil.rmtree(self.directory, ignore_errors=True)
