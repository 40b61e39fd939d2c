"""One handler per kind: registration, lookup, the refusals, and autodiscovery.

Two handlers for one kind would each get half the rows, so the registry is the
place that refuses the second loudly, at import time.
"""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

import jobs.registry
from jobs import Done, JobHandler, register
from jobs.registry import Registry
from jobs.sweep import SweepHandler
from tests.jobapp.jobs import RecordHandler, SleepHandler


class Ship(JobHandler):
    kind = "orders.ship"

    def run(self, job):
        return Done()


class Refund(JobHandler):
    kind = "orders.refund"

    def run(self, job):
        return Done()


class OtherShip(JobHandler):
    kind = "orders.ship"

    def run(self, job):
        return Done()


def test_register_returns_the_class_so_it_works_as_a_decorator(registry):
    @registry.register
    class Decorated(JobHandler):
        kind = "decorated"

    assert isinstance(Decorated, type), "the decorator leaves the name bound to the class"
    assert issubclass(Decorated, JobHandler), "the class is the one that was decorated"
    assert registry.register(Ship) is Ship, "register returns its argument unchanged"


def test_get_answers_an_instance_of_the_registered_class_for_its_kind(registry):
    registry.register(Ship)
    registry.register(Refund)
    assert type(registry.get("orders.ship")) is Ship, "the kind maps to its own handler"
    assert type(registry.get("orders.refund")) is Refund, "each kind to its own"
    assert registry.get("orders.unknown") is None, "an unknown kind has no handler"


def test_a_handler_class_is_instantiated_once(registry):
    """The runner calls one instance for every job of the kind, so state set up once stays."""
    made = []

    class Counted(JobHandler):
        kind = "counted"

        def __init__(self):
            made.append(self)

    registry.register(Counted)
    first, second = registry.get("counted"), registry.get("counted")
    assert len(made) == 1, "registration creates exactly one instance"
    assert first is second is made[0], "every lookup answers that same instance"


def test_kinds_lists_every_registered_kind_sorted(registry):
    assert registry.kinds() == [], "an empty registry has no kinds"
    registry.register(Ship)
    registry.register(Refund)
    assert registry.kinds() == ["orders.refund", "orders.ship"], "kinds() lists them sorted"
    assert len(registry) == 2, "one entry per kind"
    assert {type(handler) for handler in registry} == {Ship, Refund}, "iteration yields handlers"


def test_a_second_handler_for_a_registered_kind_is_refused_naming_both(registry):
    registry.register(Ship)
    with pytest.raises(ImproperlyConfigured) as refused:
        registry.register(OtherShip)
    message = str(refused.value)
    assert "orders.ship" in message, "the refusal names the contested kind"
    assert f"{Ship.__module__}.{Ship.__qualname__}" in message, "it names the first handler"
    assert f"{OtherShip.__module__}.{OtherShip.__qualname__}" in message, "and the second"
    assert type(registry.get("orders.ship")) is Ship, "the first registration stands"


def test_a_subclass_of_a_registered_handler_is_a_second_handler_for_its_kind(registry):
    """A subclass inherits `kind`; registering it too would split the rows between them."""
    registry.register(Ship)

    class FasterShip(Ship):
        pass

    with pytest.raises(ImproperlyConfigured, match=r"orders\.ship"):
        registry.register(FasterShip)
    assert type(registry.get("orders.ship")) is Ship, "the first registration stands"


def test_registering_the_same_class_twice_is_harmless(registry):
    """A module imported twice (autodiscovery, a test) must not crash the process."""
    registry.register(Ship)
    instance = registry.get("orders.ship")
    assert registry.register(Ship) is Ship, "the repeat returns the class"
    assert registry.get("orders.ship") is instance, "the repeat keeps the one instance"
    assert registry.kinds() == ["orders.ship"], "the repeat adds nothing"


@pytest.mark.parametrize("kind", [None, "", 5], ids=["missing", "empty", "not-a-string"])
def test_a_handler_without_a_usable_kind_is_refused(registry, kind):
    attributes = {} if kind is None else {"kind": kind}
    nameless = type("Nameless", (JobHandler,), attributes)
    with pytest.raises(ImproperlyConfigured, match="Nameless") as refused:
        registry.register(nameless)
    assert "kind" in str(refused.value), "the refusal says what is missing"
    assert len(registry) == 0, "a refused handler is not registered"


@pytest.mark.parametrize(
    ("attribute", "value"),
    [
        ("queue", ""),
        ("queue", "mail queue"),
        ("queue", None),
        ("priority", 101),
        ("priority", -101),
        ("priority", 2.5),
        ("priority", True),
        ("concurrency_limit", -1),
        ("concurrency_limit", 2.0),
        ("concurrency_limit", False),
        ("concurrency_limit", "4"),
    ],
)
def test_a_handler_with_a_queue_priority_or_limit_no_job_could_take_is_refused_at_registration(
    registry, attribute, value
):
    odd = type("Odd", (JobHandler,), {"kind": "orders.odd", attribute: value})
    with pytest.raises(ImproperlyConfigured, match=f"Odd.{attribute} must be") as refused:
        registry.register(odd)
    assert repr(value) in str(refused.value), "the refusal quotes the value"
    assert len(registry) == 0, "a refused handler is not registered"


def test_a_handler_names_the_default_queue_and_priority_zero_unless_it_sets_its_own(registry):
    registry.register(Ship)
    assert (Ship.queue, Ship.priority) == ("default", 0)
    assert Ship.concurrency_limit is None, "no limit unless it sets one"


@pytest.mark.parametrize("limit", [0, 1, 100_000])
def test_a_handler_may_limit_its_kind_from_zero_which_holds_it_up(registry, limit):
    limited = type("Limited", (JobHandler,), {"kind": "orders.limited", "concurrency_limit": limit})
    registry.register(limited)
    assert registry.get("orders.limited").concurrency_limit == limit


def test_something_that_is_not_a_job_handler_subclass_is_refused(registry):
    class NotAHandler:
        kind = "not.a.handler"

        def run(self, job):
            return Done()

    for thing in (NotAHandler, Ship(), lambda job: Done(), "orders.ship"):
        with pytest.raises(ImproperlyConfigured, match="not a JobHandler"):
            registry.register(thing)
    assert len(registry) == 0, "nothing that is not a handler class gets registered"


def test_the_register_decorator_fills_the_process_registry(monkeypatch):
    process_registry = Registry()
    monkeypatch.setattr(jobs.registry, "registry", process_registry)
    assert register(Ship) is Ship, "@register returns the class"
    assert type(process_registry.get("orders.ship")) is Ship, "@register fills the registry"


def test_autodiscovery_registered_the_handlers_in_every_installed_apps_jobs_module():
    """Django's start-up imported tests/jobapp/jobs.py; no database is involved."""
    found = jobs.registry.registry
    assert type(found.get("test.record")) is RecordHandler, "test.record is the app's handler"
    assert type(found.get("test.sleep")) is SleepHandler, "every handler in the module is found"
    assert type(found.get("jobs.sweep")) is SweepHandler, "the queue's own sweep is registered"
