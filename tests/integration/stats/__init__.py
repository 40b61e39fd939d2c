"""Queue statistics (`jobs.stats`), as the dashboard and `jobs stats` show them."""
