"""Security in the code: no payload ever reaches eval, pickle or a shell."""

from __future__ import annotations

import re

from tests.conftest import ROOT


def test_no_code_in_jobs_hands_anything_to_eval_exec_pickle_or_a_shell():
    """A payload is data: it is decoded as JSON and nothing else."""
    forbidden = re.compile(
        r"\b(eval|exec)\(|\bpickle\b|\bmarshal\b|shell\s*=\s*True|os\.system|os\.popen"
        r"|yaml\.load\("
    )
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted((ROOT / "jobs").rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if forbidden.search(line)
    ]
    assert found == [], f"nothing in jobs/ evaluates, unpickles or shells out: {found}"
