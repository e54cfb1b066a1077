"""The 2016 ping-vs-echo experiment re-read: the original's strict parsing, what it lost, and its trimmed tables.

The 2016 notebook (research brief, experiment 2) read its ping and Go echo
logs with patterns that match only times written as ``<digits> ms``, trimmed
|z| ≥ 3 in two passes over both probes pooled, and printed pandas'
``describe()`` per probe. :func:`read_like_2016` reproduces that reading from
the raw logs, :func:`lost_by_2016` names every sample it lost and why, and
:func:`trim_variants` gives the original table beside labkit's corrected
ones. The rest is what the notebook shows of them (tallies, the fate of the
slowest samples, each pass's cut-offs, the variants side by side) and its
:func:`headline`. What a run shows is said in sentences, each only where its
predicate holds on the run's own numbers (:func:`claims`): what the strict
reading loses, whether its trimmed table reproduces the published one
(:data:`PUBLISHED_2016`, cell by cell), what the trims do, and the gap between
the probes against the published gap and a round trip (the ``*_findings``
functions; the notebook shows them with ``Notebook.say``). Tested in
``tests/test_analysis_ping_vs_echo.py`` against the published table.
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
    """Samples each probe keeps after each number of trimming ``passes`` (rows: passes; columns: probes; a lost
    probe is no sample, kept or not): a trim that converged would keep the same count from some pass on, and one
    that does not keeps cutting."""
    rows = {}
    for count in passes:
        counts = zscore_trim(samples, "rtt_ms", by="probe", threshold=threshold, passes=count, scope=scope).counts
        kept = counts["kept"] - counts["skipped"]
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


def headline(probes: list[str], variants: dict[str, dict], *, tally: pd.DataFrame, original: pd.DataFrame,
             dropped: pd.DataFrame, seconds: pd.DataFrame, comparison=None, held: dict[str, bool] | None = None) -> dict:
    """The notebook's headline: each variant's count and median (ms) per probe; per probe the samples and losses,
    what the strict reading parsed and dropped, the samples written in seconds; the echo − ping median gap.

    ``tally`` is :func:`sample_tally`, ``original`` :func:`original_samples`, ``dropped`` :func:`lost_by_2016`,
    ``seconds`` :func:`seconds_valued`, ``comparison`` the echo − ping :func:`median_gap` (None without an echo),
    ``held`` the :func:`claims` (as ``claim.<name>``).
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
    numbers.update({f"claim.{name}": value for name, value in (held or {}).items()})
    return numbers


def variants_detail(variants: dict[str, dict]) -> dict[str, dict]:
    """Each variant's parsing, scope, trimmed table and trim counts per probe, as plain mappings for a headline JSON."""
    return {name: {"parsing": v["parsing"], "scope": v["scope"], "table": v["table"].to_dict(),
                   "trim_counts": v["trim"].counts.to_dict(orient="index") if v["trim"] is not None else {}}
            for name, v in variants.items()}


# --- what a run shows, in sentences (the notebook says them through Notebook.say) ----------------------------------

#: The table the 2016 write-up published (research brief, experiment 2), ms: pandas' describe() of each probe after
#: its pooled trim. Quoted, not measured: the target :func:`against_published` sets a run's strict reading against.
PUBLISHED_2016 = {
    "ping": {"count": 3567, "mean": 13.037, "std": 1.877, "min": 10.616, "25%": 12.169, "50%": 12.747, "75%": 13.422,
             "max": 42.806},
    "echo": {"count": 3538, "mean": 29.431, "std": 2.908, "min": 23.806, "25%": 27.366, "50%": 28.989, "75%": 31.016,
             "max": 49.039},
}
#: The published figures' last digit (ms): they are cut, not rounded, to three decimals, so a figure of this run
#: reproduces one when it is less than this away from it. Counts must be equal.
PUBLISHED_DIGIT_MS = 0.001
#: The trim the write-up describes: |z| < 3, two passes, ping and echo pooled.
PUBLISHED_TRIM = {"threshold": 3.0, "passes": 2}


def _ms(value: float, digits: int = 3) -> str:
    return f"{value:.{digits}f}".replace("-", "−")


def _seqs(frame: pd.DataFrame, at_most: int = 5) -> str:
    seqs = [str(int(s)) for s in frame["seq"]]
    return ", ".join(seqs[:at_most]) + (f" and {len(seqs) - at_most} more" if len(seqs) > at_most else "")


