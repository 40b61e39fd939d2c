"""The instruction budget: reading callgrind's count, the committed budget file,
and the verdict of a count against it.

A count of instructions executed does not move with the machine's load, so
it can hold a change to a number where a wall-clock rate cannot (this VM's
speed moves by a factor of two within an hour). The budget holds, per
database vendor and per measure, the count measured at the last change that
wrote it; a count more than `TOLERANCE` above its budget fails the check.
A change that lowers a count writes the lower one (`benchjobs --part
instructions --write-budget`), so the budget only ever ratchets down.

Pure code: nothing here touches the database or runs a process, so all of it
is unit-tested.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

#: The committed budget: {vendor: {measure: instructions}}.
BUDGET_FILE = Path(__file__).resolve().parents[1] / "instruction-budget.json"

#: How far above its budget a count may go before the check fails, in
#: percent: above the few tenths of a percent a count moves from run to run,
#: below what any real change to the hot path costs.
TOLERANCE_PERCENT = 2
TOLERANCE = TOLERANCE_PERCENT / 100

#: What the budget file says about itself (JSON has no comments).
ABOUT = (
    "Instructions executed (valgrind --tool=callgrind, every thread), per vendor: "
    "runner_per_job (a runjobs --burst drain of 2,000 payload jobs at the default config, "
    "less an empty one, per job), enqueue_per_call and enqueue_many_per_row (2,000 each, "
    "spec building included, less an empty run of the same script). Written by "
    "`manage.py benchjobs --part instructions --write-budget`; `--check` fails when a count "
    "exceeds its figure here by more than 2 %. See the README's 'Instruction budget'."
)


class CallgrindOutputError(ValueError):
    """A callgrind out file without a total of instructions executed."""


def callgrind_total(text: str) -> int:
    """Instructions executed (the `Ir` event) in one callgrind out file: its
    `totals:` line, or its `summary:` line where there is none, each read at
    the position the `events:` line gives `Ir`."""
    events: list[str] = []
    found: dict[str, str] = {}
    for line in text.splitlines():
        name, colon, rest = line.partition(":")
        if not colon:
            continue
        if name == "events":
            events = rest.split()
        elif name in ("totals", "summary") and name not in found:
            found[name] = rest
    if "Ir" not in events:
        raise CallgrindOutputError("no 'events:' line naming Ir")
    total = found["totals"] if "totals" in found else found.get("summary")
    if total is None:
        raise CallgrindOutputError("no 'totals:' or 'summary:' line")
    figures = total.split()
    position = events.index("Ir")
    if position >= len(figures):
        raise CallgrindOutputError(f"no Ir figure in {total.strip()!r}")
    return int(figures[position])


def spread(counts: Iterable[int]) -> float:
    """How far apart repeated counts are: (largest - smallest) / median."""
    ordered = sorted(counts)
    if not ordered:
        raise ValueError("no counts")
    middle = ordered[len(ordered) // 2]
    return (ordered[-1] - ordered[0]) / middle if middle else 0.0


@dataclass(frozen=True)
class Verdict:
    """One measured count against its budget (None: the budget has no figure)."""

    measure: str
    measured: int
    budget: int | None

    @property
    def change(self) -> float | None:
        """The count's distance from its budget, as a fraction of the budget."""
        if self.budget is None or self.budget <= 0:
            return None
        return self.measured / self.budget - 1

    @property
    def within(self) -> bool:
        """At most `TOLERANCE_PERCENT` above the budget, compared in whole numbers."""
        if self.budget is None or self.budget <= 0:
            return False
        return self.measured * 100 <= self.budget * (100 + TOLERANCE_PERCENT)

    def line(self) -> str:
        if self.budget is None:
            return f"{self.measure:<24}  {self.measured:>12,}  no budget  NOT CHECKED"
        word = "within" if self.within else "OVER"
        return (
            f"{self.measure:<24}  {self.measured:>12,}  budget {self.budget:>12,}  "
            f"{self.change or 0.0:+.2%}  {word}"
        )

    def failure(self) -> str:
        """Why this verdict fails the check, in one sentence."""
        if self.budget is None:
            return f"{self.measure}: {self.measured:,} has no budget to be checked against"
        return (
            f"{self.measure}: {self.measured:,} instructions, {self.change or 0.0:+.2%} "
            f"over its budget of {self.budget:,} (allowed: +{TOLERANCE:.0%})"
        )


def verdicts(budget: Mapping[str, int], measured: Mapping[str, int]) -> list[Verdict]:
    """Each measured count against `budget` (one vendor's figures)."""
    return [Verdict(name, count, budget.get(name)) for name, count in measured.items()]


def over(budget: Mapping[str, int], measured: Mapping[str, int]) -> bool:
    """Whether a count is over a budget it has (one without a figure is not)."""
    return any(v.budget is not None and not v.within for v in verdicts(budget, measured))


def read(path: Path | None = None) -> dict[str, dict[str, int]]:
    """{vendor: {measure: instructions}} from the budget file (empty when missing)."""
    try:
        data = json.loads((path or BUDGET_FILE).read_text())
    except FileNotFoundError:
        return {}
    return {
        vendor: {name: int(count) for name, count in figures.items()}
        for vendor, figures in data.items()
        if isinstance(figures, dict)
    }


def written(
    current: Mapping[str, Mapping[str, int]], vendor: str, measured: Mapping[str, int]
) -> str:
    """The budget file's text with `vendor`'s figures replaced by `measured`,
    every other vendor's kept."""
    figures = {name: dict(counts) for name, counts in current.items()}
    figures[vendor] = dict(measured)
    document: dict[str, object] = {"about": ABOUT}
    document.update({name: figures[name] for name in sorted(figures)})
    return json.dumps(document, indent=2) + "\n"


def write(vendor: str, measured: Mapping[str, int], path: Path | None = None) -> None:
    (path or BUDGET_FILE).write_text(written(read(path), vendor, measured))
