"""`enqueue`, `enqueue_or_log` and `enqueue_many` (`jobs.queue`), and the wake-up they ring."""
