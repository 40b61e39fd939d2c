"""A supervisor's child says it is ready down a pipe (`jobs.runner.readiness`):
the byte arrives once every lane is ready, survives the child's exit, and a
child that exits without it is heard as never ready."""

from __future__ import annotations

import os

from jobs.runner.readiness import READY_FD_ENV, Announcer, Listener


def test_a_child_is_ready_once_its_last_lane_is_and_says_so_once():
    listener = Listener()
    announcer = Announcer(os.dup(listener.child_end()), lanes=2)
    listener.spawned()

    announcer.lane_ready()
    assert listener.hear() is False, "one lane of two is not the process"
    assert listener.fd is not None, "still worth waiting on"
    announcer.lane_ready()
    announcer.lane_ready()  # a later run of a lane: nothing more is written
    assert listener.hear() is True
    assert listener.fd is None, "heard: the pipe is closed"


def test_the_byte_is_heard_after_the_child_has_gone():
    """Written, then the process died at once (a poison job): still ready."""
    listener = Listener()
    child_end = os.dup(listener.child_end())
    listener.spawned()
    Announcer(child_end, lanes=1).lane_ready()  # writes and closes its end, as an exit would
    assert listener.hear() is True


def test_a_child_that_exits_without_saying_it_was_never_ready():
    listener = Listener()
    os.close(os.dup(listener.child_end()))  # the child's copy, closed by its exit
    listener.spawned()
    assert listener.hear() is False
    assert listener.fd is None, "at its end: nothing more to wait for"


def test_outside_a_supervisor_a_process_has_nothing_to_announce(monkeypatch):
    monkeypatch.delenv(READY_FD_ENV, raising=False)
    Announcer.from_environment(lanes=1).lane_ready()  # no fd: nothing written, no error


def test_the_fd_is_taken_out_of_the_environment_and_of_the_processes_a_handler_starts(
    monkeypatch,
):
    listener = Listener()
    child_end = os.dup(listener.child_end())
    os.set_inheritable(child_end, True)
    monkeypatch.setenv(READY_FD_ENV, str(child_end))
    announcer = Announcer.from_environment(lanes=1)
    assert READY_FD_ENV not in os.environ
    assert os.get_inheritable(child_end) is False
    announcer.lane_ready()
    listener.spawned()
    assert listener.hear() is True
