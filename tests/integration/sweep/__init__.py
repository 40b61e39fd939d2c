"""The retention sweep (`jobs.sweep`), run through a real runner."""
