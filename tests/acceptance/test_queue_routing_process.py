"""`runjobs --queue NAME` as a real process: it runs only the jobs of the queues it
is started with; every other queue's jobs wait, queued, their attempts unspent."""

import signal
import subprocess
import sys

import pytest

from jobs import JobSpec, enqueue
from jobs.models import Job, RunnerProcess
from tests.conftest import ROOT
from tests.helpers import wait_until
from tests.jobapp.models import Execution

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_runner_started_with_queue_emails_runs_only_emails_jobs(runjobs):
    for n in range(3):
        assert enqueue(JobSpec.now("test.record", f"mail-{n}").with_queue("emails"))
        assert enqueue(JobSpec.now("test.record", f"report-{n}").with_queue("reports"))
    assert enqueue(JobSpec.now("test.record", "plain"))

    process = runjobs("--burst", "--queue", "emails")

    assert process.wait() == 0, process.output()
    assert "queues=emails" in process.output(), "the runner says which queues it serves"
    assert sorted(Execution.objects.values_list("key", flat=True)) == [
        "mail-0",
        "mail-1",
        "mail-2",
    ]
    waiting = Job.objects.filter(kind="test.record").exclude(queue="emails")
    assert set(waiting.values_list("state", "attempts")) == {("queued", 0)}, (
        "the other queues' jobs wait with their attempts unspent"
    )
    assert waiting.count() == 4


def test_a_runner_started_with_a_capped_queue_serves_it_and_says_its_cap(runjobs):
    for n in range(3):
        assert enqueue(JobSpec.now("test.record", f"mail-{n}").with_queue("emails"))

    process = runjobs("--burst", "--queue", "emails=1", "--queue", "reports")

    assert process.wait() == 0, process.output()
    assert 'queues="emails=1,reports"' in process.output()
    assert Execution.objects.count() == 3, "the capped queue drains, a slot at a time"


def test_a_runner_started_with_two_queues_serves_both_and_no_other(runjobs):
    for name in ("emails", "reports", "default"):
        assert enqueue(JobSpec.now("test.record", name).with_queue(name))

    process = runjobs("--burst", "--queue", "emails", "--queue", "reports")

    assert process.wait() == 0, process.output()
    assert sorted(Execution.objects.values_list("key", flat=True)) == ["emails", "reports"]
    assert Job.objects.get(key="default").state == "queued"


def test_a_runner_started_with_queues_names_them_on_the_runners_page(runjobs):
    process = runjobs("--queue", "emails", "--queue", "reports")
    wait_until(lambda: RunnerProcess.objects.exists(), 30, "the runner reports in")
    assert RunnerProcess.objects.get().queues == ["emails", "reports"]
    process.process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 0, process.output()


@pytest.mark.parametrize(
    ("argument", "said"),
    [
        ("mail queue", "letters, digits"),
        ("", "letters, digits"),
        ("emails=0", "must be a whole number of slots"),
        ("emails=two", "must be a whole number of slots"),
        ("mail queue=2", "letters, digits"),
    ],
)
def test_a_queue_argument_no_queue_could_have_is_refused_with_exit_2(argument, said):
    refused = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "runjobs", "--burst", "--queue", argument],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2
    assert said in refused.stderr
