"""The 2016 ping-vs-echo experiment re-read: the original's strict parsing, what it lost, and its trimmed tables.

The 2016 notebook (research brief, experiment 2) read its ping and Go echo
logs with patterns that match only times written as ``<digits> ms``, trimmed
|z| ≥ 3 in two passes over both probes pooled, and printed pandas'
``describe()`` per probe. :func:`read_like_2016` reproduces that reading from
the raw logs, :func:`lost_by_2016` names every sample it lost and why, and
:func:`trim_variants` gives the original table beside labkit's corrected
ones. Tested in ``tests/test_analysis_ping_vs_echo.py`` against the published
table.
"""

from __future__ import annotations

import re

import pandas as pd

from labkit.analysis.summary import summarize
from labkit.analysis.trim import TrimResult, zscore_trim

#: The 2016 reading, by its behaviour: match at the start of a line, and a time only when written "<digits>ms" / "<digits> ms".
STRICT_2016 = {
    "ping": re.compile(r"\d+ bytes from [\w.]+: icmp_seq=(?P<seq>\d+) ttl=\d+ time=(?P<ms>[\d.]+) ms"),
    "go-echo": re.compile(
        r"[\d/]+ [\d:]+ received \d+ bytes from \w+ \([\w.:]+\) order=\d+ seq=(?P<seq>\d+) time=(?P<ms>[\d.]+)ms"
    ),
}
#: pandas' describe() rows: the layout of the 2016 table.
ORIGINAL_LAYOUT = ["count", "mean", "std", "min", "25%", "50%", "75%", "max"]
_COLUMNS = ["probe", "cell_id", "seq", "rtt_ms", "ok"]


def read_like_2016(kind: str, text: str) -> list[dict]:
    """The samples the 2016 patterns find in a raw log of ``kind`` (``ping`` or ``go-echo``): seq and rtt_ms; [] for other kinds."""
    pattern = STRICT_2016.get(kind)
    if pattern is None:
        return []
    return [{"seq": int(m["seq"]), "rtt_ms": float(m["ms"])} for m in map(pattern.match, text.splitlines()) if m]


def original_samples(imports: list[dict], texts: dict[str, str]) -> pd.DataFrame:
    """Every import the 2016 patterns apply to, read as they read it: probe, cell_id, seq, rtt_ms, ok.

    ``imports`` are the run manifest's import records (``cell_id``, ``kind``,
    ``probe``); ``texts`` the raw log of each cell id.
    """
    rows = [{"probe": record["probe"], "cell_id": record["cell_id"], **row, "ok": True}
            for record in imports for row in read_like_2016(record["kind"], texts.get(record["cell_id"], ""))]
    return pd.DataFrame(rows, columns=_COLUMNS)


def first_line_by_seq(text: str) -> dict[int, str]:
    """The first raw line that names each sequence number (``icmp_seq=N``, ``seq=N``, ``seq N``)."""
    index: dict[int, str] = {}
    for line in text.splitlines():
        if m := re.search(r"seq[= ](\d+)\b", line):
            index.setdefault(int(m[1]), line)
    return index


def lost_by_2016(samples: pd.DataFrame, original: pd.DataFrame, texts: dict[str, str]) -> pd.DataFrame:
    """labkit's samples that the 2016 reading did not find, in the cells it read, with why and the raw line.

    ``texts`` holds the raw log of every cell the 2016 patterns apply to (see
    :data:`STRICT_2016`), also those where they found nothing.

    Raises ValueError if the strict reading found a sample labkit's parsers
    did not, or with another value: the corrected reading must be a superset.
    """
    good = samples[samples["ok"]]
    check = original.merge(good[["cell_id", "seq", "rtt_ms"]], on=["cell_id", "seq"], how="left", suffixes=("", "_labkit"))
    if check["rtt_ms_labkit"].isna().any() or (len(check) and (check["rtt_ms"] - check["rtt_ms_labkit"]).abs().max() >= 1e-9):
        raise ValueError("the strict 2016 reading found a sample labkit's parsers did not, or read it differently")
    found = set(zip(original["cell_id"], original["seq"]))
    in_original = pd.Series([key in found for key in zip(good["cell_id"], good["seq"])], index=good.index, dtype=bool)
    lost = good[good["cell_id"].isin(set(texts)) & ~in_original]
    lines = {cell: first_line_by_seq(text) for cell, text in texts.items()}
    return lost.assign(
        reason=[f"time written in {u}" if u != "ms" else "line does not match the strict pattern" for u in lost["unit"]],
        raw_line=[repr(lines.get(c, {}).get(int(s), ""))[:90] for c, s in zip(lost["cell_id"], lost["seq"])],
    )


def original_table(frame: pd.DataFrame, probes: list[str]) -> pd.DataFrame:
    """The 2016 table's layout: describe()'s rows (:data:`ORIGINAL_LAYOUT`), one column per probe."""
    if not len(frame):
        return pd.DataFrame(index=ORIGINAL_LAYOUT)
    return summarize(frame, by="probe").reindex(probes)[ORIGINAL_LAYOUT].T


def trim_variants(original: pd.DataFrame, samples: pd.DataFrame, probes: list[str], *, scope: str, threshold: float,
                  passes: int) -> dict[str, dict]:
    """The original (strict reading, pooled trim), labkit's reading with the same trim, and with ``scope`` when not pooled.

    Each variant: its ``data``, ``scope``, ``parsing``, the :class:`TrimResult`
    (``trim``, None without data), the ``kept`` rows and their ``table``.
    """
    variants = {"original": {"data": original, "scope": "pooled", "parsing": "strict, ms only (2016)"},
                "corrected_pooled": {"data": samples, "scope": "pooled", "parsing": "labkit (every line)"}}
    if scope != "pooled":
        variants[f"corrected_{scope.replace('-', '_')}"] = {"data": samples, "scope": scope, "parsing": "labkit (every line)"}
    for variant in variants.values():
        trim: TrimResult | None = None
        if len(variant["data"]):
            trim = zscore_trim(variant["data"], "rtt_ms", by="probe", threshold=threshold, passes=passes, scope=variant["scope"])
        variant["trim"] = trim
        variant["kept"] = trim.kept if trim is not None else variant["data"]
        variant["table"] = original_table(variant["kept"], probes)
    return variants
