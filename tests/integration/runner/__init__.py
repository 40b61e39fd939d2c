"""The in-process runner (`jobs.runner`): outcomes, budgets, abandon, recover, lanes,
the loop, and the rows it cannot use."""
