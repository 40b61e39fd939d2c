"""A PgBouncer of the test's own, in transaction pooling mode, in front of the
shared PostgreSQL: Debian's `pgbouncer` package (1.18 on Debian 12, which keeps
no prepared statement across transactions), started on a free local port with
its config in the test's tmp_path, and stopped when the test ends.

PgBouncer refuses to run as root: as root it is started with `-u nobody`,
reading its config before it drops to that user. One server connection per
database and user (`default_pool_size = 1`), so every client's transactions
run in the same server session, one after another: whatever one client leaves
on that session, the next one meets.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import psycopg
import pytest

#: Where Debian's package installs it (`/usr/sbin` is not on every PATH).
DEBIAN_BINARY = "/usr/sbin/pgbouncer"


class PgBouncer:
    """A running PgBouncer on 127.0.0.1:`port`, passing every database to 127.0.0.1:5432."""

    def __init__(self, tmp_path: Path) -> None:
        binary = shutil.which("pgbouncer") or DEBIAN_BINARY
        if not os.path.exists(binary):
            pytest.skip("pgbouncer is missing (.ci/run installs Debian's pgbouncer package)")
        self.port = _free_port()
        users = tmp_path / "pgbouncer-users.txt"
        users.write_text('"postgres" ""\n')
        config = tmp_path / "pgbouncer.ini"
        config.write_text(
            "[databases]\n"
            "* = host=127.0.0.1 port=5432\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {users}\n"
            "pool_mode = transaction\ndefault_pool_size = 1\nmax_client_conn = 200\n"
            "ignore_startup_parameters = extra_float_digits,options\n"
        )
        command = [binary, str(config)]
        if os.geteuid() == 0:
            command[1:1] = ["-u", "nobody"]
        self.log = tmp_path / "pgbouncer.log"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        give_up = time.monotonic() + 20
        while not self._answers():
            if self.process.poll() is not None or time.monotonic() > give_up:
                self.stop()
                raise AssertionError(f"pgbouncer did not start:\n{self.log.read_text()}")
            time.sleep(0.1)

    def url(self, database: str, user: str = "postgres") -> str:
        return f"postgres://{user}@127.0.0.1:{self.port}/{database}"

    def connect(self, database: str) -> psycopg.Connection:
        """A fresh client connection through the pooler."""
        return psycopg.connect(
            host="127.0.0.1", port=self.port, user="postgres", dbname=database, autocommit=True
        )

    def _answers(self) -> bool:
        try:
            with self.connect("postgres") as connection:
                connection.execute("SELECT 1")
        except psycopg.Error:
            return False
        return True

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
