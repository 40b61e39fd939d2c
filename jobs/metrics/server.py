"""The metrics endpoint's HTTP server: `/metrics` and nothing else.

prometheus_client's own `start_http_server` answers every path with the
metrics (and `/favicon.ico` with an empty 200), so a scraper pointed at the
wrong path would never hear of it. This one serves prometheus_client's WSGI
app at `/metrics` (any query: `name[]` filters) and a plain-text 404
elsewhere; one daemon thread per scrape, no line on stderr for each.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

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


def _family(host: str, port: int) -> tuple[socket.AddressFamily, str]:
    """The address family and host to bind with (an IPv6 host needs AF_INET6)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, _, _, _, sockaddr = infos[0]
    return family, str(sockaddr[0])


def start(host: str, port: int, registry: CollectorRegistry) -> tuple[WSGIServer, threading.Thread]:
    """Listen on `host`:`port` and serve `registry` from a thread of its own;
    raises OSError when it cannot listen."""
    family, bind_host = _family(host, port)
    server_class = type("_Server", (_Server,), {"address_family": family})
    server: WSGIServer = make_server(
        bind_host, port, _only_metrics(make_wsgi_app(registry)), server_class, _Quiet
    )
    thread = threading.Thread(target=server.serve_forever, name="jobs-metrics-http", daemon=True)
    thread.start()
    return server, thread
