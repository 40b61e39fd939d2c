"""Unit tests: pure rules that need no database (backoff, specs, the registry, config,
the pool, the benchmark's arithmetic). A test that reads or writes a row belongs in
tests/integration; one that starts a `runjobs` or `manage.py` process, in
tests/acceptance."""
