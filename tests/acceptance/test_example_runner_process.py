"""The example project's own `runjobs`, under its own settings: it serves the
orders example (and the tasks framework, and the sweep), never the benchmark
app's kinds unless asked, which would claim a benchmark's rows from any
database the two share."""

from __future__ import annotations

import re

from tests.acceptance.test_security_profiles import manage


def kinds_served(output: str) -> set[str]:
    found = re.search(r"runner_started kinds=(\S+)", output)
    assert found, f"the runner says which kinds it serves:\n{output}"
    return set(found.group(1).split(","))


def test_the_example_s_runner_serves_its_own_kinds_and_not_the_benchmark_s(tmp_path):
    assert manage("migrate", "--verbosity=0", tmp_path=tmp_path).returncode == 0
    result = manage("runjobs", "--burst", tmp_path=tmp_path)
    output = result.stdout + result.stderr

    assert result.returncode == 0, output
    served = kinds_served(output)
    assert "orders.relay" in served, served
    assert not {kind for kind in served if kind.startswith("bench.")}, (
        f"the benchmark's kinds are served only when asked: {served}"
    )


def test_the_benchmark_s_kinds_are_served_when_asked(tmp_path):
    assert manage("migrate", "--verbosity=0", tmp_path=tmp_path).returncode == 0
    result = manage("runjobs", "--burst", tmp_path=tmp_path, BENCHMARK_HANDLERS="True")
    output = result.stdout + result.stderr

    assert result.returncode == 0, output
    assert {"bench.noop", "bench.stamp"} <= kinds_served(output)
