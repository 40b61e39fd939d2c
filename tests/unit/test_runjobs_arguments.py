"""`runjobs`' recycling options as argparse reads them: bounds refused with a
sentence, shown in `--help`, and handed on to a supervisor's children."""

from __future__ import annotations

import pytest
from django.core.management import CommandError

from jobs.management.commands.runjobs import (
    MAX_JOBS_PER_PROCESS,
    MAX_MEMORY_PER_PROCESS,
    Command,
    child_arguments,
)


def parse(*args: str) -> dict[str, object]:
    parser = Command().create_parser("manage.py", "runjobs")
    return vars(parser.parse_args(list(args)))


def test_recycling_is_off_unless_asked_for():
    options = parse()
    assert (options["max_jobs_per_process"], options["max_memory_per_process"]) == (None, None)


def test_both_recycling_options_are_read_as_whole_numbers():
    options = parse("--max-jobs-per-process", "50", "--max-memory-per-process", "512")
    assert (options["max_jobs_per_process"], options["max_memory_per_process"]) == (50, 512)


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--max-jobs-per-process", "0", "must be from 1 to 100000000, not 0"),
        ("--max-jobs-per-process", "-3", "must be from 1 to 100000000, not -3"),
        ("--max-jobs-per-process", "many", "takes a whole number, not 'many'"),
        (
            "--max-jobs-per-process",
            str(MAX_JOBS_PER_PROCESS + 1),
            "must be from 1 to 100000000, not 100000001",
        ),
        ("--max-memory-per-process", "0", "must be from 1 to 1048576, not 0"),
        ("--max-memory-per-process", "1.5", "takes a whole number, not '1.5'"),
        (
            "--max-memory-per-process",
            str(MAX_MEMORY_PER_PROCESS + 1),
            "must be from 1 to 1048576, not 1048577",
        ),
    ],
)
def test_a_recycling_bound_out_of_range_is_refused_with_a_sentence_naming_the_option(
    option, value, message
):
    with pytest.raises(CommandError) as refused:
        parse(option, value)
    assert f"argument {option}: {message}" in str(refused.value)


def test_help_shows_both_options_and_what_they_do():
    text = " ".join(Command().create_parser("manage.py", "runjobs").format_help().split())
    assert "--max-jobs-per-process N" in text
    assert "--max-memory-per-process MB" in text
    assert "max_tasks_per_child" in text
    assert "max_memory_per_child" in text
    assert "exits 5" in text


def test_a_supervisors_children_get_the_recycling_options_and_not_processes():
    options = parse(
        "--processes", "2", "--max-jobs-per-process", "50", "--max-memory-per-process", "300"
    )
    arguments = child_arguments(options)
    assert "--max-jobs-per-process=50" in arguments
    assert "--max-memory-per-process=300" in arguments
    assert not any(argument.startswith("--processes") for argument in arguments)
    assert not any("max-" in argument for argument in child_arguments(parse("--processes", "2")))
