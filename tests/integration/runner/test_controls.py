"""The operator's live controls as a runner meets them: a paused queue or kind
is claimed from no more, a resume lets it drain, a kind's limit set in the
database replaces its handler's, and a control row written by hand into
nonsense is logged and ignored, the others kept."""

from __future__ import annotations

import pytest

from jobs import JobSpec, controls, enqueue
from jobs.models import Control, Job
from tests.integration.runner.support import Recording, events, install

pytestmark = pytest.mark.django_db(transaction=True)


class Mail(Recording):
    kind = "test.mail"


class Report(Recording):
    kind = "test.report"


def queued(kind: str, key: str, queue: str = "default") -> None:
    assert enqueue(JobSpec(kind=kind, key=key, queue=queue))


def test_a_paused_queue_is_claimed_from_no_more_and_a_resume_drains_it(registry, make_runner):
    mail = install(registry, Mail)
    queued("test.mail", "m1", queue="emails")
    queued("test.mail", "m2", queue="default")
    controls.pause("queue", "emails", "test:operator")

    make_runner(registry=registry).drain()

    assert [key for key, _ in mail.runs] == ["m2"]
    assert Job.objects.get(key="m1").attempts == 0, "the paused queue's job waits, unspent"
    controls.pause("queue", "emails", "test:operator", paused=False)
    make_runner(registry=registry).drain()
    assert [key for key, _ in mail.runs] == ["m2", "m1"]


def test_a_paused_queue_among_a_runners_own_queues_is_left_and_the_others_served(
    registry, make_runner
):
    mail = install(registry, Mail)
    queued("test.mail", "m1", queue="emails")
    queued("test.mail", "r1", queue="reports")
    controls.pause("queue", "emails", "test:operator")

    make_runner(registry=registry, queues=["emails", "reports"]).drain()

    assert [key for key, _ in mail.runs] == ["r1"]


def test_a_paused_kind_is_claimed_no_more_while_other_kinds_run(registry, make_runner):
    mail, report = install(registry, Mail), install(registry, Report)
    queued("test.mail", "m1")
    queued("test.report", "r1")
    controls.pause("kind", "test.mail", "test:operator")

    make_runner(registry=registry).drain()

    assert (mail.runs, [key for key, _ in report.runs]) == ([], ["r1"])


def test_a_limit_of_zero_set_in_the_database_holds_a_kind_its_handler_does_not_limit(
    registry, make_runner
):
    mail = install(registry, Mail)
    queued("test.mail", "m1")
    controls.set_limit("test.mail", "test:operator", 0)

    make_runner(registry=registry).drain()
    assert mail.runs == []

    controls.set_limit("test.mail", "test:operator", None)
    make_runner(registry=registry).drain()
    assert [key for key, _ in mail.runs] == ["m1"]


def test_a_control_row_written_by_hand_into_nonsense_is_logged_once_and_ignored(
    registry, make_runner, caplog
):
    mail = install(registry, Mail)
    queued("test.mail", "m1", queue="emails")
    queued("test.mail", "m2")
    controls.pause("queue", "emails", "test:operator")
    Control.objects.create(scope="planet", name="mars", paused=True, changed_at="2030-01-01T00:00Z")
    Control.objects.create(
        scope="kind", name="test.mail", concurrency_limit=-3, changed_at="2030-01-01T00:00Z"
    )

    runner = make_runner(registry=registry)
    runner.drain()
    runner.read_controls()  # read again: still bad, not logged again

    assert [key for key, _ in mail.runs] == ["m2"], "the usable pause held, the rest was ignored"
    invalid = events(caplog, "jobs_control_invalid")
    assert len(invalid) == 2, "each bad row logged once"
    said = " ".join(record.getMessage() for record in invalid)
    assert "scope must be 'queue' or 'kind'" in said
    assert "concurrency_limit must be None or an integer" in said


def test_a_change_is_logged_naming_who_made_it(caplog):
    controls.pause("kind", "test.mail", "cli:alice")
    controls.set_limit("test.mail", "admin:bob", 3)

    lines = [record.getMessage() for record in events(caplog, "jobs_control_changed")]
    assert lines == [
        "jobs_control_changed kind=test.mail by=cli:alice paused=True",
        "jobs_control_changed kind=test.mail by=admin:bob concurrency_limit=3",
    ]
    row = Control.objects.get(scope="kind", name="test.mail")
    assert (row.paused, row.concurrency_limit, row.changed_by) == (True, 3, "admin:bob")


@pytest.mark.parametrize(
    ("call", "said"),
    [
        (lambda: controls.pause("queue", "mail queue", "x"), "letters, digits"),
        (lambda: controls.pause("planet", "mars", "x"), "scope must be"),
        (lambda: controls.set_limit("test.mail", "x", -1), "concurrency_limit must be"),
        (lambda: controls.set_limit("", "x", 2), "kind must be a non-empty string"),
    ],
)
def test_a_control_no_runner_could_use_is_refused_and_writes_nothing(call, said):
    with pytest.raises(ValueError, match=said):
        call()
    assert not Control.objects.exists()


def test_a_pause_holds_only_the_queue_it_names_byte_for_byte(registry, make_runner):
    """On MySQL too (the migration's collation): pausing "emails" leaves
    "Emails" running, and each can have its own control row."""
    mail = install(registry, Mail)
    queued("test.mail", "lower", queue="emails")
    queued("test.mail", "upper", queue="Emails")
    controls.pause("queue", "emails", "test:operator")
    controls.pause("queue", "Emails", "test:operator")
    controls.pause("queue", "Emails", "test:operator", paused=False)

    make_runner(registry=registry).drain()

    assert [key for key, _ in mail.runs] == ["upper"]
    assert Control.objects.count() == 2
