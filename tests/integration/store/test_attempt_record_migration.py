"""Migration 0007 on a table already holding jobs: both new columns are added in
place (no rewrite of a large table, no value written into existing rows), and an
existing row reads as having an empty attempt record and no holder."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.db import connection

from jobs.models import Job
from tests.factories import make_job


def statements_of_0007() -> list[str]:
    out = io.StringIO()
    call_command("sqlmigrate", "jobs", "0007", stdout=out)
    return [
        line
        for line in out.getvalue().splitlines()
        if line.strip() and not line.startswith("--") and line not in ("BEGIN;", "COMMIT;")
    ]


@pytest.mark.django_db(transaction=True)  # SQLite's schema editor runs outside a transaction
def test_migration_0007_only_adds_nullable_columns_without_a_default():
    statements = statements_of_0007()
    assert len(statements) == 2, statements
    for statement in statements:
        assert statement.startswith("ALTER TABLE"), f"no table rebuild: {statement}"
        assert "ADD COLUMN" in statement
        assert " NULL" in statement, f"nullable, so no row is written: {statement}"
        assert "NOT NULL" not in statement
        assert "DEFAULT" not in statement.upper(), f"no default to write in: {statement}"


@pytest.mark.django_db
def test_a_row_from_before_the_migration_reads_as_an_empty_record_and_no_holder():
    job = make_job("old")
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE jobs_job SET errors = NULL, claimed_by = NULL WHERE "
            f"{connection.ops.quote_name('key')} = %s",
            ["old"],
        )
    row = Job.objects.get(id=job.id)
    assert row.errors == [], "NULL reads as an empty list"
    assert (row.attempt_history, row.error_count, row.claimed_by) == ([], 0, None)
