"""The in-process runner (`jobs.runner`): outcomes, budgets, abandon, recover, lanes
and the loop. What it does with rows a handler cannot use is tests/integration/bad_rows."""
