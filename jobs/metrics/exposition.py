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
never hear of it); any other path is a 404.
"""

from __future__ import annotations

import shutil
import socket
import tempfile
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import REGISTRY, CollectorRegistry, make_wsgi_app
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

from jobs import log
from jobs.metrics.database import TableCollector
from jobs.metrics.instruments import MULTIPROC_ENV
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
        try:
            family, host = _family(address)
            server_class = type("_Server", (_Server,), {"address_family": family})
            self._server: WSGIServer = make_server(
                host, address.port, _only_metrics(make_wsgi_app(registry)), server_class, _Quiet
            )
        except OSError as error:
            raise MetricsUnavailable(
                f"the metrics endpoint cannot listen on {address}: {error.strerror or error}"
            ) from error
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="jobs-metrics-http", daemon=True
        )
        self._thread.start()
        self.address = address
        log.event("metrics_listening", host=address.host, port=address.port)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


#: The one path the endpoint answers; Prometheus scrapes it by default.
METRICS_PATH = "/metrics"

_App = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def _only_metrics(app: _App) -> _App:
    """`app` at `METRICS_PATH` (any query), a plain-text 404 everywhere else."""

    def answer(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == METRICS_PATH:
            return app(environ, start_response)
        start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
        return [f"not found: the metrics are at {METRICS_PATH}\n".encode()]

    return answer


class _Server(ThreadingMixIn, WSGIServer):
    """One thread per scrape; daemon threads, so none holds the process at exit."""

    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    """No line on stderr per scrape."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _family(address: Address) -> tuple[socket.AddressFamily, str]:
    """The address family and host to bind `address` with (an IPv6 host needs AF_INET6)."""
    infos = socket.getaddrinfo(
        address.host, address.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )
    family, _, _, _, sockaddr = infos[0]
    return family, str(sockaddr[0])


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
        self.processes = ProcessesCollector()
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
        self.processes.exited(pid)
        mark_process_dead(pid, self.directory)  # type: ignore[no-untyped-call]

    def close(self) -> None:
        self.endpoint.close()
        shutil.rmtree(self.directory, ignore_errors=True)
