"""What every parser returns, and the error it raises on input it cannot read at all.

A parser sees the whole text of one tool run and classifies every line: it is
blank, parsed (it yielded a row, a summary value or a known header), or
unrecognised. Unrecognised lines are kept, with their line numbers, so that an
importer can show them; nothing is dropped without being counted.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from labkit.errors import LabkitError

if TYPE_CHECKING:  # pandas is only needed by whoever builds the rows; hosts running
    import pandas as pd  # `labkit echo call --tcp-info` parse ss without it.


class ParseError(LabkitError):
    """The text is not output of the tool the parser reads (e.g. not JSON at all)."""


@dataclass
class ParseResult:
    """Tidy rows from one tool run, with counts that account for every input line.

    ``counts`` always has ``lines``, ``blank``, ``parsed`` and ``unrecognised``
    (for line-oriented formats ``lines == blank + parsed + unrecognised``), plus
    keys specific to the tool (replies, lost, duplicates, ...). ``summary``
    holds the tool's own closing statistics, as the tool printed them, so that a
    test or a notebook can check the rows against them. ``unrecognised_lines``
    lists ``(line_number, text)`` pairs, 1-based (the first :data:`KEPT_LINES`;
    ``counts["unrecognised"]`` counts them all). ``unreadable_lines`` are
    those of them that are not recognisably free of data (a reply in a
    format the parser does not know looks like this): the rows may miss
    what they hold, so an importer refuses the file. Parsers that do not
    tell the two apart leave it empty. ``doubt`` says why rows the parser
    inferred (a probe seen only as a gap in the numbers) may be wrong, or is
    None when they are not in doubt.
    """

    rows: pd.DataFrame | None
    counts: dict[str, int]
    summary: dict[str, Any] = field(default_factory=dict)
    unrecognised_lines: list[tuple[int, str]] = field(default_factory=list)
    unreadable_lines: list[tuple[int, str]] = field(default_factory=list)
    doubt: str | None = None

    def describe(self) -> str:
        """One line for a person: the counts, in a stable order."""
        return ", ".join(f"{key} {value}" for key, value in self.counts.items())


#: How many unrecognised (or unreadable) lines a parser keeps, with their numbers; all are counted.
KEPT_LINES = 1000


class LineTally:
    """Counts lines as a parser classifies them.

    ``cleaned`` counts lines that carried terminal noise (see
    :func:`strip_terminal_noise`) and were parsed after removing it.
    ``unrecognised`` keeps the first :data:`KEPT_LINES` of the lines not
    understood; ``unrecognised_count`` counts them all. ``unreadable`` keeps
    those of them that look like data (a line cut short where the file was
    truncated), which :attr:`ParseResult.unreadable_lines` reports.
    """

    def __init__(self) -> None:
        self.lines = 0
        self.blank = 0
        self.parsed = 0
        self.cleaned = 0
        self.unrecognised: list[tuple[int, str]] = []
        self.unrecognised_count = 0
        self.unreadable: list[tuple[int, str]] = []
        self._noisy = False

    def bulk(self, lines: int, parsed: int) -> None:
        """``lines`` more lines, of which ``parsed`` were read (without noise) by a vectorised pass."""
        self.lines += lines
        self.parsed += parsed

    def prepare(self, raw: str) -> str | None:
        """Count one input line; return it stripped and cleaned, or None if it is blank.

        A line holding nothing but terminal noise (a lone ``^C``) counts as
        parsed and cleaned: it is recognised, and it carries no data.
        """
        self.lines += 1
        line = raw.strip()
        if not line:
            self.blank += 1
            return None
        line, self._noisy = strip_terminal_noise(line)
        line = line.strip()
        if not line:
            self.parsed += 1
            self.cleaned += 1
            return None
        return line

    def recognised(self) -> None:
        """The line last prepared was understood."""
        self.parsed += 1
        self.cleaned += int(self._noisy)

    def unknown(self, number: int, raw: str, looks_like_data: bool = False) -> None:
        """The line last prepared was not understood: keep it for the report (and as unreadable when it
        ``looks_like_data``: the rows may miss what it holds)."""
        self.unrecognised_count += 1
        if len(self.unrecognised) < KEPT_LINES:
            self.unrecognised.append((number, raw))
        if looks_like_data and len(self.unreadable) < KEPT_LINES:
            self.unreadable.append((number, raw))

    def counts(self) -> dict[str, int]:
        return {
            "lines": self.lines,
            "blank": self.blank,
            "parsed": self.parsed,
            "unrecognised": self.unrecognised_count,
            "cleaned": self.cleaned,
        }


# Keys pressed while a tool runs end up in its captured output: the terminal
# echoes an arrow key as ESC [ D, or in caret notation as the four characters
# "^[[D" (the 2016 echo log has one in front of sample 17).
_TERMINAL_NOISE = re.compile(r"(?:\x1b|\^\[)\[[0-9;]*[A-Za-z~]|\^C")


def strip_terminal_noise(line: str) -> tuple[str, bool]:
    """Remove echoed key presses and escape sequences; say whether there were any."""
    cleaned = _TERMINAL_NOISE.sub("", line)
    return cleaned, cleaned != line


def split_lines(text: str) -> list[str]:
    """The lines of ``text`` without line ends; a final newline adds no empty line."""
    return text.splitlines()


def csv_records(text: str, header: list[str], record: Callable[[list[str]], tuple | None], tool: str
                ) -> tuple[list[tuple], LineTally]:
    """The records of a CSV with a header line (labkit-go's loads write one): ``record`` turns a row of the header's
    width into a tuple, or None for a row it cannot read; rows before the header, of another width, or refused are
    unrecognised (counted and kept in the tally). No header line is :class:`ParseError` naming ``tool``."""
    tally = LineTally()
    records: list[tuple] = []
    header_seen = False
    for number, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        line = tally.prepare(",".join(row))
        if line is None:
            continue
        if not header_seen and row == header:
            header_seen = True
            tally.recognised()
            continue
        parsed = record(row) if header_seen and len(row) == len(header) else None
        if parsed is None:
            tally.unknown(number, line)
            continue
        records.append(parsed)
        tally.recognised()
    if not header_seen:
        raise ParseError(f"not {tool}'s CSV: no header line {','.join(header)}")
    return records, tally

