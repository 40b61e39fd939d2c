# Written by hand: a PostgreSQL-only check, kept out of model state like 0004's fillfactor.

from django.db import migrations


def _postgresql_dates_in_range(apps, schema_editor):
    # Dates no Python datetime holds (`infinity`, years past 9999) are moved
    # to the nearest one it does, then refused from now on: see
    # DATES_IN_RANGE_SQL. MySQL's DATETIME and SQLite's text hold no such value
    # a driver cannot load. The check scans the table once, under its lock.
    if schema_editor.connection.vendor == "postgresql":
        from jobs.store.postgresql import CLAMP_DATES_SQL, DATES_IN_RANGE_SQL

        schema_editor.execute(CLAMP_DATES_SQL)
        schema_editor.execute(DATES_IN_RANGE_SQL)


def _undo_postgresql_dates_in_range(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        from jobs.store.postgresql import DROP_DATES_IN_RANGE_SQL

        schema_editor.execute(DROP_DATES_IN_RANGE_SQL)


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0005_runner_lanes"),
    ]

    operations = [
        migrations.RunPython(_postgresql_dates_in_range, _undo_postgresql_dates_in_range),
    ]
