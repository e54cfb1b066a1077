"""Changes the emulator applies to links at given times (``labkit testbed up --schedule``).

A schedule is a TOML file of ``[[change]]`` tables, or the same keys inline on the command
line (``--schedule 'at=30s,for=5s,partition'``, repeatable)::

    [[change]]            # a 5 s partition of a-b at 30 s
    at = "30s"            # from when the schedule was given to `testbed up`
    for = "5s"            # optional: undone after this long
    link = "a-b"          # optional: every link; "a->b" for one direction
    partition = true      # every packet entering the link is lost

    [[change]]            # a delay step, for good
    at = "60s"
    one_way_delay = "150ms"

    [[change]]            # a flapping link: down 2 s in every 10 s, for 5 minutes
    at = "0s"
    every = "10s"
    for = "2s"
    until = "5m"          # optional with every (default 1 h after `at`)
    loss = "100%"
    label = "flap"        # optional: how the applied change is named in the records

Any link key of a topology file may be changed. Overlapping changes stack in the order
they started. :func:`expand` turns a schedule into one timeline per direction: the whole
parameter set from each moment something changes, which the emulator applies on time
and records (labkit-go link's counters, then every run's manifest).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from labkit.errors import LabkitError
from labkit.files import MAX_SCHEDULE_BYTES, parse_toml, read_text_file
from labkit.testbed.linkspec import KEYS, overrides
from labkit.units import parse_duration

TIMING_KEYS = ("at", "for", "every", "until", "link", "label")
#: Changes once repeated; more would be a mistake (or a multi-day flap better written as a trace).
MAX_OCCURRENCES = 5000
DEFAULT_REPEAT_S = 3600.0


@dataclass(frozen=True)
class Change:
    at_s: float
    fields: dict
    for_s: float | None = None
    every_s: float | None = None
    until_s: float | None = None
    link: str | None = None  # "a-b", "a>b" or None (every direction)
    label: str = ""

    def applies_to(self, src: str, dst: str) -> bool:
        return self.link is None or self.link in ("-".join(sorted((src, dst))), f"{src}>{dst}")


def _duration(table: dict, key: str, where: str) -> float | None:
    if key not in table:
        return None
    try:
        return parse_duration(str(table[key]))
    except ValueError as exc:
        raise LabkitError(f"{where}: {key}: {exc}") from None


def parse_change(table: dict, where: str, base_dir: Path | None = None) -> Change:
    """One ``[[change]]`` table (or inline change) -> Change; mistakes name ``where``."""
    if "at" not in table:
        raise LabkitError(f"{where}: needs at = TIME (from when the schedule is given)")
    link_fields = {k: v for k, v in table.items() if k not in TIMING_KEYS}
    unknown = set(link_fields) - set(KEYS)
    if unknown:
        raise LabkitError(f"{where}: unknown key {sorted(unknown)[0]!r} (timing keys: {', '.join(TIMING_KEYS)}; "
                          f"link keys: {', '.join(KEYS)})")
    if not link_fields:
        raise LabkitError(f"{where}: changes nothing (give a link key, e.g. partition = true or loss = \"5%\")")
    change = Change(
        at_s=_duration(table, "at", where), fields=overrides(link_fields, where, base_dir),
        for_s=_duration(table, "for", where), every_s=_duration(table, "every", where),
        until_s=_duration(table, "until", where), label=str(table.get("label", "")),
        link=_link(str(table["link"]), where) if "link" in table else None,
    )
    if change.every_s is not None and change.every_s <= 0:
        raise LabkitError(f"{where}: every must be positive")
    if change.until_s is not None and change.every_s is None:
        raise LabkitError(f"{where}: until goes with every")
    if change.until_s is not None and change.until_s <= change.at_s:
        raise LabkitError(f"{where}: until ({change.until_s:g} s) must come after at ({change.at_s:g} s)")
    if change.for_s is not None and change.every_s is not None and change.for_s > change.every_s:
        raise LabkitError(f"{where}: for is longer than every, so the repeats would overlap")
    return change


def _link(text: str, where: str) -> str:
    text = text.strip()
    if "->" in text:
        src, dst = text.split("->", 1)
        return f"{src}>{dst}"
    if text.count("-") != 1:
        raise LabkitError(f"{where}: link {text!r} must be HOST-HOST or HOST->HOST")
    return "-".join(sorted(text.split("-")))


def parse_inline(text: str) -> Change:
    """``at=30s,for=5s,partition`` (a bare key means true)."""
    table: dict = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, value = item.partition("=")
        table[key.strip()] = value.strip() if sep else True
    return parse_change(table, f"--schedule {text!r}")


def read_schedule(values: list[str] | tuple[str, ...]) -> list[Change]:
    """Every ``--schedule`` value: an inline change (it has '=') or a TOML file of ``[[change]]`` tables."""
    changes: list[Change] = []
    for value in values:
        if "=" in value:
            changes.append(parse_inline(value))
            continue
        path = Path(value)
        text = read_text_file(path, "schedule", max_bytes=MAX_SCHEDULE_BYTES)
        data = parse_toml(text, f"schedule {path}")
        if set(data) - {"change"} or not isinstance(data.get("change"), list):
            raise LabkitError(f"schedule {path}: holds [[change]] tables and nothing else")
        changes += [parse_change(t, f"schedule {path} change {i + 1}", path.resolve().parent)
                    for i, t in enumerate(data["change"])]
    return changes


def check_links(changes: list[Change], hosts: tuple[str, ...]) -> None:
    """Every change's link must join two of the testbed's hosts."""
    for change in changes:
        if change.link is None:
            continue
        names = change.link.replace(">", "-").split("-")
        if any(name not in hosts for name in names) or names[0] == names[1]:
            raise LabkitError(f"schedule: link {change.link.replace('>', '->')!r} is not between two of the "
                              f"testbed's hosts ({', '.join(hosts)})")


def _occurrences(changes: list[Change]) -> list[tuple[float, float | None, int, Change]]:
    """(start, end, order, change) of every occurrence, repeats unrolled."""
    out = []
    for order, change in enumerate(changes):
        starts = [change.at_s]
        if change.every_s:
            until = change.until_s if change.until_s is not None else change.at_s + DEFAULT_REPEAT_S
            count = int((until - change.at_s) / change.every_s) + 1
            if count > MAX_OCCURRENCES:
                raise LabkitError(f"schedule: change {order + 1} repeats {count} times (at most {MAX_OCCURRENCES}); "
                                  "shorten until or lengthen every")
            starts = [change.at_s + k * change.every_s for k in range(count) if change.at_s + k * change.every_s < until]
        out += [(s, s + change.for_s if change.for_s is not None else None, order, change) for s in starts]
    if len(out) > MAX_OCCURRENCES:
        raise LabkitError(f"schedule: {len(out)} changes in all, at most {MAX_OCCURRENCES}")
    return out


def expand(changes: list[Change], src: str, dst: str) -> list[tuple[float, str, dict]]:
    """The timeline of direction src -> dst: (seconds, label, LinkSpec overrides in force from then on)."""
    mine = [o for o in _occurrences(changes) if o[3].applies_to(src, dst)]
    boundaries = sorted({o[0] for o in mine} | {o[1] for o in mine if o[1] is not None})
    timeline = []
    for t in boundaries:
        active = sorted((o for o in mine if o[0] <= t and (o[1] is None or t < o[1])), key=lambda o: (o[0], o[2]))
        merged: dict = {}
        for occurrence in active:
            merged.update(occurrence[3].fields)
        labels = [_label(o[3]) for o in mine if o[0] == t] + [f"{_label(o[3])} ends" for o in mine if o[1] == t]
        timeline.append((t, "; ".join(labels), merged))
    return timeline


def _label(change: Change) -> str:
    if change.label:
        return change.label
    return ", ".join(f"{k}={v}" for k, v in change.fields.items())


def to_records(changes: list[Change]) -> list[dict]:
    """The schedule as state.json keeps it (and runs record it)."""
    return [dataclasses.asdict(c) for c in changes]


def from_records(records: list[dict] | None) -> list[Change]:
    return [Change(**r) for r in records or []]
