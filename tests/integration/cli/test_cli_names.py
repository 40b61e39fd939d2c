"""Kinds and queues named at a shell: a name no job could have is refused by every
verb that takes one, writing nothing; a name nothing else knows (a typo, most
likely) is warned about, and refused with `--strict`; and a pause, resume or
limit that changes nothing says so and writes nothing, so no row is left
behind to stand in the admin's way.

What "unknown" means is `jobs.cli.names`'s docstring: a kind no handler here
and no runner row reports; a queue that is not "default" and that no handler,
runner row, control row or live job names (for `list`, any job).
"""

from __future__ import annotations

import pytest
from django.core.management.base import CommandError
from django.utils import timezone

from jobs import JobHandler
from jobs.cli import names
from jobs.models import Control, Job
from tests import factories
from tests.integration.cli.test_cli import jobs

pytestmark = pytest.mark.django_db

#: What a warning about an unknown name begins with.
WARNING = "warning: "


class Reports(JobHandler):
    kind = "test.reports"
    queue = "reports"

    def run(self, job):  # pragma: no cover - never run here
        raise AssertionError


# --- unknown names: warned about, refused with --strict -------------------------


def test_pausing_a_kind_nothing_handles_warns_that_no_handler_or_runner_has_it():
    status, said = jobs("pause", "--kind", "no.such.kind")

    assert status == 0, "another deployment's runner may yet bring it, so it is done"
    assert said.startswith(
        "warning: no handler for kind 'no.such.kind' is registered in this project, "
        "and no runner reports one; check the spelling (--strict refuses it)\n"
    ), said
    assert "paused kind no.such.kind" in said


@pytest.mark.parametrize(
    "args",
    [
        ("pause", "--kind", "no.such.kind"),
        ("pause", "--queue", "nowhere"),
        ("limit", "--kind", "no.such.kind", "2"),
        ("enqueue", "no.such.kind", "k1"),
        ("enqueue", "test.record", "k1", "--queue", "nowhere"),
    ],
)
def test_strict_refuses_a_name_nothing_knows_and_writes_nothing(args):
    with pytest.raises(CommandError, match=r"Unknown (kind|queue): .*\(--strict\)\. Nothing was"):
        jobs(*args, "--strict")

    assert not Control.objects.exists(), "no control was written"
    assert not Job.objects.exists(), "no job was queued"


def test_listing_a_queue_nothing_names_warns_before_saying_no_jobs_match():
    status, said = jobs("list", "--queue", "nowhere")

    assert status == 0
    assert said == (
        "warning: no job, runner, handler or control names queue 'nowhere'; "
        "check the spelling (--strict refuses it)\nNo jobs match.\n"
    ), "an empty listing is not read as an empty queue when the name was mistyped"
    with pytest.raises(CommandError, match=r"Unknown queue: .*Nothing was listed\."):
        jobs("list", "--kind", "test.record", "--queue", "nowhere", "--strict")


def test_listing_a_queue_only_settled_jobs_name_is_no_unknown_name():
    factories.make_job("old", state="failed", queue="legacy")

    status, said = jobs("list", "--queue", "legacy", "--state", "queued", "--strict")

    assert (status, said) == (0, "No jobs match.\n"), "a settled job names the queue to list"


@pytest.mark.parametrize(
    "source",
    ["default", "handler", "runner", "control", "live job"],
)
def test_a_queue_the_default_a_handler_a_runner_a_control_or_a_live_job_names_is_known(
    source, registry, monkeypatch
):
    name = "default" if source == "default" else "reports"
    if source == "handler":
        registry.register(Reports)
        monkeypatch.setattr(names, "registry", registry)
    elif source == "runner":
        factories.make_runner_row("web-1", ["test.record"], timezone.now(), queues=["reports"])
    elif source == "control":
        Control.objects.create(scope="queue", name="reports", changed_at=timezone.now())
    elif source == "live job":
        factories.make_job("r1", queue="reports")

    status, said = jobs("pause", "--queue", name, "--strict")

    assert status == 0
    assert WARNING not in said, said
    assert said.startswith(f"paused queue {name} "), said


def test_a_queue_only_settled_jobs_name_is_unknown_to_pause():
    """Pausing holds live jobs only: a queue whose jobs have all settled and that
    nothing else names is what a typo looks like."""
    factories.make_job("old", state="done", queue="reports")

    with pytest.raises(CommandError, match="Unknown queue"):
        jobs("pause", "--queue", "reports", "--strict")


def test_a_kind_a_runner_reports_a_handler_for_is_known_though_none_is_registered_here():
    factories.make_runner_row("elsewhere-1", ["billing.invoice"], timezone.now())

    status, said = jobs("limit", "--kind", "billing.invoice", "3", "--strict")

    assert status == 0
    assert WARNING not in said, said
    assert Control.objects.get().concurrency_limit == 3


# --- impossible names: refused as arguments, nothing written --------------------


@pytest.mark.parametrize(
    ("args", "refusal"),
    [
        (("list", "--queue", "bad name"), "argument --queue: queue must be 1 to 100 letters"),
        (("list", "--kind", ""), "argument --kind: kind must be a non-empty string"),
        (("list", "--kind", "a\x00b"), "argument --kind: kind contains a NUL character"),
        (("pause", "--kind", "k" * 101), "argument --kind: kind is 101 characters"),
        (("resume", "--kind", "bad\udcffbyte"), "argument --kind: kind contains a lone surrogate"),
        (("limit", "--kind", "a\x00b", "2"), "argument --kind: kind contains a NUL character"),
        (("enqueue", "a\x00b", "k1"), "argument KIND: kind contains a NUL character"),
        (("enqueue", "test.record", "k1", "--queue", "a/b"), "argument --queue: queue must be"),
    ],
)
def test_a_name_no_job_could_have_is_refused_by_every_verb_writing_nothing(args, refusal):
    with pytest.raises(CommandError, match=refusal):
        jobs(*args)

    assert not Control.objects.exists()
    assert not Job.objects.exists()


def test_limit_given_a_queue_says_limits_are_per_kind_and_writes_nothing():
    with pytest.raises(CommandError, match="argument --queue: limits are per kind, not per queue"):
        jobs("limit", "--queue", "default", "2")

    assert not Control.objects.exists()


# --- changes that change nothing write nothing ----------------------------------


def test_resuming_a_queue_never_paused_says_so_and_leaves_no_row():
    status, said = jobs("resume", "--queue", "default")

    assert (status, said) == (0, "queue default was not paused; nothing changed\n")
    assert not Control.objects.exists(), "a row saying 'not paused' would block Add control"


def test_clearing_the_limit_of_a_kind_with_none_leaves_no_row():
    status, said = jobs("limit", "--kind", "test.record", "--clear")

    assert status == 0
    assert said == "kind test.record had no limit set in the database; nothing changed\n"
    assert not Control.objects.exists()


def test_pausing_what_is_already_paused_keeps_who_paused_it_and_when():
    jobs("pause", "--kind", "test.record", "--by", "cli:alice")
    first = Control.objects.get()

    status, said = jobs("pause", "--kind", "test.record", "--by", "cli:bob")

    assert status == 0
    assert said.startswith(
        "kind test.record was already paused (its control was last changed by cli:alice at "
    ), said
    row = Control.objects.get()
    assert (row.changed_by, row.changed_at) == ("cli:alice", first.changed_at), (
        "the row still names who paused it, not who asked again"
    )
