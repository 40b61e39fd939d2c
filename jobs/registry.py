"""One handler per kind, and how a project's handlers are found.

Two handlers for one kind would each get half the rows, so a second is refused
with `ImproperlyConfigured`. Handlers live in a `jobs` module of any installed
app (`orders/jobs.py`, like `admin.py`), which `JobsAppConfig.ready` imports.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import autodiscover_modules

from jobs.handlers import JobHandler
from jobs.spec import concurrency_limit_problem, priority_problem, queue_name_problem

#: The module name looked for in every installed app.
HANDLER_MODULE = "jobs"


class Registry:
    def __init__(self) -> None:
        self._handlers: dict[str, JobHandler] = {}

    def register[H: type[JobHandler]](self, handler_class: H) -> H:
        """Register `handler_class` (instantiated once) for its `kind`; usable as a decorator."""
        if not (isinstance(handler_class, type) and issubclass(handler_class, JobHandler)):
            raise ImproperlyConfigured(f"{handler_class!r} is not a JobHandler subclass")
        kind = getattr(handler_class, "kind", None)
        if not isinstance(kind, str) or not kind:
            raise ImproperlyConfigured(f"{handler_class.__qualname__} must set a non-empty `kind`")
        for problem in (
            queue_name_problem(handler_class.queue),
            priority_problem(handler_class.priority),
            concurrency_limit_problem(handler_class.concurrency_limit),
        ):
            if problem:
                raise ImproperlyConfigured(f"{handler_class.__qualname__}.{problem}")
        existing = self._handlers.get(kind)
        if existing is not None:
            if type(existing) is handler_class:
                return handler_class
            raise ImproperlyConfigured(
                f"two handlers for kind {kind!r}: {_name(type(existing))} and "
                f"{_name(handler_class)}; each would get half the rows"
            )
        self._handlers[kind] = handler_class()
        return handler_class

    def get(self, kind: str) -> JobHandler | None:
        return self._handlers.get(kind)

    def kinds(self) -> list[str]:
        return sorted(self._handlers)

    def __iter__(self) -> Iterator[JobHandler]:
        return iter(list(self._handlers.values()))

    def __len__(self) -> int:
        return len(self._handlers)


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


#: The process's registry, filled by `@register` as handler modules import.
registry = Registry()


def register[H: type[JobHandler]](handler_class: H) -> H:
    """Class decorator: make `handler_class` the handler for its `kind`."""
    return registry.register(handler_class)


def autodiscover() -> None:
    """Import every installed app's `jobs` module (handlers) and `tasks` module
    (`django.tasks` functions, which the task handler may only run once they
    have registered themselves)."""
    autodiscover_modules(HANDLER_MODULE)
    autodiscover_modules("tasks")
