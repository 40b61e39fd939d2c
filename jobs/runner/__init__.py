"""The runner, in three parts: producer (the loop), executor (one attempt) and
maintenance (start-up recover). `process` wraps them as the `runjobs` process."""

from jobs.runner.producer import Runner

__all__ = ["Runner"]
