"""The runner's fixtures (a quick poll, a blocking handler), for these tests too."""

from tests.integration.runner.conftest import blocked, quick_poll

__all__ = ["blocked", "quick_poll"]
