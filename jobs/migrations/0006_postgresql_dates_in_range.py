# Written by hand: a PostgreSQL-only check, kept out of model state like 0004's fillfactor.
# Self-contained: its statements are written out here, as they ran, so no later
# change to the code can change what this migration did.

from django.db import migrations

# The instants a Python datetime can hold, in UTC, are from the start of year 1
# to the end of year 9999. PostgreSQL's timestamptz also holds `infinity`,
# `-infinity` and years past 9999, which no datetime can: one such date written
# by hand into jobs_job made every page that loads the row fail (the admin's
# list, `jobs list`), not just the row. So the table refuses them; a claim
# still tolerates one where the check has been dropped.

# Before the check: each date out of range moved to the nearest instant a
# datetime holds (`infinity`, never, to the end of year 9999; `-infinity` to
# the start of year 1), which the queue treats the same way.
CLAMP_DATES_SQL = (
    "UPDATE jobs_job SET "
    "run_at = CASE WHEN run_at > '9999-12-31 23:59:59.999999+00' THEN '9999-12-31 23:59:59.999999+00'::timestamptz "
    "WHEN run_at < '0001-01-01 00:00:00+00' THEN '0001-01-01 00:00:00+00'::timestamptz ELSE run_at END, "
    "deadline = CASE WHEN deadline > '9999-12-31 23:59:59.999999+00' THEN '9999-12-31 23:59:59.999999+00'::timestamptz "
    "WHEN deadline < '0001-01-01 00:00:00+00' THEN '0001-01-01 00:00:00+00'::timestamptz ELSE deadline END, "
    "lease_expires_at = CASE WHEN lease_expires_at > '9999-12-31 23:59:59.999999+00' THEN '9999-12-31 23:59:59.999999+00'::timestamptz "
    "WHEN lease_expires_at < '0001-01-01 00:00:00+00' THEN '0001-01-01 00:00:00+00'::timestamptz ELSE lease_expires_at END, "
    "started_at = CASE WHEN started_at > '9999-12-31 23:59:59.999999+00' THEN '9999-12-31 23:59:59.999999+00'::timestamptz "
    "WHEN started_at < '0001-01-01 00:00:00+00' THEN '0001-01-01 00:00:00+00'::timestamptz ELSE started_at END, "
    "created_at = CASE WHEN created_at > '9999-12-31 23:59:59.999999+00' THEN '9999-12-31 23:59:59.999999+00'::timestamptz "
    "WHEN created_at < '0001-01-01 00:00:00+00' THEN '0001-01-01 00:00:00+00'::timestamptz ELSE created_at END, "
    "updated_at = CASE WHEN updated_at > '9999-12-31 23:59:59.999999+00' THEN '9999-12-31 23:59:59.999999+00'::timestamptz "
    "WHEN updated_at < '0001-01-01 00:00:00+00' THEN '0001-01-01 00:00:00+00'::timestamptz ELSE updated_at END, "
    "finished_at = CASE WHEN finished_at > '9999-12-31 23:59:59.999999+00' THEN '9999-12-31 23:59:59.999999+00'::timestamptz "
    "WHEN finished_at < '0001-01-01 00:00:00+00' THEN '0001-01-01 00:00:00+00'::timestamptz ELSE finished_at END"
    " WHERE NOT ("
    "(run_at IS NULL OR run_at BETWEEN '0001-01-01 00:00:00+00' AND '9999-12-31 23:59:59.999999+00') AND "
    "(deadline IS NULL OR deadline BETWEEN '0001-01-01 00:00:00+00' AND '9999-12-31 23:59:59.999999+00') AND "
    "(lease_expires_at IS NULL OR lease_expires_at BETWEEN '0001-01-01 00:00:00+00' AND '9999-12-31 23:59:59.999999+00') AND "
    "(started_at IS NULL OR started_at BETWEEN '0001-01-01 00:00:00+00' AND '9999-12-31 23:59:59.999999+00') AND "
    "(created_at IS NULL OR created_at BETWEEN '0001-01-01 00:00:00+00' AND '9999-12-31 23:59:59.999999+00') AND "
    "(updated_at IS NULL OR updated_at BETWEEN '0001-01-01 00:00:00+00' AND '9999-12-31 23:59:59.999999+00') AND "
    "(finished_at IS NULL OR finished_at BETWEEN '0001-01-01 00:00:00+00' AND '9999-12-31 23:59:59.999999+00')"
    ")"
)

# Every date column NULL or within the years 1 to 9999.
DATES_IN_RANGE_SQL = (
    "ALTER TABLE jobs_job ADD CONSTRAINT jobs_job_dates_in_range CHECK ("
    "(run_at IS NULL OR run_at BETWEEN '0001-01-01 00:00:00+00' AND '9999-12-31 23:59:59.999999+00') AND "
    "(deadline IS NULL OR deadline BETWEEN '0001-01-01 00:00:00+00' AND '9999-12-31 23:59:59.999999+00') AND "
    "(lease_expires_at IS NULL OR lease_expires_at BETWEEN '0001-01-01 00:00:00+00' AND '9999-12-31 23:59:59.999999+00') AND "
    "(started_at IS NULL OR started_at BETWEEN '0001-01-01 00:00:00+00' AND '9999-12-31 23:59:59.999999+00') AND "
    "(created_at IS NULL OR created_at BETWEEN '0001-01-01 00:00:00+00' AND '9999-12-31 23:59:59.999999+00') AND "
    "(updated_at IS NULL OR updated_at BETWEEN '0001-01-01 00:00:00+00' AND '9999-12-31 23:59:59.999999+00') AND "
    "(finished_at IS NULL OR finished_at BETWEEN '0001-01-01 00:00:00+00' AND '9999-12-31 23:59:59.999999+00')"
    ")"
)

DROP_DATES_IN_RANGE_SQL = "ALTER TABLE jobs_job DROP CONSTRAINT jobs_job_dates_in_range"


def _postgresql_dates_in_range(apps, schema_editor):
    # MySQL's DATETIME and SQLite's text hold no such value a driver cannot
    # load. The check scans the table once, under its lock.
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CLAMP_DATES_SQL)
        schema_editor.execute(DATES_IN_RANGE_SQL)


def _undo_postgresql_dates_in_range(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP_DATES_IN_RANGE_SQL)


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0005_runner_lanes"),
    ]

    operations = [
        migrations.RunPython(_postgresql_dates_in_range, _undo_postgresql_dates_in_range),
    ]
