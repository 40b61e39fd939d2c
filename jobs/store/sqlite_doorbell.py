"""Deprecated: the SQLite doorbell is `jobs.notifier.sqlite_doorbell` now (it
wakes runners, and holds no SQL). This old path still imports it, warning:
the name is bound to that very module, so patching either patches both."""

import sys
import warnings

from jobs.notifier import sqlite_doorbell as _moved

warnings.warn(
    "jobs.store.sqlite_doorbell is deprecated: import jobs.notifier.sqlite_doorbell",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
