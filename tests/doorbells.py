"""What the SQLite doorbell's tests share: a temp dir of their own, and an ear where
runners listen."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.db import connection

from jobs.notifier import sqlite_doorbell

#: For test modules about the SQLite doorbell.
only_sqlite = pytest.mark.skipif(
    connection.vendor != "sqlite", reason="about SQLite's doorbell; runs on SQLite"
)


@contextmanager
def own_tempdir(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Give this process, and the `runjobs` processes it starts (`TMPDIR`), a fresh,
    short temp dir; yields the test database's doorbell directory in it.

    Short, so a socket's path fits `sun_path` whatever pytest's own dirs are called.
    """
    base = tempfile.mkdtemp(prefix="jd-")
    monkeypatch.setattr(tempfile, "tempdir", base)
    monkeypatch.setenv("TMPDIR", base)
    try:
        directory = sqlite_doorbell.place(connection.settings_dict["NAME"])
        assert directory is not None
        assert directory.startswith(base + os.sep)
        yield directory
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(name="directory")
def doorbell_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The test database's doorbell directory, in a temp dir of the test's own.
    Asks for `tmp_path` so it is set up after it (pytest makes that in the real
    temp dir), and a module's `runjobs` fixture taking it is torn down first.

    Import `doorbell_directory` and ask for `directory`: the fixture's name."""
    with own_tempdir(monkeypatch) as found:
        yield found


class Ear:
    """A socket in the doorbell directory, bound as a runner binds its own, that
    keeps every ring as it came (a runner's `Bell` reads each payload once)."""

    def __init__(self, directory: str) -> None:
        os.makedirs(directory, 0o700, exist_ok=True)
        self.path = os.path.join(directory, secrets.token_hex(6) + sqlite_doorbell.SUFFIX)
        self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.socket.bind(self.path)
        self.socket.setblocking(False)

    def heard(self) -> list[str]:
        """Every ring that reached it since the last call: a ring is sent before the
        commit that owes it returns, so nothing is still on its way."""
        rings = []
        while True:
            try:
                rings.append(self.socket.recv(64).decode())
            except BlockingIOError:
                return rings

    def close(self) -> None:
        self.socket.close()
