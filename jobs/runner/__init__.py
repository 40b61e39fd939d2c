"""The runner: the producer (the loop: how many can I take, take them, hand them
on), the executor (one attempt: build, refuse or run, classify), the completer
(every settle), the slots (attempts in flight) and maintenance (start-up
recover). `process` wraps them as the `runjobs` process."""

from jobs.runner.producer import Runner

__all__ = ["Runner"]
