"""The wake-up on SQLite: the enqueuing transaction's commit rings every runner's socket
in the database's doorbell directory, once, and a rollback or a refused duplicate
never does; an enqueue never fails for the doorbell's sake. The runner's side is
tests/integration/runner/test_doorbell_sqlite.py; a real `runjobs` woken from this
process, tests/acceptance/test_wakeup_sqlite.py."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import transaction

from jobs import JobSpec, enqueue, enqueue_many
from jobs.models import Job, JobsConfig
from jobs.notifier import sqlite_doorbell
from jobs.operations import run_now
from jobs.wakeup import CONFIG_NOTICE
from tests.doorbells import Ear, doorbell_directory, only_sqlite  # noqa: F401 (a fixture)
from tests.integration.enqueue.support import Rollback, enqueue_then_roll_back

pytestmark = [pytest.mark.django_db(transaction=True), only_sqlite]


@pytest.fixture
def ear(directory: str) -> Iterator[Ear]:
    listening = Ear(directory)
    yield listening
    listening.close()


def test_the_commit_rings_each_runner_once_however_many_jobs_it_queued(ear):
    with transaction.atomic():
        for n in range(3):
            assert enqueue(JobSpec.now("test.record", f"k{n}"))
        assert ear.heard() == [], "nothing rings before the commit: the rows are not visible"
    assert ear.heard() == [""], "the commit rang once, with the work notice"


def test_enqueue_outside_a_transaction_rings_at_once(ear):
    assert enqueue(JobSpec.now("test.record", "k"))
    assert ear.heard() == [""]


def test_enqueue_many_rings_once(ear):
    assert all(enqueue_many(JobSpec.now("test.record", f"k{n}") for n in range(20)))
    assert ear.heard() == [""]


def test_a_rolled_back_enqueue_rings_nothing_and_the_next_commit_still_rings(ear):
    with pytest.raises(Rollback):
        enqueue_then_roll_back(JobSpec.now("test.record", "dropped"))
    assert ear.heard() == [], "a job that was rolled back wakes nobody"
    assert not Job.objects.filter(key="dropped").exists()
    assert enqueue(JobSpec.now("test.record", "kept"))
    assert ear.heard() == [""], "the ring the rollback dropped does not swallow the next one"


def test_a_rolled_back_savepoint_rings_nothing_but_its_transaction_still_rings(ear):
    with transaction.atomic():
        with pytest.raises(Rollback):
            enqueue_then_roll_back(JobSpec.now("test.record", "dropped"))
        assert enqueue(JobSpec.now("test.record", "kept"))
    assert ear.heard() == [""]


def test_a_refused_duplicate_rings_nothing(ear):
    assert enqueue(JobSpec.now("test.record", "k"))
    ear.heard()
    assert not enqueue(JobSpec.now("test.record", "k")), "the duplicate is refused"
    assert ear.heard() == []


def test_a_config_save_rings_with_the_config_notice(ear):
    row = JobsConfig.load()
    ear.heard()
    row.poll_interval_ms = 50
    row.save()
    assert ear.heard() == [CONFIG_NOTICE]


def test_run_now_rings(ear):
    assert enqueue(JobSpec.now("test.record", "later").with_delay(timedelta(hours=1)))
    ear.heard()
    assert run_now([Job.objects.get(key="later").id]).touched == 1
    assert ear.heard() == [""]


def test_every_runner_in_the_directory_is_rung(directory, ear):
    second = Ear(directory)
    try:
        assert enqueue(JobSpec.now("test.record", "k"))
        assert ear.heard() == [""]
        assert second.heard() == [""]
    finally:
        second.close()


def test_a_dead_runners_leftover_socket_is_removed_by_the_next_ring_and_the_enqueue_succeeds(
    directory, ear
):
    dead = Ear(directory)
    dead.close()  # as a killed runner leaves it: the file, and nobody bound to it
    assert os.path.exists(dead.path)
    assert enqueue(JobSpec.now("test.record", "k"))
    assert not os.path.exists(dead.path), "the ring removed the dead runner's socket"
    assert ear.heard() == [""], "and still rang the live one"
    assert Job.objects.filter(key="k").exists()


def test_the_enqueue_works_when_no_runner_ever_listened(directory):
    assert not os.path.exists(directory)
    assert enqueue(JobSpec.now("test.record", "k"))
    assert Job.objects.filter(key="k").exists()
    assert not os.path.exists(directory), "ringing creates nothing"


def test_a_directory_that_is_not_private_is_never_rung(directory, ear):
    os.chmod(directory, 0o777)
    assert enqueue(JobSpec.now("test.record", "k"))
    assert ear.heard() == [], "a directory others could use is not trusted"
    assert Job.objects.filter(key="k").exists()


def test_an_in_memory_database_has_no_doorbell():
    assert sqlite_doorbell.place(":memory:") is None
    assert sqlite_doorbell.place("file:memorydb_default?mode=memory&cache=shared") is None
    assert sqlite_doorbell.place("") is None


def test_one_file_named_three_ways_has_one_doorbell_directory(tmp_path, monkeypatch):
    database = tmp_path / "db.sqlite3"
    (tmp_path / "link").symlink_to(tmp_path)
    monkeypatch.chdir(tmp_path)
    names = [str(database), "db.sqlite3", str(tmp_path / "link" / "db.sqlite3"), database]
    assert len({sqlite_doorbell.place(name) for name in names}) == 1
    assert sqlite_doorbell.place(tmp_path / "other.sqlite3") != sqlite_doorbell.place(database)


def test_a_uri_name_has_the_directory_of_its_file(tmp_path):
    database = Path(tmp_path / "db.sqlite3")
    assert sqlite_doorbell.place(f"file:{database}?mode=rwc") == sqlite_doorbell.place(database)


def _age(directory: str, seconds: float) -> None:
    """Stamp the directory's last change `seconds` ago."""
    then = os.stat(directory).st_mtime - seconds
    os.utime(directory, (then, then))


def test_a_runner_that_binds_after_a_kept_listing_is_rung_by_the_next_enqueue(directory, ear):
    _age(directory, 1)
    assert enqueue(JobSpec.now("test.record", "listed"))  # lists, and keeps it: long settled
    assert ear.heard() == [""]

    late = Ear(directory)
    try:
        assert enqueue(JobSpec.now("test.record", "after"))
        assert (ear.heard(), late.heard()) == ([""], [""]), "the bind changed the directory"
    finally:
        late.close()


def test_a_listing_taken_while_the_directory_just_changed_is_not_kept(directory, ear):
    assert enqueue(JobSpec.now("test.record", "listed"))  # the bind above was just now
    assert ear.heard() == [""]
    stamp = os.stat(directory)

    late = Ear(directory)
    try:
        # A file system whose clock ticks coarsely stamps the bind with the same time.
        os.utime(directory, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
        assert enqueue(JobSpec.now("test.record", "after"))
        assert late.heard() == [""]
    finally:
        late.close()
