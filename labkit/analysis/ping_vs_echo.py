"""The 2016 ping-vs-echo experiment re-read: the original's strict parsing, what it lost, and its trimmed tables.

The 2016 notebook (research brief, experiment 2) read its ping and Go echo
logs with patterns that match only times written as ``<digits> ms``, trimmed
|z| ≥ 3 in two passes over both probes pooled, and printed pandas'
``describe()`` per probe. :func:`read_like_2016` reproduces that reading from
the raw logs, :func:`lost_by_2016` names every sample it lost and why, and
:func:`trim_variants` gives the original table beside labkit's corrected
ones. The rest is what the notebook shows of them (tallies, the fate of the
slowest samples, each pass's cut-offs, the variants side by side) and its
:func:`headline`. Tested in ``tests/test_analysis_ping_vs_echo.py`` against
the published table.
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


def kept_by_passes(samples: pd.DataFrame, probes: list[str], *, scope: str, threshold: float,
                   passes: tuple[int, ...] = (2, 3, 5, 10)) -> pd.DataFrame:
    """Samples each probe keeps after each number of trimming ``passes`` (rows: passes; columns: probes): a trim
    that converged would keep the same count from some pass on, and one that does not keeps cutting."""
    rows = {}
    for count in passes:
        kept = zscore_trim(samples, "rtt_ms", by="probe", threshold=threshold, passes=count, scope=scope).counts["kept"]
        rows[count] = {probe: int(kept.get(probe, 0)) for probe in probes}
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index.name = "passes"
    return table


def trim_converged(kept: pd.DataFrame) -> bool:
    """Whether a :func:`kept_by_passes` table stopped changing: its last two rows (the most passes) keep the same
    samples of every probe."""
    return len(kept) > 1 and bool((kept.iloc[-1] == kept.iloc[-2]).all())


# --- what the notebook shows of a re-reading, and its headline ------------------------------------------------------

#: Units coarser than the milliseconds the strict 2016 pattern accepts are the ones it lost.
_FINE_UNITS = ("ms", "µs", "ns")
#: The untrimmed summary's columns a person reads: counts, the tails, and the median's and p99's intervals.
UNTRIMMED_COLUMNS = ["count", "lost", "p5", "50%", "50%_lo", "50%_hi", "p95", "p99", "p99_lo", "p99_hi", "max"]


def probe_order(samples: pd.DataFrame) -> list[str]:
    """The probes of an imported run: ``ping`` first (every other probe is read against it), then the rest by name."""
    present = set(samples["probe"])
    return ["ping", *sorted(present - {"ping"})] if "ping" in present else sorted(present)


def echo_probe(probes: list[str]) -> str | None:
    """The echo probe compared with ping: the first whose name starts with ``echo``; None (an ``import-ping`` run) if none."""
    return next((p for p in probes if p.startswith("echo")), None)


def imports_table(imports: list[dict]) -> pd.DataFrame:
    """One row per imported log (a run manifest's ``imports``): its probe, its parser's line tally, and the time units read."""
    rows = [{"cell": i["cell_id"], "probe": i["probe"], **i["tally"],
             "units": ", ".join(f"{k[5:]} ×{v}" for k, v in i["parser_counts"].items() if k.startswith("unit_"))}
            for i in imports]
    return pd.DataFrame(rows).set_index("cell") if rows else pd.DataFrame(columns=["probe", "units"])


def sample_tally(samples: pd.DataFrame, probes: list[str]) -> pd.DataFrame:
    """Per probe: ``rows``, ``samples`` (ok rows), ``duplicates`` (repeated replies, which the parsers write as rows that
    are not ok) and ``lost`` (the rows that are neither)."""
    tally = samples.groupby("probe").agg(rows=("ok", "size"), samples=("ok", "sum"), duplicates=("duplicate", "sum"))
    tally["lost"] = tally["rows"] - tally["samples"] - tally["duplicates"]
    return tally.reindex(probes)


def seconds_valued(samples: pd.DataFrame) -> pd.DataFrame:
    """The ok samples whose log wrote the time in a unit coarser than ms (Go's ``1.868983839s``): what 2016 could not read."""
    return samples[samples["ok"] & samples["unit"].notna() & ~samples["unit"].isin(_FINE_UNITS)]


def fate_of_slow_samples(samples: pd.DataFrame, variants: dict[str, dict], over_ms: float = 1000.0) -> pd.DataFrame:
    """The ok samples slower than ``over_ms``, and for each corrected variant the trimming pass that removed them (NaN: kept).

    The original variant is left out: it read other rows (the strict reading's), which never include these samples.
    """
    slow = samples[samples["ok"] & (samples["rtt_ms"] > over_ms)]
    fate = pd.DataFrame({name: v["trim"].removed["trim_pass"].reindex(slow.index) if v["trim"] is not None else None
                         for name, v in variants.items() if name != "original"}, index=slow.index)
    return pd.concat([slow[["probe", "seq", "rtt_ms", "unit"]], fate.add_prefix("removed in pass: ")], axis=1)


def cutoffs_side_by_side(variants: dict[str, dict], names: list[str]) -> pd.DataFrame:
    """Each pass's cut-offs in the variants ``names`` (those trimmed), by variant, pass and scope: values scored, their
    mean and σ, the cut-offs (ms), and how many the pass removed and kept."""
    columns = {"n": "n", "center": "mean", "scale": "σ", "low": "low cut-off (ms)", "high": "high cut-off (ms)",
               "removed": "removed", "kept": "kept"}
    frames = {name: variants[name]["trim"].cutoffs[list(columns)] for name in names if variants[name]["trim"] is not None}
    return pd.concat(frames, names=["variant"]).rename(columns=columns)


def variants_side_by_side(variants: dict[str, dict]) -> pd.DataFrame:
    """Count, median and max of every probe in every variant's trimmed table, the variants as the top column level."""
    return pd.concat({name: v["table"].loc[["count", "50%", "max"]] for name, v in variants.items()}, axis=1)


def answered_in_time_order(samples: pd.DataFrame) -> pd.DataFrame:
    """The ok samples in the order they were taken (the file's order when they carry no time)."""
    answered = samples[samples["ok"]]
    return answered.sort_values("t_utc_ns", kind="stable") if "t_utc_ns" in answered else answered


def median_gap(samples: pd.DataFrame, echo: str, n_resamples: int = 2000):
    """The echo's median over ping's, both probes' ok samples in the order they were taken, as a
    :class:`~labkit.analysis.inference.Difference` with a block-bootstrap interval: an hour of samples from one
    path drifts, so the samples are not independent and an iid interval would be too narrow."""
    from labkit.analysis.inference import block_bootstrap_difference

    ordered = answered_in_time_order(samples)
    return block_bootstrap_difference(ordered.loc[ordered["probe"] == "ping", "rtt_ms"],
                                      ordered.loc[ordered["probe"] == echo, "rtt_ms"], n_resamples=n_resamples)


def describe_gap(gap, echo: str) -> str:
    """The echo's median over ping's (a :func:`median_gap`) with its interval and n, in words (Markdown)."""
    return (f"Median {echo} − median ping: **{gap.difference:.2f} ms** (95 % block-bootstrap interval "
            f"{gap.low:.2f} to {gap.high:.2f}; n = {gap.n_a} ping, {gap.n_b} {echo}).")


def gap_in_round_trips(gap, ping_median: float) -> str:
    """The median gap as a multiple of ping's median round trip; a cold call's TCP handshake is one of them."""
    return (f"The median gap, {gap.difference:.1f} ms, is {gap.difference / ping_median:.2f} times ping's median round "
            f"trip ({ping_median:.1f} ms). A call on a new connection waits one round trip for the TCP handshake "
            "before its request can leave; how the rest divides between connection set-up, gRPC and the Go "
            "programs is not decomposed by these logs.")


def headline(probes: list[str], variants: dict[str, dict], *, tally: pd.DataFrame, original: pd.DataFrame,
             dropped: pd.DataFrame, seconds: pd.DataFrame, comparison=None) -> dict:
    """The notebook's headline: each variant's count and median (ms) per probe; per probe the samples and losses,
    what the strict reading parsed and dropped, the samples written in seconds; the echo − ping median gap.

    ``tally`` is :func:`sample_tally`, ``original`` :func:`original_samples`, ``dropped`` :func:`lost_by_2016`,
    ``seconds`` :func:`seconds_valued`, ``comparison`` the echo − ping :func:`median_gap` (None without an echo).
    """
    numbers: dict = {}
    for name, v in variants.items():
        for probe in (p for p in probes if p in v["table"].columns):
            numbers[f"{name}.{probe}.count"] = int(v["table"].at["count", probe])
            numbers[f"{name}.{probe}.median_ms"] = round(float(v["table"].at["50%", probe]), 3)
    for probe in probes:
        numbers[f"samples.{probe}"] = int(tally.at[probe, "samples"])
        numbers[f"lost.{probe}"] = int(tally.at[probe, "lost"])
        numbers[f"parsed_by_original.{probe}"] = int((original["probe"] == probe).sum())
        numbers[f"dropped_by_original.{probe}"] = int((dropped["probe"] == probe).sum())
        numbers[f"seconds_valued.{probe}"] = int((seconds["probe"] == probe).sum())
    if comparison is not None:
        numbers["median_diff_ms"] = round(comparison.difference, 3)
        numbers["median_diff_ci_lo_ms"] = round(comparison.low, 3)
        numbers["median_diff_ci_hi_ms"] = round(comparison.high, 3)
    return numbers


def variants_detail(variants: dict[str, dict]) -> dict[str, dict]:
    """Each variant's parsing, scope, trimmed table and trim counts per probe, as plain mappings for a headline JSON."""
    return {name: {"parsing": v["parsing"], "scope": v["scope"], "table": v["table"].to_dict(),
                   "trim_counts": v["trim"].counts.to_dict(orient="index") if v["trim"] is not None else {}}
            for name, v in variants.items()}
