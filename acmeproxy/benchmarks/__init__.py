"""Benchmarks for the `jobs` queue: `python manage.py benchjobs` (see `bench`)."""
