"""Unit tests: pure rules that need no database (backoff, specs, the registry, config)."""
