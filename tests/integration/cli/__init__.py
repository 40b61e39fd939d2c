"""`manage.py jobs` (`jobs.cli`), called in-process; as a real process it is tests/acceptance."""
