"""The Django settings a runner reads at every attempt, read once and kept.

Each read of `django.conf.settings` runs LazySettings' `__getattribute__`, a
Python call of its own, and a runner read `USE_TZ` (its clock) and `DEBUG`
(its query log) once or twice a job: about 1 % of a no-op job's
instructions. Kept values are dropped whenever Django says a setting
changed (`override_settings`, pytest-django's `settings` fixture), so they
are never stale.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.signals import setting_changed

_kept: dict[str, bool] = {}


def _read(name: str) -> bool:
    value = _kept[name] = bool(getattr(settings, name))
    return value


def use_tz() -> bool:
    """`settings.USE_TZ`."""
    kept = _kept.get("USE_TZ")
    return _read("USE_TZ") if kept is None else kept


def debug() -> bool:
    """`settings.DEBUG`."""
    kept = _kept.get("DEBUG")
    return _read("DEBUG") if kept is None else kept


def _forget(*, setting: str, **kwargs: Any) -> None:
    _kept.pop(setting, None)


setting_changed.connect(_forget, dispatch_uid="jobs.hot_settings")
