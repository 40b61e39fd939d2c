"""A test-only app: handlers for real runner processes, and tables they record into."""