def against_published(table: pd.DataFrame, echo: str | None, published: dict = PUBLISHED_2016) -> pd.DataFrame:
    """Each cell of the published table beside this run's (``table``: :func:`original_table` of the strict reading's
    trim): ``probe`` (this run's name; the published ``echo`` column is the run's ``echo``), ``statistic``,
    ``published``, ``this_run`` (NaN where the run has no such probe) and ``reproduced`` (counts equal, the rest less
    than :data:`PUBLISHED_DIGIT_MS` apart)."""
    rows = []
    for column, figures in published.items():
        probe = "ping" if column == "ping" else echo
        for statistic, value in figures.items():
            have = probe is not None and probe in table.columns and statistic in table.index
            this = float(table.at[statistic, probe]) if have else float("nan")
            same = (this == value) if statistic == "count" else abs(this - value) < PUBLISHED_DIGIT_MS
            rows.append({"column": column, "probe": probe if have else None, "statistic": statistic,
                         "published": value, "this_run": this, "reproduced": bool(have and same)})
    return pd.DataFrame(rows)


def lost_findings(tally: pd.DataFrame, probes: list[str]) -> list[str]:
    """The probes that went unanswered in this run (:func:`sample_tally`), counted and never trimmed; none when
    every probe was answered."""
    lost = [(p, int(tally.at[p, "lost"]), int(tally.at[p, "rows"])) for p in probes if tally.at[p, "lost"] > 0]
    if not lost:
        return []
    return ["Unanswered probes, counted as lost (rows with ok = False, never trimmed, never a sample): "
            + "; ".join(f"{p} {n} of its {rows} rows" for p, n, rows in lost) + "."]


def strict_reading_findings(samples: pd.DataFrame, original: pd.DataFrame, dropped: pd.DataFrame,
                            strict_cells: int) -> list[str]:
    """What the strict 2016 patterns lose of this run (the write-up's silent drop: :func:`lost_by_2016`'s
    ``dropped``), and whether the ones lost for their unit are the probe's slowest; or that they lose nothing.
    ``strict_cells`` is how many of the run's logs those patterns apply to (none: nothing is said of them)."""
    if not strict_cells:
        return []
    if dropped.empty:
        return [f"The strict 2016 reading (times written in ms only) finds all {len(original)} samples labkit's "
                "parsers read in the logs it applies to: it loses none of this run's."]
    parts = []
    for (probe, reason), group in dropped.groupby(["probe", "reason"], sort=False):
        values = ", ".join(f"{v:.3f} ms" for v in group["rtt_ms"].head(5))
        parts.append(f"{probe} {len(group)} ({reason}: seq {_seqs(group)}; {values})")
    said = [f"The strict 2016 reading finds {len(original)} of the {int(samples['ok'].sum())} samples labkit's "
            f"parsers read and loses {len(dropped)} without a count: " + "; ".join(parts) + "."]
    for probe, group in dropped.groupby("probe", sort=False):
        coarse = group[group["unit"] != "ms"]
        answered = samples.loc[samples["ok"] & (samples["probe"] == probe), "rtt_ms"]
        if len(coarse) and set(coarse.index) == set(answered.nlargest(len(coarse)).index):
            said.append(f"The {len(coarse)} {probe} samples it loses for their unit are that probe's {len(coarse)} "
                        f"slowest of {len(answered)} (from {coarse['rtt_ms'].min():.3f} ms): the strict reading cuts "
                        "the tail before any trim does.")
    return said


def published_findings(variants: dict[str, dict], probes: list[str], echo: str | None, *, threshold: float,
                       passes: int, published: dict = PUBLISHED_2016) -> list[str]:
    """Whether the strict reading of this run, trimmed as the write-up trimmed (the ``original`` variant), gives the
    published table, cell by cell (:func:`against_published`); what differs, when some cell does."""
    original = variants["original"]
    how = (f"the strict reading, trimmed pooled at |z| < {threshold:g} in {passes} passes"
           + ("" if (threshold, passes) == (PUBLISHED_TRIM["threshold"], PUBLISHED_TRIM["passes"])
              else f" (the write-up's trim: |z| < {PUBLISHED_TRIM['threshold']:g}, {PUBLISHED_TRIM['passes']} passes)"))
    if not len(original["kept"]):
        return [f"The published 2016 table: {how} finds no sample in this run, so none of its cells is reproduced."]
    cells = against_published(original["table"], echo, published)
    comparable = cells[cells["probe"].notna()]
    reproduced = comparable[comparable["reproduced"]]
    medians = "; ".join(f"{p} n = {int(original['table'].at['count', p])}, median "
                        f"{original['table'].at['50%', p]:.4f} ms" for p in comparable["probe"].unique())
    rule = f"counts equal, the rest within {PUBLISHED_DIGIT_MS:g} ms, the table's last digit"
    text = (f"The published 2016 table: {how}, reproduces {len(reproduced)} of its {len(cells)} cells ({rule}; "
            f"{medians})")
    missing = cells[cells["probe"].isna()]["column"].unique()
    if len(missing):
        text += f"; this run has no probe for its {', '.join(missing)} column"
    differing = comparable[~comparable["reproduced"]]
    if len(differing):
        shown = [f"{r.probe} {r.statistic} {r.this_run:g} against {r.published:g}" for r in differing.head(4).itertuples()]
        more = f" and {len(differing) - 4} more" if len(differing) > 4 else ""
        text += "; it differs in " + ", ".join(shown) + more
    return [text + "."]


