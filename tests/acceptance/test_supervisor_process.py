"""`runjobs --processes N` as real processes: a supervisor, its children, real signals.

The supervisor starts N `runjobs` children, each a runner of its own that
registers under the supervisor's pid; only one of them recovers. It replaces a
child that dies (a hung handler's exit at once, anything else after a backoff),
relays SIGTERM, SIGINT and SIGHUP to them all, and gives up, exiting 4, when
children keep dying before they are ready to claim, never because of what
jobs do to them. The rules themselves are tests/unit/test_supervisor_rules.py;
poison jobs at scale are tests/faults/test_poison.py.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.urls import reverse

from jobs import JobSpec, enqueue, enqueue_many
from jobs.models import Job, RunnerProcess
from jobs.runner.process import EXIT_HARD_LIMIT
from jobs.runner.restarts import GIVE_UP_AFTER
from jobs.runner.supervisor import EXIT_GAVE_UP, STOP_MARGIN
from tests.acceptance import wait_for_log
from tests.conftest import RunJobs
from tests.helpers import wait_until
from tests.jobapp.models import Abandonment, Execution

pytestmark = pytest.mark.django_db(transaction=True)

#: A short poll, so a child claims within a tenth of a second; test.sleep's
#: budget far past every attempt here (the leases come from the heartbeat).
ENV = {"JOBS_POLL_INTERVAL_MS": "100", "TEST_SLEEP_LEASE": "60"}

STARTED = re.compile(r" runner_process_started index=(\d+) pid=(\d+)")


def children(supervisor: RunJobs) -> dict[int, int]:
    """The pid of each child the supervisor has started so far, latest per index."""
    return {int(index): int(pid) for index, pid in STARTED.findall(supervisor.output())}


def every_child_pid(supervisor: RunJobs) -> list[int]:
    return [int(pid) for _, pid in STARTED.findall(supervisor.output())]


def alive(pid: int) -> bool:
    """Whether process `pid` still runs (a zombie waiting for its parent does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def registered(supervisor: RunJobs, processes: int, timeout: float = 20) -> list[RunnerProcess]:
    """Wait until `processes` children have written their rows; the rows."""
    rows = RunnerProcess.objects.filter(supervisor_pid=supervisor.pid)
    wait_until(
        lambda: rows.count() >= processes or supervisor.process.poll() is not None,
        timeout,
        f"{processes} children register",
    )
    assert rows.count() == processes, supervisor.output()
    return list(rows)


def sleeping(key: str, seconds: float) -> JobSpec:
    """A test.sleep job whose first attempt sleeps `seconds` (later ones do not)."""
    return JobSpec.now("test.sleep", key).with_payload({"seconds": seconds, "sleep_on": [1]})


@pytest.fixture
def supervise(runjobs) -> Iterator[Callable[..., RunJobs]]:
    """`runjobs --processes N ARGS`; afterwards none of its children is left running."""
    started: list[RunJobs] = []

    def start(processes: int, *args: str, env: dict[str, str] | None = None) -> RunJobs:
        process: RunJobs = runjobs("--processes", str(processes), *args, env={**ENV, **(env or {})})
        started.append(process)
        return process

    yield start
    for process in started:
        if process.process.poll() is None:
            process.process.send_signal(signal.SIGINT)
            try:
                process.process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
        for pid in every_child_pid(process):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        wait_until(lambda: not any(map(alive, every_child_pid(process))), 10)  # noqa: B023


def test_three_processes_register_under_the_supervisor_and_only_one_of_them_recovers(
    supervise, admin_client
):
    """Each child is a runner of its own on the runners page, grouped under the
    supervisor; `recover` (here a handler's that raises, logged each time it is
    called) and the schedules' reconcile run once, in child 0."""
    supervisor = supervise(3, env={"TEST_RECOVER_RAISES": "1"})

    rows = registered(supervisor, 3)
    pids = children(supervisor)

    assert sorted(row.pid for row in rows) == sorted(pids.values()), "one row per child"
    assert len(set(pids.values())) == 3, "three distinct processes"
    assert supervisor.pid not in pids.values(), "the supervisor runs no jobs itself"
    assert all(row.supervisor_pid == supervisor.pid for row in rows)
    wait_until(lambda: supervisor.output().count(" runner_started ") == 3, 10, "all started")
    wait_for_log(supervisor, "job_recover_failed")
    time.sleep(0.5)  # the others would have recovered by now, had they been going to
    output = supervisor.output()
    assert output.count(" job_recover_failed outcome=failure kind=test.refuse ") == 1, (
        f"one process recovers, not three:\n{output}"
    )
    assert output.count("schedule_planned schedule=jobs.sweep") == 1, output
    page = admin_client.get(reverse("admin:jobs_runnerprocess_changelist")).content.decode()
    assert page.count(f'jobs-supervisor">supervisor {supervisor.pid}</span>') == 3, (
        "the runners page shows each child under the supervisor's pid"
    )


def test_a_child_killed_mid_attempt_is_replaced_and_its_attempts_are_taken_over_after_the_lease(
    supervise, configure
):
    """Under `--processes 3`, the supervisor restarts the dead child (a new row,
    a new pid); the rows it held come back within their heartbeat lease (three
    heartbeats), and every job completes once."""
    configure(max_concurrent=2, heartbeat_seconds=1, poll_interval_ms=100)
    assert all(enqueue_many([sleeping(f"slow-{n}", 5) for n in range(6)]))
    supervisor = supervise(3)
    registered(supervisor, 3)
    wait_until(lambda: Execution.objects.count() == 6, 15, "each child runs two attempts")
    running_in = set(Execution.objects.values_list("pid", flat=True))
    assert running_in == set(children(supervisor).values()), "attempts in every child"
    victim = min(running_in)
    held = set(Job.objects.filter(claimed_by__endswith=f":{victim}").values_list("id", flat=True))
    assert len(held) == 2, "the victim holds two rows"

    os.kill(victim, signal.SIGKILL)
    killed = time.monotonic()
    wait_for_log(supervisor, f"old_pid={victim}")
    restarted = next(
        line for line in supervisor.output().splitlines() if " runner_process_restarted " in line
    )
    new_pid = int(re.findall(r"new_pid=(\d+)", restarted)[0])
    assert "status=SIGKILL" in restarted, restarted
    assert "delay_seconds=0.5" in restarted, "the first backoff"
    wait_until(
        lambda: Execution.objects.filter(job_id__in=held, attempt=2).count() == 2,
        15,
        "the killed child's attempts are taken over",
    )
    took = time.monotonic() - killed
    wait_until(lambda: Job.objects.filter(state="done").count() == 6, 15, "every job completes")
    print(
        f"\nthe killed child's two rows ran again {took:.2f} s after the kill (3 heartbeats: 3 s)"
    )

    assert RunnerProcess.objects.filter(pid=new_pid, supervisor_pid=supervisor.pid).exists(), (
        "the replacement registers under the same supervisor"
    )
    assert set(Job.objects.filter(id__in=held).values_list("attempts", flat=True)) == {2}
    assert took <= 3 * 1 + 1, "taken over within three heartbeats (and a claim's poll)"
    finished = Execution.objects.filter(job_id__in=held, finished_at__isnull=False)
    assert sorted(finished.values_list("attempt", flat=True)) == [2, 2], "none completes twice"
    assert supervisor.process.poll() is None, "the supervisor carries on"


def test_sigterm_to_the_supervisor_lets_every_childs_attempt_finish_and_exits_0(
    supervise, configure
):
    """One grace for all: each child finishes its attempt, removes its row and
    exits 0, and so does the supervisor, within the grace and its margin."""
    configure(max_concurrent=1)
    assert all(enqueue_many([sleeping(f"busy-{n}", 2) for n in range(3)]))
    supervisor = supervise(3, "--grace", "10")
    wait_until(lambda: Execution.objects.count() == 3, 20, "each child runs an attempt")
    pids = list(children(supervisor).values())

    signalled = time.monotonic()
    os.kill(supervisor.pid, signal.SIGTERM)
    status = supervisor.wait(timeout=10 + STOP_MARGIN + 5)
    took = time.monotonic() - signalled
    print(f"\nthe supervisor and its three children stopped {took:.2f} s after SIGTERM")

    assert status == 0, supervisor.output()
    assert took < 10 + STOP_MARGIN
    assert supervisor.output().count(" runner_stopping signal=SIGTERM") == 3, "relayed to each"
    assert Job.objects.filter(state="done").count() == 3, "the attempts in hand finished"
    assert not RunnerProcess.objects.exists(), "every child removed its row"
    assert not any(map(alive, pids)), "no child is left running"
    assert "runner_process_restarted" not in supervisor.output(), "nothing restarted"


def test_a_second_signal_ends_every_child_at_once_and_the_supervisor_exits_1(supervise, configure):
    """The children's own second-signal rule, relayed: no grace, rows left to
    their leases."""
    configure(max_concurrent=1)
    assert all(enqueue_many([sleeping(f"long-{n}", 30) for n in range(2)]))
    supervisor = supervise(2, "--grace", "30")
    wait_until(lambda: Execution.objects.count() == 2, 20, "the attempts start")
    os.kill(supervisor.pid, signal.SIGINT)
    wait_until(lambda: supervisor.output().count(" runner_stopping ") == 2, 5, "both stopping")

    signalled = time.monotonic()
    os.kill(supervisor.pid, signal.SIGINT)
    status = supervisor.wait(timeout=10)

    assert status == 1, supervisor.output()
    assert time.monotonic() - signalled < 2, "at once, not after the 30 s grace"
    assert supervisor.output().count(" runner_killed ") == 2, supervisor.output()
    assert not any(map(alive, every_child_pid(supervisor)))
    assert Job.objects.filter(state="running").count() == 2, "left to their leases"


def test_sighup_to_the_supervisor_reaches_every_child(supervise):
    supervisor = supervise(2)
    registered(supervisor, 2)

    os.kill(supervisor.pid, signal.SIGHUP)

    wait_until(lambda: supervisor.output().count(" runner_reload ") == 2, 5, "both reload")
    assert "supervisor_reload" in supervisor.output()
    assert supervisor.process.poll() is None, "SIGHUP stops nothing"
    assert "runner_process_exited" not in supervisor.output(), supervisor.output()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_children_of_a_supervisor_killed_outright_stop_as_on_sigterm(supervise):
    """No runner is left behind unsupervised: each child gets SIGTERM when its
    supervisor dies, and stops cleanly."""
    supervisor = supervise(2)
    registered(supervisor, 2)
    pids = list(children(supervisor).values())

    supervisor.kill()

    wait_until(lambda: not any(map(alive, pids)), 10, "the children stop")
    assert not RunnerProcess.objects.exists(), "each removed its row: a clean stop"


def test_a_child_that_outlives_its_hard_limit_is_replaced_at_once(supervise, configure):
    """Exit 3 is a hung handler's process leaving on purpose: no backoff."""
    configure(hard_kill_after=1, retry_base_seconds=1, poll_interval_ms=100)
    assert enqueue(sleeping("hung", 3600))
    supervisor = supervise(2, env={"TEST_SLEEP_LEASE": "1"})

    wait_for_log(supervisor, "runner_process_restarted", timeout=20)
    restarted = next(
        line for line in supervisor.output().splitlines() if " runner_process_restarted " in line
    )
    assert f"status={EXIT_HARD_LIMIT}" in restarted, restarted
    assert "reason=hard_limit" in restarted, restarted
    assert "delay_seconds=0.0" in restarted, restarted
    wait_until(lambda: Job.objects.get(key="hung").state == "done", 15, "the retry completes")


def test_children_that_keep_dying_at_start_make_the_supervisor_give_up_and_exit_4(supervise):
    """As if the OOM killer took every child as it started, before it was
    ready: each is restarted after its backoff (0.5 s, then 1 s) until the
    fifth failed start in a row, then the supervisor stops and exits 4."""
    supervisor = supervise(2)
    seen: set[int] = set()
    killed: set[int] = set()
    started = time.monotonic()
    while supervisor.process.poll() is None and time.monotonic() - started < 30:
        for pid in set(every_child_pid(supervisor)) - seen:
            seen.add(pid)
            # One the supervisor stopped itself on giving up may be gone already.
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
        time.sleep(0.02)
    status = supervisor.wait(timeout=5)
    took = time.monotonic() - started
    print(f"\nthe supervisor gave up {took:.2f} s after starting ({len(killed)} children killed)")

    output = supervisor.output()
    assert status == EXIT_GAVE_UP, output
    [gave_up] = [line for line in output.splitlines() if " supervisor_gave_up " in line]
    assert f"failed_starts={GIVE_UP_AFTER} " in gave_up, gave_up
    assert "5 runner processes in a row exited before they were ready to claim" in gave_up
    delays = re.findall(r"runner_process_restarted .*delay_seconds=([\d.]+)", output)
    assert delays[:3] == ["0.5", "0.5", "1.0"], f"each child's backoff doubles:\n{output}"
    assert delays[3:] in ([], ["1.0"]), f"nothing restarts after giving up:\n{output}"
    assert len(killed) in (GIVE_UP_AFTER, GIVE_UP_AFTER + 1), "no start after the fifth failed"
    assert took < 0.5 + 1 + 5, "given up after two rounds of restarts, not later"
    assert not any(map(alive, seen))


def test_children_that_can_never_start_an_import_error_make_the_supervisor_give_up_and_exit_4(
    supervise,
):
    """The handlers' module fails to import in every child: no child ever says
    it is ready, so restarting cannot help, and the supervisor says so."""
    supervisor = supervise(2, env={"TEST_CHILD_IMPORT_FAILS": "1"})

    status = supervisor.wait(timeout=60)

    output = supervisor.output()
    assert status == EXIT_GAVE_UP, output
    assert "ImportError: tests.jobapp.jobs fails to import" in output, "the children's own error"
    assert "runner_process_ready" not in output, "no child ever became ready"
    assert output.count(" runner_process_exited ") >= GIVE_UP_AFTER, output
    assert " ready=False " in output
    assert "failed_starts=5 " in output


def test_a_child_that_has_said_it_is_ready_is_logged_so_with_its_start_up_time(supervise):
    supervisor = supervise(2, "--lanes", "2")
    registered(supervisor, 4)
    wait_for_log(supervisor, "runner_process_ready")
    wait_until(lambda: supervisor.output().count(" runner_process_ready ") == 2, 10, "both ready")
    ready = re.findall(
        r" runner_process_ready index=(\d) pid=(\d+) startup_seconds=([\d.]+)", supervisor.output()
    )
    assert sorted((int(index), int(pid)) for index, pid, _ in ready) == sorted(
        children(supervisor).items()
    ), "each child, once every lane of it has registered"
    print("\nstart-up to ready: " + ", ".join(f"{seconds} s" for _, _, seconds in ready))


def test_poison_jobs_that_kill_ready_children_are_retired_and_the_supervisor_carries_on(
    supervise, configure
):
    """Each death of a ready child is restarted within 2 s, however soon after
    its start; each poison job spends its attempts, is retired saying its
    process died, abandoned once; the other jobs are done."""
    configure(max_concurrent=2, heartbeat_seconds=1, poll_interval_ms=100)
    poison = [
        JobSpec.now("test.poison", "exits").with_max_attempts(2),
        JobSpec.now("test.sigkill", "sigkills").with_max_attempts(2),
    ]
    assert all(enqueue_many([*poison, *(JobSpec.now("test.record", f"r-{n}") for n in range(20))]))
    supervisor = supervise(2)

    settled = Job.objects.filter(state__in=["done", "failed"])
    wait_until(lambda: settled.count() == 22, 60, "every job settles")

    output = supervisor.output()
    assert supervisor.process.poll() is None, f"the supervisor carries on:\n{output}"
    assert "supervisor_gave_up" not in output
    delays = [
        float(d) for d in re.findall(r"runner_process_restarted .*delay_seconds=([\d.]+)", output)
    ]
    # Claimed side by side, one poison job may kill the other's attempt before it starts.
    killers = set(
        Execution.objects.filter(key__in=["exits", "sigkills"]).values_list("pid", flat=True)
    )
    assert len(killers) >= 2, "a child died on each round of attempts"
    assert not any(map(alive, killers)), "each attempt killed its child"
    assert len(delays) >= len(killers), "each dead child was replaced"
    assert max(delays) <= 2, f"a ready child's replacement waits 2 s at most: {delays}"
    for key in ("exits", "sigkills"):
        job = Job.objects.get(key=key)
        assert job.state == "failed", key
        # The claim finding its budget spent retires it, unless the other
        # poison job, claimed beside it, kills that process first.
        assert job.attempts >= 3, key
        assert "all 2 of its attempts ended with their process dying" in job.last_error, job.errors
        outcomes = [entry.outcome for entry in job.attempt_history]
        assert outcomes[-1] == "failed", job.errors
        assert set(outcomes[:-1]) == {"reclaimed"}, job.errors
        assert all("died or vanished" in entry.error for entry in job.attempt_history[:-1])
        # abandon is called after the retirement commits, in a transaction of
        # its own: by the retiring process, or, when the other poison job
        # kills that process first, by a runner paying the debt it left.
        called = Abandonment.objects.filter(job_id=job.id)
        wait_until(lambda: called.exists(), 30, f"{key} is abandoned")  # noqa: B023
        assert called.count() == 1, "abandon is called once"
    assert Job.objects.filter(kind="test.record", state="done").count() == 20


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--processes", "0"], "--processes: must be from 1 to 64, not 0"),
        (["--processes", "65"], "--processes: must be from 1 to 64, not 65"),
        (["--processes", "x"], "--processes: takes a whole number, not 'x'"),
        (["--processes", "2", "--burst"], "does not combine with --processes"),
        (
            ["--max-jobs-per-process", "0"],
            "--max-jobs-per-process: must be from 1 to 100000000, not 0",
        ),
        (
            ["--max-memory-per-process", "lots"],
            "--max-memory-per-process: takes a whole number, not 'lots'",
        ),
    ],
)
def test_a_bad_processes_option_exits_2_with_a_sentence(runjobs, args, message):
    process = runjobs(*args)
    assert process.wait(timeout=20) == 2, process.output()
    assert message in process.output(), process.output()
    assert "Traceback" not in process.output()


