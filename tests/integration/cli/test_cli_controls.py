"""`manage.py jobs pause`, `resume` and `limit`: the operator's live controls at a
shell, what each prints, what it refuses, and how `jobs stats` shows them."""

from __future__ import annotations

import pytest
from django.core.management.base import CommandError

from jobs.models import Control
from tests import factories
from tests.integration.cli.test_cli import jobs

pytestmark = pytest.mark.django_db


def test_pause_and_resume_a_queue_say_so_and_record_who():
    factories.make_job("m1", queue="emails")  # a queue a job names: no warning
    status, said = jobs("pause", "--queue", "emails", "--by", "cli:alice")

    assert status == 0
    assert said.startswith("paused queue emails (by cli:alice)")
    row = Control.objects.get(scope="queue", name="emails")
    assert (row.paused, row.changed_by) == (True, "cli:alice")

    status, said = jobs("resume", "--queue", "emails")
    assert (status, Control.objects.get().paused) == (0, False)
    assert said.startswith("resumed queue emails (by cli:")


def test_pause_a_kind_and_set_then_clear_its_limit():
    assert jobs("pause", "--kind", "orders.relay")[0] == 0
    status, said = jobs("limit", "--kind", "orders.relay", "0")
    assert status == 0
    assert "kind orders.relay held: limit 0, no new attempt starts" in said
    assert Control.objects.get().concurrency_limit == 0

    status, said = jobs("limit", "--kind", "orders.relay", "4")
    assert "limited to 4 attempts at once across every runner" in said
    status, said = jobs("limit", "--kind", "orders.relay", "--clear")
    assert "takes its handler's concurrency_limit again" in said
    row = Control.objects.get()
    assert (row.paused, row.concurrency_limit) == (True, None), "clearing keeps the pause"


@pytest.mark.parametrize(
    "args",
    [
        ("pause",),
        ("pause", "--queue", "mail queue"),
        ("pause", "--queue", "a", "--kind", "b"),
        ("limit", "--kind", "k", "-1"),
        ("limit", "--kind", "k", "many"),
        ("limit", "--kind", "k"),
        ("limit", "--kind", "k", "3", "--clear"),
        ("resume", "--kind", "x" * 101),
    ],
)
def test_a_control_no_runner_could_use_is_refused_as_arguments_and_writes_nothing(args):
    with pytest.raises(CommandError):
        jobs(*args)
    assert not Control.objects.exists()


def test_stats_show_what_is_paused_and_limited_by_whom_since_when():
    jobs("pause", "--queue", "emails", "--by", "cli:alice")
    jobs("limit", "--kind", "orders.relay", "2", "--by", "cli:bob")

    _, said = jobs("stats")

    assert "Queue emails: paused (by cli:alice since " in said
    assert "Kind orders.relay: concurrency limit 2 (by cli:bob since " in said
    _, as_json = jobs("stats", "--json")
    assert '"by": "cli:alice"' in as_json
