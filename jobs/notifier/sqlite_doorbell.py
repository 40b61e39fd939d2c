"""SQLite's wake-up across processes: a Unix datagram socket per runner, rung after commit.

SQLite carries no notice between connections, but it lives on one machine, so
the processes sharing a database file can ring each other directly. Each
runner binds a socket of its own in the file's doorbell directory; a commit
that queued work (or saved the config) sends one tiny datagram, its payload,
to every socket there. The runner's listener thread wakes on it at once,
where it would otherwise wait for its poll.

Where: `<tempdir>/jobs-<uid>-<hash of the file's resolved path>`, not beside
the file. A socket's path must fit `sun_path` (108 bytes on Linux, 104 on
macOS), which a project's directory may not leave room for, and the temp dir
is writable where a checkout may not be. Every process of the same user on the
same file finds the same directory, however it names the file (the path is
resolved); a process of another user, or with another `TMPDIR`, does not, and
its runners find work at their poll. The directory is private (0700, this
user's, checked before each use): nobody else can ring it or plant sockets in
it.

Each failure costs at most the wake-up, never an enqueue or a runner:

- no directory yet (no runner ever listened), or not a private one: the ring
  sends nothing;
- a socket nobody is bound to (its runner was killed): the ring removes it;
- a socket whose queue is full: that runner has unread rings, so it is awake;
- a runner that cannot bind (the directory is unusable, the path too long, no
  Unix sockets on this system) logs `runner_doorbell_unavailable` once and
  polls as before;
- a runner whose socket file vanished (a temp cleaner) binds a new one.

An in-memory database has no doorbell: no other process can open it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import secrets
import selectors
import socket
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from urllib.parse import unquote, urlsplit

from django.db import transaction

from jobs import log
from jobs.stopping import Stopping

#: How a runner's socket is named in the directory: anything else there is ignored.
SUFFIX = ".sock"

#: How long a runner's listener waits for a ring before checking whether its
#: socket is still there (a stop request ends the wait at once): twenty idle
#: wake-ups a second, each a select and a stat, cost next to nothing.
TICK_SECONDS = 0.05

#: The largest payload read; `jobs.wakeup` sends "" or "config".
MAX_PAYLOAD = 64

#: The most rings a runner reads at once before answering: a flood is read in turns.
MAX_READ = 512

#: How often to bind again when the directory vanishes between making and binding.
BIND_TRIES = 3


def place(database_name: object) -> str | None:
    """The doorbell directory of the SQLite database named `database_name` (Django's
    `NAME`: a path, or a `file:` URI), or None for an in-memory one."""
    name, tempdir = str(database_name), tempfile.gettempdir()
    try:
        return _absolute_places[tempdir, name]
    except KeyError:
        pass
    if name in ("", ":memory:") or "mode=memory" in name:
        return None
    path = unquote(urlsplit(name).path) if name.startswith("file:") else name
    if not os.path.isabs(path):
        return _place(tempdir, os.path.join(os.getcwd(), path))
    found = _absolute_places[tempdir, name] = _place(tempdir, path)
    return found


#: `place` of each database named by an absolute path (which no working
#: directory changes), by temp dir: found once, as every enqueue asks for it.
_absolute_places: dict[tuple[str, str], str] = {}


@functools.lru_cache(maxsize=64)
def _place(tempdir: str, path: str) -> str:
    """Cached: an enqueue must not resolve a path (a syscall per part) each time."""
    digest = hashlib.sha256(os.fsencode(os.path.realpath(path))).hexdigest()[:16]
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return os.path.join(tempdir, f"jobs-{uid}-{digest}")


# -- the ringing side: an enqueue's commit -----------------------------------------

#: Per thread (as Django's connections are): for each (alias, directory), the
#: payloads the next commit has rung so far.
_owed = threading.local()


def ring_on_commit(directory: str, payload: str, using: str) -> None:
    """Ring `directory` with `payload` when the transaction on `using` commits (at
    once in autocommit), never on rollback.

    A transaction that asks many times (an enqueue per row of a loop) rings
    once per payload: the callbacks registered until a ring happens share one
    record of what was rung, and the first to ring starts a fresh record for
    later transactions. A rollback drops its callbacks but leaves the record
    unrung, so the next commit's callbacks still ring.
    """
    records: dict[tuple[str, str], set[str]] = _owed.__dict__.setdefault("records", {})
    key = (using, directory)
    rung = records.setdefault(key, set())
    transaction.on_commit(
        functools.partial(_ring_once, records, key, rung, directory, payload), using=using
    )


def _ring_once(
    records: dict[tuple[str, str], set[str]],
    key: tuple[str, str],
    rung: set[str],
    directory: str,
    payload: str,
) -> None:
    if payload in rung:
        return
    rung.add(payload)
    records[key] = set()
    ring(directory, payload)


def ring(directory: str, payload: str) -> None:
    """Send `payload` to every runner's socket in `directory` now; never blocks or raises.

    An lstat, a listdir and a non-blocking `sendto` per runner, from one
    socket kept for the process: some twenty microseconds with one runner.
    """
    try:
        paths = _sockets(directory, _check_private(directory))
        if not paths:
            return
        data, sender = payload.encode(), _sender()
        for path in paths:
            try:
                sender.sendto(data, path)
            except (ConnectionRefusedError, FileNotFoundError):
                _remove(path)  # nobody is bound to it: its runner died
            except OSError:
                pass  # a full queue (its runner is awake), or that runner polls
    except OSError:
        pass  # no runner listened here yet, or the directory is not ours: they poll


_senders: list[socket.socket] = []


def _sender() -> socket.socket:
    """The process's one unbound socket for ringing: any thread may send on it
    (each datagram is one system call), and making one per ring cost a third
    of the ring. A race makes two, which does no harm."""
    if not _senders:
        sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sender.setblocking(False)
        _senders.append(sender)
    return _senders[0]


# -- the listening side: a runner -------------------------------------------------


def listen(
    directory: str | None, stopping: Stopping, listening: Callable[[str], None]
) -> Iterator[str]:
    """`Notifier.notices` for SQLite: each distinct payload rung since the last, until
    `stopping` is set (heard at once: each wait selects on it too).

    Calls `listening(path)` once its socket is bound. A runner that cannot
    listen says so once and yields nothing until stopped: it polls.
    """
    if directory is None:
        stopping.wait()  # in-memory: no other process can queue work in it
        return
    try:
        bell = Bell(directory, stopping)
    except OSError as error:
        _fall_back(directory, error)
        stopping.wait()
        return
    try:
        listening(bell.path)
        while not stopping.is_set():
            try:
                payloads = bell.wait(TICK_SECONDS)
                if not payloads and not stopping.is_set() and bell.lost():
                    bell.close()
                    bell = Bell(directory, stopping)
                    log.event("runner_doorbell_rebound", path=bell.path)
                    payloads = [""]  # a ring may have gone to the lost socket
            except OSError as error:
                _fall_back(directory, error)
                stopping.wait()
                return
            yield from payloads
    finally:
        bell.close()


class Bell:
    """One runner's socket in `directory`: bound when made, removed by `close`.

    Named at random, so a runner never takes over another's (or a dead one's)
    file. The last runner to leave removes the directory too, so a test run
    or a renamed database leaves nothing behind in the temp dir. Its waits
    end at once when `stopping` is set.
    """

    def __init__(self, directory: str, stopping: Stopping) -> None:
        self.directory = directory
        self.socket, self.path, self._inode = _bind(directory)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.socket, selectors.EVENT_READ)
        self._selector.register(stopping, selectors.EVENT_READ)

    def wait(self, timeout: float) -> list[str]:
        """The distinct payloads rung within `timeout` seconds, every waiting one
        read at once; [] if none came, or the wait was stopped."""
        ready = self._selector.select(timeout)
        if not any(key.fileobj is self.socket for key, _ in ready):
            return []
        payloads: dict[str, None] = {}
        for _ in range(MAX_READ):
            try:
                data = self.socket.recv(MAX_PAYLOAD)
            except BlockingIOError:
                break
            payloads[data.decode(errors="replace")] = None
        return list(payloads)

    def lost(self) -> bool:
        """Whether its file is gone, another's now, or out of reach: rings no
        longer reach it."""
        try:
            return os.stat(self.path).st_ino != self._inode
        except OSError:
            return True

    def close(self) -> None:
        if self.socket.fileno() == -1:
            return
        lost = self.lost()
        self._selector.close()
        self.socket.close()
        if not lost:
            _remove(self.path)
        with contextlib.suppress(OSError):  # other runners listen there still
            os.rmdir(self.directory)


def _bind(directory: str) -> tuple[socket.socket, str, int]:
    """A non-blocking datagram socket bound in `directory` (made private if
    missing), its path and its file's inode."""
    if not hasattr(socket, "AF_UNIX") or not hasattr(os, "getuid"):
        raise OSError("this system has no Unix sockets")
    for _ in range(BIND_TRIES):
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, 0o700)
            os.chmod(directory, 0o700)  # whatever the umask took away
        _check_private(directory)
        path = os.path.join(directory, secrets.token_hex(6) + SUFFIX)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            sock.bind(path)
            sock.setblocking(False)
            return sock, path, os.stat(path).st_ino
        except FileNotFoundError:
            sock.close()  # the last runner removed the directory meanwhile: make it again
        except BaseException:
            sock.close()
            raise
    raise FileNotFoundError(f"{directory} kept vanishing")


