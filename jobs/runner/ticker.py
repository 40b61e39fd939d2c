"""The config ticker: a thread that marks the runner's config due for a re-read
every `JOBS_CONFIG_CHECK_SECONDS` of real time, busy or idle.

It only sets a flag; the loop reads the row after its next pass's claims are
handed on, so a re-read never stands between a wake-up and a claim.
"""

from __future__ import annotations

import threading

from django.conf import settings

#: The longest an idle runner goes without re-reading the config row, unless
#: `settings.JOBS_CONFIG_CHECK_SECONDS` says otherwise.
CONFIG_CHECK_SECONDS = 1.0


class ConfigTicker:
    """Sets `due` every `seconds` (read from the settings once) once started."""

    def __init__(self) -> None:
        self.seconds = float(getattr(settings, "JOBS_CONFIG_CHECK_SECONDS", CONFIG_CHECK_SECONDS))
        #: Set when the config row is due for a re-read; the loop clears it.
        self.due = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._tick, name="jobs-config", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _tick(self) -> None:
        while not self._stop.wait(self.seconds):
            self.due.set()
