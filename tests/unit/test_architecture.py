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


CLI = PACKAGE / "cli"

#: What `jobs.cli` never imports: SQL and its plumbing (`store`), the runner,
#: and the steps `operations` takes for it (`retirement`, `wakeup`). The verbs
#: change jobs through the admin's doors (`operations`, `controls`, `queue`,
#: `schedules.operator`) and read them through `stats`, `holding` and the models.
BEHIND_THE_DOORS = ("jobs.store", "jobs.runner", "jobs.retirement", "jobs.wakeup")


def _cli_modules() -> dict[str, Path]:
    return {name: path for name, path in _modules().items() if name.startswith("jobs.cli")}


def _behind(target: str) -> bool:
    return any(target == door or target.startswith(f"{door}.") for door in BEHIND_THE_DOORS)


def _database_handles(path: Path) -> list[str]:
    """The imports of `path` that take a connection or a transaction from Django."""
    return [
        ast.unparse(node)
        for node in _runtime_nodes(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom)
        and (node.module or "").startswith("django.db")
        and {"connection", "connections", "transaction"} & {alias.name for alias in node.names}
    ]


def test_the_root_of_jobs_holds_no_cli_module_the_command_lives_in_the_jobs_cli_package():
    assert (CLI / "__init__.py").is_file(), "jobs/cli/ is a package"
    assert sorted(path.name for path in PACKAGE.glob("cli*.py")) == []


def test_every_jobs_cli_module_that_declares_a_subcommand_is_listed_once_in_verbs():
    declaring = {
        path.stem
        for path in CLI.glob("*.py")
        if any(
            isinstance(node, ast.FunctionDef) and node.name == "add_parser"
            for node in ast.parse(path.read_text()).body
        )
    }
    [listed] = [
        node.value
        for node in ast.parse((CLI / "__init__.py").read_text()).body
        if isinstance(node, ast.AnnAssign) and ast.unparse(node.target) == "VERBS"
    ]
    assert isinstance(listed, ast.Tuple)
    names = [ast.unparse(element) for element in listed.elts]
    assert "listing" in declaring, "the verb modules are found"
    assert sorted(names) == sorted(declaring), "a verb module not in VERBS has no subcommand"


def test_jobs_cli_acts_through_the_admins_doors_never_the_store_the_runner_or_a_connection():
    graph = _graph()
    modules = _cli_modules()
    assert "jobs.cli.listing" in modules, "the cli's modules are found"
    behind = {name: sorted(target for target in graph[name] if _behind(target)) for name in modules}
    assert {name: found for name, found in behind.items() if found} == {}
    handles = {name: _database_handles(path) for name, path in modules.items()}
    assert {name: found for name, found in handles.items() if found} == {}


def test_the_rule_on_jobs_cli_names_a_store_import_and_a_connection_taken(tmp_path):
    source = tmp_path / "verb.py"
    source.write_text(
        "from django.db import DEFAULT_DB_ALIAS, connections\n"
        "def f():\n    from jobs.store.postgresql import sql\n"
    )
    modules = {"jobs.cli.verb": source, "jobs.store.postgresql.sql": source}
    assert {t for t in _imports("jobs.cli.verb", source, modules) if _behind(t)} == {
        "jobs.store.postgresql.sql"
    }
    assert _database_handles(source) == ["from django.db import DEFAULT_DB_ALIAS, connections"]
    assert not _behind("jobs.stats")
    assert not _behind("jobs.storable")


def test_no_module_of_jobs_cli_is_longer_than_the_limit():
    long = {
        name: lines
        for name, path in _cli_modules().items()
        if (lines := len(path.read_text().splitlines())) > MODULE_LINES
    }
    assert long == {}, f"modules of jobs/cli over {MODULE_LINES} lines: {long}"


def test_the_jobs_command_compares_no_verb_it_runs_the_handler_the_parsed_arguments_carry():
    """No `verb == "list"` chain: a verb is added by listing its module in `jobs.cli.VERBS`."""
    command = PACKAGE / "management" / "commands" / "jobs.py"
    tree = ast.parse(command.read_text())
    compared = [ast.unparse(node) for node in ast.walk(tree) if isinstance(node, ast.Compare)]
    assert compared == []
    assert "VERBS" in ast.unparse(tree), "the parser is built from jobs.cli.VERBS"


def test_the_store_keeps_its_verbs_and_never_imports_the_notifier_or_the_wake_up():
    """Waking runners is beside the store (`jobs.notifier`, used by `jobs.wakeup`),
    not in it: a store that imported either would be carrying the plumbing again."""
    graph = _graph()
    store = [name for name in graph if name == "jobs.store" or name.startswith("jobs.store.")]
    assert "jobs.store.postgresql" in store, "the store's modules are found"
    naming = {
        name: sorted(
            target
            for target in graph[name]
            if target.startswith("jobs.notifier") or target == "jobs.wakeup"
        )
        for name in store
    }
    assert {name: found for name, found in naming.items() if found} == DEPRECATED_WAYS_BACK


#: The store's only imports of the notifier: the old names, kept as deprecated
#: aliases that warn (`Store.wakes_other_processes`, `jobs.store.sqlite_doorbell`).
DEPRECATED_WAYS_BACK = {
    "jobs.store.base": ["jobs.notifier"],
    "jobs.store.sqlite_doorbell": ["jobs.notifier.sqlite_doorbell"],
}


def _executes(path: Path) -> list[str]:
    """Each call in `path` that sends a statement: `execute`, `executemany`, `cursor`."""
    return [
        ast.unparse(node.func)
        for node in _runtime_nodes(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("execute", "executemany", "cursor")
    ]


def test_no_notifier_sends_a_statement_of_its_own_vendor_sql_stays_in_the_store():
    """PostgreSQL's LISTEN and NOTIFY run through `jobs.store.postgresql.channel`;
    SQLite's doorbell has no SQL at all."""
    notifier = {name: path for name, path in _modules().items() if name.startswith("jobs.notifier")}
    assert "jobs.notifier.postgresql" in notifier, "the notifier's modules are found"
    sending = {name: found for name, path in notifier.items() if (found := _executes(path))}
    assert sending == {}


def test_the_statement_finder_finds_an_execute_a_notifier_might_write(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("def listen(conn):\n    conn.execute('LISTEN jobs_wakeup')\n")
    assert _executes(source) == ["conn.execute"]


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
