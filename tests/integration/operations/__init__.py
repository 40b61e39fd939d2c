"""The operator's verbs (`jobs.operations`): run now, retry, cancel."""
