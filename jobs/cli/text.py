"""Text for the operator's terminal: every field on one line, shown rather than obeyed,
and rows in aligned columns.

Shared by every verb of `manage.py jobs` (the modules of `jobs.cli`), so
that what a row holds is escaped in one place, and a fix to it reaches every
screen: `terminal_safe`, which lives in `jobs.presentation` since the log
lines escape with it too. Pure functions: no database, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from jobs.presentation import telling_line, terminal_safe

#: Where a verb writes its lines (the command's `self.stdout.write`).
Write = Callable[[str], None]

__all__ = ["ERROR_WIDTH", "Write", "error_line", "table", "terminal_safe"]


#: `list` shows this much of the telling line of `last_error`; `show` has it all.
ERROR_WIDTH = 80


def error_line(text: str, width: int = ERROR_WIDTH) -> str:
    """The telling line of `last_error` (`jobs.presentation.telling_line`), cut to `width`."""
    line = terminal_safe(telling_line(text))
    return line if len(line) <= width else line[: width - 1] + "…"


def table(cells: Sequence[Sequence[str]]) -> list[str]:
    """Rows as lines with aligned columns, each cell `terminal_safe`; the last column is
    left ragged."""
    rows = [[terminal_safe(cell) for cell in row] for row in cells]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for row in rows:
        padded = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        lines.append("  ".join([*padded, row[-1]]).rstrip())
    return lines