def pooled_trim_findings(variants: dict[str, dict], probes: list[str], *, threshold: float, passes: int) -> list[str]:
    """What parsing every sample does to the pooled trim (the ``original`` and ``corrected_pooled`` variants: does
    the trimmed table move, and the first pass's cut-off with it), and whether a pooled pass could cut a fast
    sample at all (every low cut-off below the fastest sample: the pooled z-scores cut the slow end only)."""
    said = []
    original, pooled = variants["original"], variants["corrected_pooled"]
    trim = f"|z| < {threshold:g}, {passes} passes"
    if original["trim"] is not None and pooled["trim"] is not None:
        moves = [p for p in probes if p in original["table"].columns and
                 (original["table"].at["count", p] != pooled["table"].at["count", p]
                  or original["table"].at["max", p] != pooled["table"].at["max", p])]
        first_o, first_c = original["trim"].cutoffs.iloc[0], pooled["trim"].cutoffs.iloc[0]
        if moves:
            said.append(f"With every sample parsed and the same pooled trim ({trim}), the trimmed table moves: "
                        + "; ".join(f"{p} n {int(original['table'].at['count', p])} → "
                                    f"{int(pooled['table'].at['count', p])}, max {original['table'].at['max', p]:.3f} → "
                                    f"{pooled['table'].at['max', p]:.3f} ms" for p in moves)
                        + f"; the first pass's high cut-off goes from {first_o['high']:.2f} to {first_c['high']:.2f} ms "
                        f"(σ of the {int(first_o['n'])} and {int(first_c['n'])} pooled values: {first_o['scale']:.2f} "
                        f"and {first_c['scale']:.2f} ms).")
        else:
            said.append(f"With every sample parsed and the same pooled trim ({trim}), the trimmed table keeps the "
                        "count and the max of every probe: " + ", ".join(
                            f"{p} n = {int(pooled['table'].at['count', p])}" for p in probes
                            if p in pooled["table"].columns) + ".")
    if len(probes) > 1 and pooled["trim"] is not None:
        answered = pooled["data"][pooled["data"]["ok"]]
        fastest = float(answered["rtt_ms"].min())
        lows = pooled["trim"].cutoffs["low"]
        if (lows < fastest).all():
            medians = answered.groupby("probe")["rtt_ms"].median()
            said.append(f"No pass of the pooled trim can remove a fast sample: scored together (medians "
                        + ", ".join(f"{p} {medians[p]:.2f}" for p in probes if p in medians) + " ms), its low cut-offs "
                        f"({', '.join(_ms(v, 2) for v in lows)} ms) lie below the fastest of the {len(answered)} "
                        f"samples ({fastest:.3f} ms): it cuts the slow end only.")
    return said


def own_trim_findings(variants: dict[str, dict], probes: list[str], *, threshold: float, passes: int,
                      by_passes: pd.DataFrame | None = None) -> list[str]:
    """What the trim within each probe keeps (and each probe's ceiling against the pooled trim's), and whether the
    last variant's trim converges with more passes (``by_passes``: :func:`kept_by_passes`)."""
    said = []
    pooled = variants["corrected_pooled"]
    own = next((v for name, v in variants.items() if name.startswith("corrected_") and v["scope"] != "pooled"), None)
    if own is not None and own["trim"] is not None:
        counts = own["trim"].counts
        parts = []
        for p in probes:
            text = (f"{p} keeps {int(own['table'].at['count', p])} of its {int(counts.at[p, 'eligible'])} samples, "
                    f"max {own['table'].at['max', p]:.3f} ms")
            if own["table"].at["max", p] < pooled["table"].at["max", p]:
                text += f" (pooled: {pooled['table'].at['max', p]:.3f} ms)"
            parts.append(text)
        said.append(f"Trimmed within each probe (|z| < {threshold:g}, {passes} passes): " + "; ".join(parts) + ".")
    if by_passes is not None and len(by_passes) > 1:
        counts = "; ".join(f"{p} {', '.join(str(int(n)) for n in by_passes[p])}" for p in by_passes.columns)
        after = ", ".join(map(str, by_passes.index))
        scope = own["scope"] if own is not None else "pooled"
        if trim_converged(by_passes):
            said.append(f"The {scope} trim (|z| < {threshold:g}) converges: it keeps {counts} samples after {after} "
                        f"passes, the same after {by_passes.index[-2]} and {by_passes.index[-1]}.")
        else:
            said.append(f"The {scope} trim (|z| < {threshold:g}) does not converge: it keeps {counts} samples after "
                        f"{after} passes, so its table is a choice of the number of passes, not a property of the data.")
    return said


