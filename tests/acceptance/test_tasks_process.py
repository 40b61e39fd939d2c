"""Django's tasks framework across processes: a task's result, kept on its row, is
read back from the process that enqueued it after `runjobs` ran it."""

from __future__ import annotations

import pytest

from tests.jobapp import tasks

pytestmark = pytest.mark.django_db(transaction=True)


def test_results_are_visible_from_another_process(runjobs):
    """supports_get_result promises any process; the row is the result store."""
    result = tasks.add.enqueue(20, 22)
    process = runjobs("--burst")
    assert process.wait() == 0, process.output()
    assert tasks.add.get_result(result.id).return_value == 42
