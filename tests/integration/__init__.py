"""Integration tests: one database, in this process.

Each test reads and writes the real test database (SQLite, PostgreSQL or
MySQL/MariaDB, whichever DATABASE_URL names) through the real ORM, store and
runner, called directly or through Django's test client; threads are fine, other
processes and signals are not (those are tests/acceptance). One package per area,
named after the part of `jobs` (or of the project) it proves: admin, cli, config,
enqueue, operations, runner, stats, store, sweep, tasks; bad_rows for rows written
by hand past `enqueue`, which every part meets; bench and orders for acmeproxy's
benchmarks and orders example.
"""