def gap_findings(comparison, echo: str, ping_median: float, *, cold: bool,
                 published: dict = PUBLISHED_2016) -> list[str]:
    """The echo's median over ping's, untrimmed (``comparison``: :func:`median_gap`), against the published medians'
    gap; and, for an echo that dialled a new connection per call (``cold``), whether the gap holds the round trip a
    TCP handshake costs (its interval's low end above ping's median round trip)."""
    gap = comparison
    published_gap = published["echo"]["50%"] - published["ping"]["50%"]
    inside = gap.low <= published_gap <= gap.high
    said = [f"Median {echo} − median ping, every sample untrimmed: {gap.difference:.2f} ms (95 % block-bootstrap "
            f"interval [{gap.low:.2f}, {gap.high:.2f}] ms; n = {gap.n_a} ping, {gap.n_b} {echo}); the published "
            f"medians' gap, {published['echo']['50%']:g} − {published['ping']['50%']:g} = {published_gap:.3f} ms (after "
            f"the pooled trim), lies {'inside' if inside else 'outside'} it."]
    if cold:
        ratio = gap.difference / ping_median
        if gap.low > ping_median:
            said.append(f"Every {echo} call dialled a new connection: the gap is {ratio:.2f} times ping's median round "
                        f"trip ({ping_median:.2f} ms), its interval's low end ({gap.low:.2f} ms) above one round trip, "
                        "so it holds the TCP handshake's round trip besides the call; how the rest divides between "
                        "connection set-up, gRPC and the Go programs, these logs do not say.")
        else:
            said.append(f"Every {echo} call dialled a new connection, yet the gap's interval reaches below one of "
                        f"ping's median round trips ({gap.low:.2f} against {ping_median:.2f} ms; {ratio:.2f} round "
                        "trips): the two probes did not see the same path, or the echo's times leave out its "
                        "handshake.")
    return said


def claims(variants: dict[str, dict], echo: str | None, *, dropped: pd.DataFrame, by_passes: pd.DataFrame | None = None,
           comparison=None, ping_median: float | None = None, published: dict = PUBLISHED_2016) -> dict[str, bool]:
    """The predicates the findings rest on, each on this run's numbers:

    - ``published_table``: the strict reading, trimmed as the write-up trimmed, reproduces every published cell
      (:func:`against_published`; False for a run without an echo probe, whose echo column cannot be);
    - ``strict_reading_loses``: the strict 2016 patterns lose samples labkit's parsers read;
    - ``trim_converges``: the last variant's trim keeps the same samples after its two largest numbers of passes;
    - ``published_gap_inside``: the published medians' gap lies in this run's untrimmed gap's 95 % interval;
    - ``gap_over_a_round_trip``: that interval's low end is above ping's median round trip (room for a handshake).
    """
    cells = against_published(variants["original"]["table"], echo, published) if len(variants["original"]["kept"]) else None
    held = {"published_table": cells is not None and bool(cells["reproduced"].all()),
            "strict_reading_loses": not dropped.empty}
    if by_passes is not None and len(by_passes) > 1:
        held["trim_converges"] = trim_converged(by_passes)
    if comparison is not None:
        held["published_gap_inside"] = published_gap_reproduced(comparison, published)
        if ping_median is not None:
            held["gap_over_a_round_trip"] = bool(comparison.low > ping_median)
    return held


def published_gap_reproduced(comparison, published: dict = PUBLISHED_2016) -> bool:
    """Whether the published medians' gap (echo − ping) lies in this run's untrimmed gap's 95 % interval."""
    published_gap = published["echo"]["50%"] - published["ping"]["50%"]
    return bool(comparison.low <= published_gap <= comparison.high)
