"""The layout's rules, read from the source: imports run one way, and modules stay small.

Read with `ast`, never by importing, so a cycle is found even where Python's
import order happens to hide it today. Every import that runs counts, inside
functions too; only `if TYPE_CHECKING:` blocks, which never run, are left out.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "jobs"

#: The most lines a module of `jobs/` may have: past it, a module is doing
#: more than one thing (migrations, which are history, are not counted).
MODULE_LINES = 400


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if "migrations" in parts:
            continue
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node that can run: `if TYPE_CHECKING:` bodies are skipped."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (n for child in node.orelse for n in [child, *_runtime_nodes(child)])
            continue
        yield node
        yield from _runtime_nodes(node)


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of `jobs` that `name` imports when it runs.

    `from jobs.x import y` names `jobs.x.y` when that is a module of its own,
    else `jobs.x`. A parent package that Python imports on the way to a
    submodule is not counted: its own imports are its own edges.
    """
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                targets.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
    return {target for target in targets if target in modules and target != name}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of `graph`, as the modules along it, or None."""
    done: set[str] = set()

    def visit(node: str, trail: list[str]) -> list[str] | None:
        if node in trail:
            return [*trail[trail.index(node) :], node]
        if node in done:
            return None
        for target in sorted(graph[node]):
            found = visit(target, [*trail, node])
            if found:
                return found
        done.add(node)
        return None

    for start in sorted(graph):
        found = visit(start, [])
        if found:
            return found
    return None


def test_the_import_graph_of_jobs_has_no_cycle_counting_imports_inside_functions():
    cycle = _cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_finder_finds_a_cycle_through_an_import_inside_a_function(tmp_path):
    graph = {"jobs.a": {"jobs.b"}, "jobs.b": {"jobs.c"}, "jobs.c": {"jobs.a"}}
    assert _cycle(graph) == ["jobs.a", "jobs.b", "jobs.c", "jobs.a"]
    source = tmp_path / "m.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from jobs.models import Job\n"
        "def f():\n    from jobs.store import for_database\n"
    )
    modules = {"jobs.m": source, "jobs.models": source, "jobs.store": source}
    assert _imports("jobs.m", source, modules) == {"jobs.store"}


def test_no_module_of_jobs_is_longer_than_the_limit():
    long = {
        name: lines
        for name, path in _modules().items()
        if (lines := len(path.read_text().splitlines())) > MODULE_LINES
    }
    assert long == {}, f"modules over {MODULE_LINES} lines: {long}"


def test_the_generic_runner_path_never_imports_schedules_which_join_through_lifecycle_hooks():
    graph = _graph()
    generic = [
        name
        for name in graph
        if name.startswith("jobs.runner") or name in ("jobs.retirement", "jobs.lifecycle")
    ]
    assert generic, "the runner's modules are found"
    naming = {
        name: sorted(target for target in graph[name] if target.startswith("jobs.schedules"))
        for name in generic
    }
    assert {name: found for name, found in naming.items() if found} == {}


def test_no_module_of_the_store_imports_the_runner_the_admin_or_the_cli():
    """The store executes what it is asked (an admission, a settle) and never
    reaches up into who asks: `jobs.runner`, `jobs.admin`, `jobs.cli*`."""
    graph = _graph()
    store = [name for name in graph if name == "jobs.store" or name.startswith("jobs.store.")]
    assert "jobs.store.limits" in store, "the store's modules are found"
    upward = ("jobs.runner", "jobs.admin", "jobs.cli")
    reaching = {
        name: sorted(target for target in graph[name] if target.startswith(upward))
        for name in store
    }
    assert {name: found for name, found in reaching.items() if found} == {}
