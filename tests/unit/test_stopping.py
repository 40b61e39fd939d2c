"""`jobs.stopping.Stopping`: a stop request a listener can `select` on beside its socket."""

from __future__ import annotations

import selectors

from jobs.stopping import Stopping


def test_a_stop_request_wakes_a_select_once_set_and_not_before():
    stopping = Stopping()
    try:
        with selectors.DefaultSelector() as ready:
            ready.register(stopping, selectors.EVENT_READ)
            assert not ready.select(0), "an unset stop request wakes nobody"
            stopping.set()
            assert ready.select(0), "a set stop request wakes a waiting select"
            assert stopping.is_set(), "it is still the event a thread can wait on"
            stopping.clear()
            assert not ready.select(0), "a cleared stop request is quiet again"
    finally:
        stopping.close()