def threads_and_descriptors(pid: int) -> tuple[int, int] | None:
    """A live process's thread count and open file descriptors (its database
    connections among them), or None once it has gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        descriptors = len(os.listdir(f"/proc/{pid}/fd"))
    except (FileNotFoundError, ProcessLookupError):
        return None
    threads = int(next(line for line in status.splitlines() if line.startswith("Threads:"))[8:])
    return threads, descriptors


def test_under_a_stream_of_handlers_that_never_return_threads_and_connections_stay_bounded(
    supervise, configure
):
    """Each hung attempt holds a thread and a connection until its process
    exits at budget + hard_kill_after; the supervisor replaces the process,
    so however long the stream, no process grows past its slots."""
    configure(hard_kill_after=1, retry_base_seconds=3600, max_attempts=1, poll_interval_ms=100)
    supervisor = supervise(2, "--grace", "1", env={"TEST_SLEEP_LEASE": "1"})
    registered(supervisor, 2)
    samples: dict[int, list[tuple[int, int]]] = {}
    for wave in range(6):
        assert enqueue_many([sleeping(f"hung-{wave}-{n}", 3600) for n in range(4)])
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            for pid in children(supervisor).values():
                if (seen := threads_and_descriptors(pid)) is not None:
                    samples.setdefault(pid, []).append(seen)
            time.sleep(0.1)
    restarts = supervisor.output().count(" runner_process_restarted ")
    most_threads = max(threads for seen in samples.values() for threads, _ in seen)
    most_fds = max(fds for seen in samples.values() for _, fds in seen)
    print(
        f"\n24 hung attempts over {len(samples)} child processes ({restarts} replaced): "
        f"at most {most_threads} threads and {most_fds} open descriptors in any one"
    )
    assert restarts >= 2, "the processes holding hung threads were replaced"
    # Eight slots (max_concurrent) of worker threads, and a few of the runner's
    # own (loop, config ticker, listener): never one more per hung attempt.
    assert most_threads <= 8 + 6, f"threads stay bounded: {most_threads}"
    first = next(iter(samples))  # the first child sampled (pids wrap): a fresh process
    assert most_fds <= samples[first][0][1] + 8 + 4, f"descriptors stay bounded: {most_fds}"
