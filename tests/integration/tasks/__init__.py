"""Django's tasks framework on `jobs` (`jobs.tasks`)."""
