"""Each config key declared once (`jobs.config.DECLARED`), and everything else about it
derived: the settings' fields and defaults, the bounds checked, the config row's
fields, the admin's sections and the README's table."""

from __future__ import annotations

import dataclasses
import re
import runpy
from pathlib import Path

import pytest
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from jobs import config
from jobs.config import DECLARED, JobsSettings
from jobs.models import JobsConfig

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def readme_config_table() -> str:
    """The first table of the README's "Configure" section, as its lines."""
    section = README.read_text().split("\n## Configure\n", 1)[1]
    lines = section.splitlines()
    first = next(index for index, line in enumerate(lines) if line.startswith("|"))
    table = []
    for line in lines[first:]:
        if not line.startswith("|"):
            break
        table.append(line)
    return "\n".join(table) + "\n"


def test_the_readme_config_table_is_the_one_rendered_from_the_declarations():
    assert readme_config_table() == config.readme_table(), (
        "the README's table is jobs.config.readme_table(); paste its output there"
    )


def test_the_rendered_table_has_one_row_per_declared_key_with_its_default_and_bounds():
    rows = config.readme_table().splitlines()[2:]
    assert [row.split(" | ")[0] for row in rows] == [f"| `{key.name}`" for key in DECLARED]
    for row, key in zip(rows, DECLARED, strict=True):
        assert f" | {key.default} | {key.low} to {key.high} | " in row, row


def test_the_keys_are_the_declared_names_in_declared_order():
    assert tuple(key.name for key in DECLARED) == config.KEYS
    assert len(set(config.KEYS)) == len(DECLARED), "no key is declared twice"


def test_the_settings_fields_are_the_declared_keys_with_their_declared_defaults():
    fields = dataclasses.fields(JobsSettings)
    assert [(item.name, item.default) for item in fields] == [
        (key.name, key.default) for key in DECLARED
    ]


@pytest.mark.parametrize("key", DECLARED, ids=lambda key: key.name)
def test_the_bounds_checked_are_the_declared_ones(key):
    def out_of_bounds(value: int) -> bool:
        problems = dataclasses.replace(config.DEFAULTS, **{key.name: value}).problems()
        return any(problem.startswith(f"{key.name} must be between") for problem in problems)

    assert config.BOUNDS[key.name] == (key.low, key.high)
    assert not out_of_bounds(key.low), "the declared lower bound is allowed"
    assert not out_of_bounds(key.high), "the declared upper bound is allowed"
    assert out_of_bounds(key.low - 1), "one below it is refused"
    assert out_of_bounds(key.high + 1), "one above it is refused"


def test_the_config_rows_integer_fields_are_the_declared_keys():
    integers = [
        field.name
        for field in JobsConfig._meta.get_fields()
        if isinstance(field, models.PositiveIntegerField)
    ]
    assert integers == list(config.KEYS), "a field per declared key, and no other"


@pytest.mark.parametrize("key", DECLARED, ids=lambda key: key.name)
def test_each_config_row_field_takes_its_default_bounds_and_help_from_its_declaration(key):
    field = JobsConfig._meta.get_field(key.name)
    assert isinstance(field, models.PositiveIntegerField)
    assert field.default == key.default
    assert field.help_text == key.help
    low = [v.limit_value for v in field.validators if isinstance(v, MinValueValidator)]
    high = [v.limit_value for v in field.validators if isinstance(v, MaxValueValidator)]
    assert (low, high) == ([key.low], [key.high])


def test_the_admin_sections_hold_every_declared_key_once_in_declared_order():
    names = [name for _, section in config.sections() for name in section]
    assert names == list(config.KEYS)


def test_the_projects_settings_read_a_jobs_variable_for_every_declared_key(monkeypatch):
    for key in DECLARED:
        monkeypatch.setenv(f"JOBS_{key.name.upper()}", str(key.default + 1))
    project = runpy.run_path(str(ROOT / "acmeproxy" / "settings.py"))
    assert project["JOBS"] == {key.name: key.default + 1 for key in DECLARED}


NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}  # fmt: skip


@pytest.mark.parametrize("document", ["README.md", "PACKAGE.md"])
def test_wherever_a_document_counts_the_keys_it_counts_the_declared_ones(document):
    text = " ".join((ROOT / document).read_text().split())
    counted = re.findall(r"\b(\w+) (?:live )?(?:config )?keys\b", text)
    said = [NUMBER_WORDS[word] for word in counted if word in NUMBER_WORDS]
    said += [int(word) for word in counted if word.isdigit()]
    assert all(count == len(DECLARED) for count in said), (
        f"{document} counts {said} keys where {len(DECLARED)} are declared"
    )


def test_the_rendered_tables_bounds_column_holds_bounds_and_nothing_else():
    for row in config.readme_table().splitlines()[2:]:
        bounds = row.split(" | ")[2]
        assert re.fullmatch(r"-?\d+ to -?\d+", bounds), f"a bounds cell holds bounds: {row}"
