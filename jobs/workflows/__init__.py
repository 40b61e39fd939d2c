"""Workflows: jobs that wait for other jobs, fan out and fan in, and hand
their results on (issue 37; the design note is docs/design/workflows.md).

`api` is the public surface (`Workflow`, `Step`, `InvalidWorkflow`), `release`
the rule that moves a waiting step on inside the settle of its dependencies,
`hook` where that joins each job's life (`jobs.lifecycle`). Their statements
are in `jobs.store.workflows`.
"""
