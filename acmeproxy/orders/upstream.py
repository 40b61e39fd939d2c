"""The upstream CA, as the relay needs it: one request, and three kinds of answer.

`POST {ORDERS_UPSTREAM_URL}/certificates` with `{"order_id": n}`. The order id
is the upstream's idempotency key, so asking twice for one order (a retry, or
a re-run after a crash) is safe. Every answer is sorted into one of three:

- `Issued`: 200 with `{"certificate": "..."}`.
- `Refused`: a 4xx other than 408 and 429. The request as sent will never be
  accepted, so asking again only delays the client's answer. The reason is the
  upstream's own `{"reason": ...}` when it states one.
- `Unavailable`: anything that may pass: no connection, a dropped connection,
  a timeout, a 5xx, a 408 or 429, a 200 without a certificate, an unusable URL
  (an operator can fix that and the next attempt picks it up). Its reason is
  in plain words, as a client may read it ("upstream unreachable: Connection
  refused"); the exception behind it is kept beside, for the job's history.

The whole exchange is bounded by `ORDERS_UPSTREAM_TIMEOUT` in total, not per
socket operation as a bare socket timeout would be: the relay's lease is
written from that bound, and the lease is what keeps a second request for the
same order from starting while this one is still in flight. Standard library
only; one POST does not need more.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

#: The most of a response body read; a certificate chain is a few kilobytes.
MAX_BODY_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Issued:
    certificate: str


@dataclass(frozen=True)
class Refused:
    reason: str


@dataclass(frozen=True)
class Unavailable:
    #: What the order's client may read: plain words, no exception's repr.
    reason: str
    #: The exception behind it, for the job's history and the log only.
    error: BaseException | None = field(default=None, compare=False)

    @property
    def detail(self) -> str:
        """The exception's repr (its errno and all), or "" when there was none."""
        return "" if self.error is None else repr(self.error)


Answer = Issued | Refused | Unavailable


def base_url() -> str:
    return str(settings.ORDERS_UPSTREAM_URL)


def timeout() -> float:
    """Seconds one whole request may take, connect to last byte."""
    return float(settings.ORDERS_UPSTREAM_TIMEOUT)


def request_certificate(order_id: int) -> Answer:
    """Ask the upstream for `order_id`'s certificate; never raises for the network."""
    url = base_url().rstrip("/") + "/certificates"
    parts = urlsplit(url)
    connection_class = {"http": http.client.HTTPConnection, "https": http.client.HTTPSConnection}
    try:
        port = parts.port
    except ValueError:
        port = -1
    if parts.scheme not in connection_class or not parts.hostname or port == -1:
        return Unavailable(f"ORDERS_UPSTREAM_URL is not a usable http(s) URL: {base_url()!r}")
    budget = timeout()
    connection = connection_class[parts.scheme](parts.hostname, port, timeout=budget)
    deadline = _Deadline(connection, budget)
    try:
        with deadline:
            connection.connect()
            deadline.hold()
            connection.request(
                "POST",
                parts.path,
                body=json.dumps({"order_id": order_id}).encode(),
                headers={"Content-Type": "application/json", "Accept": "application/json"},
            )
            response = connection.getresponse()
            status, body = response.status, response.read(MAX_BODY_BYTES)
    except (OSError, http.client.HTTPException) as error:
        if deadline.expired.is_set() or isinstance(error, TimeoutError):
            return Unavailable(f"upstream did not answer within {budget:g}s", error)
        return Unavailable(f"upstream unreachable: {_plain(error)}", error)
    finally:
        connection.close()
    return classify(status, body)


def classify(status: int, body: bytes) -> Answer:
    """Sort an HTTP answer into `Issued`, `Refused` or `Unavailable` (see the module)."""
    document = _json_object(body)
    if status == 200:
        certificate = document.get("certificate")
        if isinstance(certificate, str) and certificate:
            return Issued(certificate)
        return Unavailable("upstream answered 200 without a certificate")
    if status in (408, 429) or status >= 500:
        return Unavailable(f"upstream answered HTTP {status}")
    if 400 <= status < 500:
        reason = document.get("reason")
        if isinstance(reason, str) and reason:
            return Refused(reason)
        return Refused(f"upstream refused the order with HTTP {status} and no reason")
    return Unavailable(f"upstream answered an unexpected HTTP {status}")


class _Deadline:
    """Bounds a whole exchange: when `seconds` pass, shut the connection's socket down.

    A socket timeout bounds each operation, not the exchange: an upstream that
    trickles a byte at a time could hold a request far longer than the lease
    written for it. Shutting the socket from another thread ends whatever read
    is blocked on it, which is the one way to bound the exchange in total.
    """

    def __init__(self, connection: http.client.HTTPConnection, seconds: float) -> None:
        self.connection = connection
        self.expired = threading.Event()
        self._held: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._timer.cancel()

    def hold(self) -> None:
        """Keep the connected socket: reading a response that closes the connection
        goes on after `connection.sock` is cleared. Raises if time ran out already."""
        with self._lock:
            if self.connection.sock is not None:
                self._held.append(self.connection.sock)
        if self.expired.is_set():
            raise TimeoutError("the deadline passed while connecting")

    def _expire(self) -> None:
        self.expired.set()
        with self._lock:
            sockets = [self.connection.sock, *self._held]
        for sock in sockets:
            if sock is not None:
                # Already closed means the exchange is over anyway.
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


def _plain(error: BaseException) -> str:
    """`error` in words a client may read: the system's own ("Connection
    refused"), without the class, errno and quotes its repr carries."""
    return getattr(error, "strerror", None) or str(error) or type(error).__name__


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        document = json.loads(body)
    except ValueError:
        return {}
    return document if isinstance(document, dict) else {}