def _check_private(directory: str) -> os.stat_result:
    """Raise unless `directory` is a real directory of this user's that nobody
    else can use; its `lstat` when it is."""
    info = os.lstat(directory)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise PermissionError(f"{directory} is not a directory only this user can use")
    return info


#: The runners' sockets last listed in each directory, with the directory's
#: inode and modification time then.
_listed: dict[str, tuple[tuple[int, int], list[str]]] = {}

#: A listing is kept only once the directory's last change is this old: a
#: file system stamps changes at a coarse clock tick (up to 10 ms), so a
#: socket bound in the same tick as a listing could leave the time unchanged.
SETTLED_NS = 50_000_000


def _sockets(directory: str, info: os.stat_result) -> list[str]:
    """The runners' socket paths in `directory`, listed again only when a socket
    came or went since the last listing (either changes the directory's
    modification time): an enqueue rings without a listdir."""
    version = (info.st_ino, info.st_mtime_ns)
    cached = _listed.get(directory)
    if cached is not None and cached[0] == version:
        return cached[1]
    paths = [os.path.join(directory, n) for n in os.listdir(directory) if n.endswith(SUFFIX)]
    if time.time_ns() - info.st_mtime_ns > SETTLED_NS:
        _listed[directory] = (version, paths)
    else:
        _listed.pop(directory, None)
    return paths


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _fall_back(directory: str, error: OSError) -> None:
    log.event(
        "runner_doorbell_unavailable",
        logging.WARNING,
        outcome="polling",
        directory=directory,
        error=log.first_line(error),
    )
