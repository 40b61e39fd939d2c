"""The store contract (`jobs.store`): claim, settle, the live identity, prune and the
query plans, on every database; and a state machine over it."""
