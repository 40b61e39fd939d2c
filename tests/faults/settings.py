"""Settings for the fault suite's ledger scenarios: the test settings, plus
`tests.faults` as an app, so autodiscovery finds `tests/faults/jobs.py` (the
ledger handler) in the runners and the shells that enqueue for them.

Only processes started with these settings have the handler; the pytest
process and every other suite's runners keep `tests.settings` alone.
"""

from tests.settings import *  # noqa: F403
from tests.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.faults"]
