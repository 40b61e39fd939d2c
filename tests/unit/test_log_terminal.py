"""`runjobs` is heard without a LOGGING setting, and silent about it with one.

Each test builds loggers of its own (not in the `logging` tree, so nothing the
suite configured reaches them): the rule is about what a project set up, and
the `jobs` logger's real parents carry pytest's capture handlers here.
"""

from __future__ import annotations

import io
import logging

from jobs import log


def orphan(name: str, parent: logging.Logger | None = None) -> logging.Logger:
    logger = logging.Logger(name)
    logger.parent = parent
    return logger


def test_a_project_without_logging_sees_the_runners_info_lines_on_the_terminal():
    """Python's default drops INFO: the newcomer's terminal would stay empty while jobs run."""
    root, terminal = orphan("root"), io.StringIO()
    jobs = orphan("jobs", parent=root)

    assert log.to_terminal_unless_configured(terminal, target=jobs), "nothing would print them"
    jobs.info("runner_started kinds=%s burst=%s", "hello.greet", True)
    jobs.debug("job_done outcome=done")

    line = terminal.getvalue()
    assert line.endswith(" INFO jobs runner_started kinds=hello.greet burst=True\n"), (
        f"the lifecycle line reaches the terminal, with its level and logger: {line!r}"
    )
    assert "job_done" not in line, "DEBUG stays out, as the log's own levels intend"


def test_a_project_that_routes_logging_anywhere_above_jobs_is_left_alone():
    """A handler on the root logger (or any parent) is where the project wants the lines."""
    root, terminal = orphan("root"), io.StringIO()
    root.addHandler(logging.NullHandler())
    jobs = orphan("jobs", parent=root)

    assert not log.to_terminal_unless_configured(terminal, target=jobs)
    assert (jobs.handlers, jobs.level) == ([], logging.NOTSET), "nothing added, no level set"


def test_a_project_that_gave_jobs_a_handler_is_left_alone():
    jobs, terminal = orphan("jobs"), io.StringIO()
    jobs.addHandler(logging.NullHandler())
    jobs.setLevel(logging.WARNING)

    assert not log.to_terminal_unless_configured(terminal, target=jobs)
    jobs.warning("runner_database_error")
    assert terminal.getvalue() == "", "its handler, not the terminal, receives the lines"


def test_a_level_set_without_a_handler_is_kept_and_printed():
    """LOGGING naming only a level for `jobs`: the lines would still fall on the floor."""
    jobs, terminal = orphan("jobs"), io.StringIO()
    jobs.setLevel(logging.DEBUG)

    assert log.to_terminal_unless_configured(terminal, target=jobs)
    jobs.debug("job_claimed")
    assert jobs.level == logging.DEBUG, "the project's level is kept"
    assert "job_claimed" in terminal.getvalue(), "and the lines at it are printed"
