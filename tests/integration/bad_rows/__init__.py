"""Rows a handler cannot use, written by hand past `enqueue`, and values past what a date
or a lease can hold: what the store's claim (`jobs.store`), the runner (`jobs.runner`),
the admin and the cli do with them."""
