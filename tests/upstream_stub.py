"""A real HTTP upstream CA for the orders tests, on 127.0.0.1 at an ephemeral port.

The test sets its behaviour (fail each order's first `failures` requests with a
503 or a dropped connection, then issue; or refuse with a stated reason; take
`delay` seconds over each) and reads back every request it served, with when
it started and ended, to check that no order ever had two in flight. It can
also trickle its answer a byte at a time, to check the client's total bound.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal


@dataclass
class Request:
    order_id: Any
    #: `time.monotonic()` when the request had been read.
    started: float
    #: `time.monotonic()` when its answer was decided, just before it is sent:
    #: a later request can never look concurrent merely because this thread
    #: was slow to write the time down.
    ended: float = 0.0
    answer: str = ""


def certificate_for(order_id: Any) -> str:
    return f"-----BEGIN CERTIFICATE-----\norder {order_id}\n-----END CERTIFICATE-----\n"


def unused_url() -> str:
    """An http URL on 127.0.0.1 where nothing listens: every connection is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/"


class UpstreamStub:
    """Use as a context manager; `url` is what ORDERS_UPSTREAM_URL should be."""

    def __init__(self) -> None:
        #: How many requests per order fail before one succeeds.
        self.failures = 0
        #: How they fail: a 503, or the connection closed with no answer at all.
        self.failure: Literal["503", "drop"] = "503"
        #: When set, every request is refused with 400 and this reason.
        self.refusal: str | None = None
        #: Seconds each request takes before it is answered.
        self.delay = 0.0
        #: When set, the answer is written one byte every this many seconds.
        self.trickle = 0.0
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._seen: dict[Any, int] = {}
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="upstream-stub", daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/"

    def __enter__(self) -> UpstreamStub:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    # -- what the test reads -----------------------------------------------------

    def requests_for(self, order_id: Any) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.order_id == order_id]

    def most_in_flight(self, order_id: Any) -> int:
        """The most requests for `order_id` that were ever being served at once."""
        edges = []
        for request in self.requests_for(order_id):
            edges.append((request.started, 1))
            edges.append((request.ended or float("inf"), -1))
        most = current = 0
        for _, step in sorted(edges):  # at a tie, an end (-1) sorts before a start
            current += step
            most = max(most, current)
        return most

    # -- serving -------------------------------------------------------------------

    def _decide(self, order_id: Any) -> tuple[str, int, dict[str, Any] | None]:
        """(answer, status, body) for the next request for `order_id`; body None drops it."""
        with self._lock:
            seen = self._seen.get(order_id, 0)
            self._seen[order_id] = seen + 1
        if self.refusal is not None:
            return "refused", 400, {"reason": self.refusal}
        if seen < self.failures:
            if self.failure == "drop":
                return "dropped", 0, None
            return "503", 503, {"error": "try again later"}
        return "issued", 200, {"certificate": certificate_for(order_id)}

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                try:
                    order_id = json.loads(body).get("order_id")
                except (ValueError, AttributeError):
                    order_id = None
                request = Request(order_id=order_id, started=time.monotonic())
                with stub._lock:
                    stub.requests.append(request)
                document: dict[str, Any] | None
                if self.path != "/certificates" or order_id is None:
                    answer, status, document = "bad request", 400, {"reason": "bad request"}
                else:
                    time.sleep(stub.delay)
                    answer, status, document = stub._decide(order_id)
                request.answer, request.ended = answer, time.monotonic()
                if document is None:
                    self.close_connection = True
                    return
                encoded = json.dumps(document).encode()
                if stub.trickle:
                    self._trickle(status, encoded)
                    return
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(encoded)))
                self.end_headers()
                self.wfile.write(encoded)

            def _trickle(self, status: int, encoded: bytes) -> None:
                self.close_connection = True
                head = f"HTTP/1.0 {status} Slow\r\nContent-Length: {len(encoded)}\r\n\r\n"
                for byte in head.encode() + encoded:
                    try:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                    except OSError:
                        return  # the client gave up, as it should
                    time.sleep(stub.trickle)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the test reads `requests`, not a log

        return Handler
