"""The tuning notebook's rules: each grpc knob off and on under the same load, an A/A control, keepalive when idle.

The tuning article (research brief, experiment 5) makes claims about
keepalive, connection pools, message sizes and streaming. A ``labkit load`` run
varies those knobs; these functions pair cells that differ in one knob only and
compare their calls (p50, p99) and their req/s per time bin, each with a
seeded block-bootstrap interval (a cell's calls, in time order, are not
independent: labkit.analysis.inference), and call a difference only where it
survives Holm's correction over every comparison of the table, those it could
not test counted; a difference not called states the smallest one the table
could have called (its minimum detectable effect). A keepalive
interval longer than a cell never fires, so its off/on pairs are an A/A
control: how far apart two cells come out when nothing on the wire differs.

A stream cell's call is one ``EchoStream`` of ``messages_per_call`` requests.
Its latency stays the call's own: ghz times the whole stream, not each message
in it, and a stream's latency divided by its messages is a time no message
waited (each waits at least a round trip). req/s counts messages. At the same
concurrency a stream cell has ``messages_per_call`` times the messages in
flight of a unary one, so the rpc pair compares two loads, not two ways of
carrying one.
"""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple

import numpy as np
import pandas as pd

from labkit.analysis.idle import stack_labels
from labkit.analysis.load import per_request_file
from labkit.analysis.summary import _p99, summarize_with_location
from labkit.analysis.windows import measured_window, window_start
from labkit.parsers import parse_ghz_json

#: knob -> the cell column it changes: the article's knobs, and the server's implementation and grpc options
#: (a run with --server-impl python,go, or with --grpc-option values, compares them the same way).
KNOB_COLUMNS = {"keepalive": "ka", "pool": "connections", "payload": "payload_bytes", "compression": "compression",
                "rpc": "rpc", "server": "server_impl", "options": "grpc_options"}
#: What each comparison reports: the calls' median and p99, and req/s per bin.
METRICS = ("p50", "p99", "rps")
# A knob's pairs differ in it alone; in this order its "where" names the others.
_SETTINGS = ["server_impl", "grpc_options", "concurrency", "connections", "ka", "payload_bytes", "compression", "rpc"]
_NUMERIC = {"ka", "connections", "payload_bytes"}
#: The "off" value of each knob that is not a number (a number's off is its smallest value).
_OFF = {"server_impl": "python", "grpc_options": "none", "compression": "none", "rpc": "unary"}


class Knob(NamedTuple):
    """A knob the run varies: its cell column, its off value, the values compared against off, and what that means."""

    column: str
    off: object
    on: tuple
    meaning: str


def ghz_cells(cells: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(cells with a ghz report, the others): the claims are about gRPC.

    Kept cells get ``setting`` (the knobs: ``conns=1 ka=none``, then ``gzip``,
    ``stream=10`` and the server's stack where they apply), ``condition``
    (concurrency and payload, then the setting) and ``ka`` (0: none).
    """
    has_report = cells["raw_files"].map(lambda names: per_request_file(names, "ghz") is not None)
    kept = cells[(cells["tool"] == "ghz") & has_report].reset_index(drop=True)
    ka = kept["keepalive_ms"].map(lambda k: "none" if pd.isna(k) else f"{int(k)}ms")
    stack = stack_labels(kept)
    kept = kept.assign(**{column: kept.get(column, pd.Series(value, index=kept.index)).fillna(value)
                          for column, value in (("compression", "none"), ("rpc", "unary"), ("messages_per_call", 1))})
    setting = [f"conns={n} ka={k}" + ("" if z == "none" else f" {z}") + (f" stream={m}" if r == "stream" else "")
               for n, k, z, r, m in zip(kept["connections"], ka, kept["compression"], kept["rpc"], kept["messages_per_call"])]
    if stack.nunique() > 1:  # the server's stack, named only when the run has several
        setting = [f"{text} {label}" for text, label in zip(setting, stack)]
    kept = kept.assign(
        setting=setting,
        condition=[f"c={c} {p}B {text}" for c, p, text in zip(kept["concurrency"], kept["payload_bytes"], setting)],
        ka=kept["keepalive_ms"].fillna(0).astype(int), stack=stack,
        # Named values rather than nulls, so that pairs group on them (groupby leaves null keys out).
        server_impl=kept.get("server_impl", pd.Series("python", index=kept.index)).fillna("python"),
        grpc_options=kept.get("grpc_options", pd.Series(None, index=kept.index, dtype=object)).fillna("none"),
    )
    return kept, cells[(cells["tool"] != "ghz") | ~has_report]


def binned_calls(text: str, row, bin_s: float) -> pd.DataFrame:
    """One cell's calls in its measured window (from its ghz report ``text``), each with the ``bin`` of ``bin_s`` seconds
    it started in, and its ``messages`` (a stream call's ``latency_ms`` is the whole stream's, as ghz timed it)."""
    report = parse_ghz_json(text).rows
    calls = measured_window(report, float(row["warmup_s"]), float(row["duration_s"]))
    offset_s = (calls["t_utc"] - window_start(report, float(row["warmup_s"]))).dt.total_seconds()
    messages = int(row.get("messages_per_call", 1))
    return calls.assign(cell_id=row["cell_id"], bin=(offset_s // bin_s).astype(int), messages=messages)


def rps_bins(calls: pd.DataFrame, n_bins: int, bin_s: float) -> np.ndarray:
    """Requests per second in each bin of the window (the messages of successful calls), empty bins counted as 0."""
    counts = calls[calls["ok"]].groupby("bin")["messages"].sum().reindex(range(n_bins), fill_value=0)
    return counts.to_numpy(dtype=float) / bin_s


def knob_range(cells: pd.DataFrame) -> dict[str, Knob]:
    """Every knob the run varies, as a :class:`Knob`.

    A number's off is its smallest value and every other value is compared
    with it (pools of 2, 4 and 8 connections each against 1); the server is
    python off, options none, compression none, the RPC unary. A knob
    without its off value among the cells is not compared.
    """
    knobs = {}
    for knob, column in KNOB_COLUMNS.items():
        if column not in cells:
            continue
        if column in _NUMERIC:
            values = sorted(int(v) for v in cells[column].unique())
            off = values[0]
        else:
            values, off = sorted(cells[column].unique()), _OFF[column]
        if len(values) < 2 or off not in values:
            continue
        on = tuple(v for v in values if v != off)
        knobs[knob] = Knob(column, off, on, ", ".join(level_meaning(knob, v, off) for v in on))
    return knobs


def level_meaning(knob: str, on, off) -> str:
    """What one level of a knob means against its off value, e.g. ``4 connections vs 1``."""
    if knob == "keepalive":
        return f"keepalive {on} ms vs {off or 'none'}" + (" ms" if off else "")
    return {"pool": f"{on} connections vs {off}", "payload": f"{on} B vs {off} B", "compression": f"{on} vs {off}",
            "rpc": f"{on} vs {off} (per call; req/s per message)", "server": f"{on} server vs {off}", "options": f"server {on} vs none"}[knob]


def compare_knobs(cells: pd.DataFrame, calls: dict[str, pd.DataFrame], knobs: dict, *, n_bins: int, bin_s: float,
                  n_resamples: int = 2000) -> pd.DataFrame:
    """One row per pair of cells that differ in one knob only: off, on, on − off and its interval, and a verdict per metric.

    ``calls`` maps a cell id to its :func:`binned_calls`. Each metric's
    ``<metric>_p`` is its p-value (:func:`labkit.analysis.inference.two_sample_difference`
    of the cells' calls in the order they started, or of their req/s bins),
    ``<metric>_p_holm`` the same corrected for every comparison in the table
    (all pairs, all metrics), and the verdict is "higher" or "lower" only
    where the corrected p is below 0.05: with dozens of comparisons, some
    would pass alone by chance. A comparison without a p-value (a side with
    fewer than two successful calls, a p99 from fewer calls than can bound
    it, bins that did not vary) is "not testable" and still counts in the
    table's family; an "unclear" one has its ``<metric>_mde`` (see
    :func:`call_metrics`).
    """
    rows = []
    for knob, spec in knobs.items():
        for on in spec.on:
            rows += _level_pairs(cells, calls, knob, spec, on, n_bins=n_bins, bin_s=bin_s, n_resamples=n_resamples)
    columns = list(dict.fromkeys(key for row in rows for key in row)) or ["knob", "where", "concurrency"]
    diffs = pd.DataFrame(rows, columns=columns)
    return diffs if diffs.empty else call_metrics(diffs, "diff")


def call_metrics(table: pd.DataFrame, estimate: str) -> pd.DataFrame:
    """``table`` with every metric's comparisons called as one family (:func:`labkit.analysis.inference.call_family`,
    Holm's correction over every row and metric, the untestable counted): ``<metric>_p_holm``,
    ``<metric>_verdict`` (higher, lower, unclear, not testable) and ``<metric>_mde``, the smallest difference the
    family could have called where the verdict is unclear. The table gives each metric's ``<metric>_<estimate>``,
    ``_p``, ``_se`` and ``_df``."""
    from labkit.analysis.inference import call_family

    def family(column: str) -> np.ndarray:
        return table[[f"{m}_{column}" for m in METRICS]].to_numpy(dtype=float)

    calls = call_family(family(estimate).ravel(), family("p").ravel(), family("se").ravel(), family("df").ravel())
    shape = (len(table), len(METRICS))
    for i, metric in enumerate(METRICS):
        table[f"{metric}_p_holm"] = calls.adjusted.reshape(shape)[:, i]
        table[f"{metric}_verdict"] = calls.verdict.reshape(shape)[:, i]
        table[f"{metric}_mde"] = calls.mde.reshape(shape)[:, i]
    return table


def called(verdicts: pd.Series) -> pd.Series:
    """Which verdicts call a difference (higher or lower): not the unclear, nor the not testable."""
    return verdicts.isin(("higher", "lower"))


def _level_pairs(cells, calls, knob: str, spec: Knob, on, *, n_bins: int, bin_s: float, n_resamples: int) -> list[dict]:
    """The compared pairs of one level of a knob against its off value (see :func:`compare_knobs`)."""
    rest = [c for c in _SETTINGS if c != spec.column]
    pairs = []
    for key, group in cells[cells[spec.column].isin([spec.off, on])].groupby(rest):
        pair = {value: group[group[spec.column] == value] for value in (spec.off, on)}
        if all(len(frame) == 1 for frame in pair.values()):
            pairs.append((dict(zip(rest, key)), pair[spec.off].iloc[0], pair[on].iloc[0]))
    shown = _label_rule(rest, [where for where, _, _ in pairs])
    rows = []
    for where, a_row, b_row in pairs:
        a, b = calls[a_row["cell_id"]], calls[b_row["cell_id"]]
        compared = _compare_cells(a, b, n_bins=n_bins, bin_s=bin_s, n_resamples=n_resamples)
        named_settings = [setting_label(k, where[k]) for k in rest if shown(k, where[k])]
        if len(named_settings) == 1 and any(shown(k, v) for w, _, _ in pairs for k, v in w.items() if k != "concurrency"):
            named_settings.append("baseline")  # the usual value of every other setting, where the others name theirs
        label = " ".join(named_settings)
        if len(spec.on) > 1:  # several levels: each pair says which
            label = f"{setting_label(spec.column, on)}: {label}"
        # The settings as columns: the numbers always, the others where the run varies them.
        named = {k: v for k, v in where.items() if k in _NUMERIC or k == "concurrency" or cells[k].nunique() > 1}
        row = {"knob": knob, "meaning": level_meaning(knob, on, spec.off), "where": label,
               **{k: int(v) if k in _NUMERIC or k == "concurrency" else v for k, v in named.items()},
               "off_cell": a_row["cell_id"], "on_cell": b_row["cell_id"]}
        for metric, (off_value, on_value, difference) in compared.items():
            row.update({f"{metric}_off": off_value, f"{metric}_on": on_value, f"{metric}_diff": difference.difference,
                        f"{metric}_lo": difference.low, f"{metric}_hi": difference.high, f"{metric}_p": difference.pvalue,
                        f"{metric}_se": difference.se, f"{metric}_df": difference.df,
                        f"{metric}_n": min(difference.n_a, difference.n_b)})
        rows.append(row)
    return rows


def _compare_cells(a: pd.DataFrame, b: pd.DataFrame, *, n_bins: int, bin_s: float, n_resamples: int) -> dict:
    """metric -> (off value, on value, :class:`~labkit.analysis.inference.Difference`) of two cells' calls, in the
    order they started (their dependence is what the block bootstrap keeps), and of their req/s bins in time order,
    each as :func:`~labkit.analysis.inference.two_sample_difference` compares them. A p99 from fewer calls than can
    bound it (299) is not given: not testable."""
    from labkit.analysis.inference import Difference, min_samples_for_percentile, two_sample_difference

    latencies = [frame.loc[frame["ok"]].sort_values("t_utc")["latency_ms"].to_numpy(dtype=float) for frame in (a, b)]
    rates = [rps_bins(frame, n_bins, bin_s) for frame in (a, b)]
    nan = float("nan")

    def of_each(statistic, values) -> tuple[float, float]:
        return tuple(float(statistic(side)) if len(side) else nan for side in values)

    options = {"time_ordered": True, "n_resamples": n_resamples}
    compared = {"p50": (*of_each(np.median, latencies), two_sample_difference(*latencies, np.median, **options))}
    if min(map(len, latencies)) >= min_samples_for_percentile(99):
        compared["p99"] = (*of_each(_p99, latencies), two_sample_difference(*latencies, _p99, **options))
    else:
        compared["p99"] = (nan, nan, Difference(nan, nan, nan, nan, *map(len, latencies), "none", "p99"))
    compared["rps"] = (*of_each(np.mean, rates), two_sample_difference(*rates, np.mean, **options))
    return compared


def _label_rule(columns: list[str], wheres: list[dict]):
    """Which settings a pair's label names: the concurrency always; a setting crossed with the others (each of its
    values in as many pairs) always; another (a one-at-a-time run's knobs) only where it is not at its usual value.
    Settings with one value among the pairs are never named."""
    counts = {k: Counter(str(where[k]) for where in wheres) for k in columns}

    def shown(column: str, value) -> bool:
        seen = counts[column]
        if column == "concurrency" or (len(seen) > 1 and len(set(seen.values())) == 1):
            return True
        return len(seen) > 1 and str(value) != seen.most_common(1)[0][0]
    return shown


def setting_label(column: str, value) -> str:
    """One setting as a pair's label names it: ``c=10``, ``64B``, ``conns=4``, ``ka=none``, ``rpc=stream``."""
    if column == "concurrency":
        return f"c={value}"
    if column == "payload_bytes":
        return f"{value}B"
    if column == "connections":
        return f"conns={value}"
    if column == "ka":
        return f"ka={value or 'none'}"
    return f"{column}={value}"


def aa_control(diffs: pd.DataFrame, knobs: dict, cell_s: float) -> dict | None:
    """The keepalive pairs as an A/A control, when keepalive is off against an interval longer than a cell (never fires).

    Returns None without such pairs; else ``noise`` (the largest |on − off|
    per metric), ``excluding`` (how many were called a difference anyway, after the correction) and
    ``pairs``. Marks ``<metric>_beyond_null`` in ``diffs`` for the other
    knobs: a difference larger than the noise and called after the correction.
    """
    keepalive = knobs.get("keepalive")
    if keepalive is None or keepalive.off != 0 or min(keepalive.on) / 1000 <= cell_s:
        return None
    null = diffs[diffs["knob"] == "keepalive"]
    noise = {m: float(null[f"{m}_diff"].abs().max()) if len(null) else float("nan") for m in METRICS}
    excluding = {m: int(called(null[f"{m}_verdict"]).sum()) if len(null) else 0 for m in METRICS}
    for knob in (k for k in knobs if k != "keepalive"):
        frame = diffs[diffs["knob"] == knob]
        for m in METRICS:
            diffs.loc[frame.index, f"{m}_beyond_null"] = (frame[f"{m}_diff"].abs() > noise[m]) & called(frame[f"{m}_verdict"])
    return {"noise": noise, "excluding": excluding, "pairs": len(null)}


def diffs_between_runs(per_run: list[pd.DataFrame], confidence: float = 0.95) -> pd.DataFrame:
    """The comparisons of :func:`compare_knobs` in several runs of the same cells, one row per compared pair (by
    ``knob``, ``where`` and the two cells): each metric's on − off in every run (``<metric> run 1``, ...), their
    mean with its Student-t interval over the runs (``_mean``, ``_lo``, ``_hi``: the runs as units, see
    :func:`labkit.analysis.inference.one_sample_t`), a one-sample t-test of the runs' differences against 0 (``_p``;
    NaN, not testable, where every run gave the same difference: req/s counted in whole steps can), and the verdict
    after Holm's correction over every comparison and metric of the table, the untestable counted
    (:func:`call_metrics`: ``_verdict``, and ``_mde`` for the unclear). Unlike the within-cell intervals of one run,
    these include how far a cell moves from one run to the next; with three runs a t-test has two degrees of
    freedom, so only a difference several times larger than the runs' spread is called, and ``_mde`` says how
    much larger."""
    from labkit.analysis.inference import one_sample_t

    keys = ["knob", "where", "off_cell", "on_cell"]
    frames = [d.set_index(keys) for d in per_run]
    rows = []
    for key in frames[0].index:
        row = dict(zip(keys, key))
        for metric in METRICS:
            values = np.array([f.at[key, f"{metric}_diff"] if key in f.index else np.nan for f in frames], dtype=float)
            row.update({f"{metric} run {i}": v for i, v in enumerate(values, 1)})
            over_runs = one_sample_t(values, confidence)
            row.update({f"{metric}_mean": over_runs.difference, f"{metric}_lo": over_runs.low,
                        f"{metric}_hi": over_runs.high, f"{metric}_p": over_runs.pvalue, f"{metric}_se": over_runs.se,
                        f"{metric}_df": over_runs.df})
        rows.append(row)
    table = pd.DataFrame(rows)
    return table if table.empty else call_metrics(table, "mean")


def runs_verdict_headline(between: pd.DataFrame) -> dict:
    """Headline fields of :func:`diffs_between_runs`: the runs, the comparisons, how many were called and how many
    could not be tested per metric, and of the keepalive (A/A) comparisons how many were called."""
    runs = len([c for c in between.columns if c.startswith("p50 run ")])
    headline: dict = {"runs": runs, "runs.comparisons": int(len(between))}
    aa = between[between["knob"] == "keepalive"] if len(between) else between
    for metric in METRICS:
        headline[f"runs.called.{metric}"] = int(called(between[f"{metric}_verdict"]).sum()) if len(between) else 0
        headline[f"runs.not_testable.{metric}"] = (int((between[f"{metric}_verdict"] == "not testable").sum())
                                                   if len(between) else 0)
        headline[f"runs.aa_called.{metric}"] = int(called(aa[f"{metric}_verdict"]).sum()) if len(aa) else 0
    headline["runs.aa_pairs"] = int(len(aa))
    return headline


def beyond_null(diffs: pd.DataFrame, knobs: list[str]) -> pd.DataFrame:
    """Per knob and metric: pairs compared, and those beyond the A/A differences, higher and lower, and where."""
    def beyond(knob, metric, sign=None):
        picked = diffs["knob"].eq(knob) & diffs.get(f"{metric}_beyond_null", pd.Series(False, index=diffs.index)).eq(True)
        return picked if sign is None else picked & (np.sign(diffs[f"{metric}_diff"]) == sign)

    return pd.DataFrame(
        [{"knob": knob, "metric": metric, "compared": int((diffs["knob"] == knob).sum()),
          "beyond, higher": int(beyond(knob, metric, 1).sum()), "beyond, lower": int(beyond(knob, metric, -1).sum()),
          "where": "; ".join(diffs[beyond(knob, metric)]["where"])}
         for knob in knobs for metric in METRICS],
        columns=["knob", "metric", "compared", "beyond, higher", "beyond, lower", "where"],
    ).set_index(["knob", "metric"])


def idle_keepalive(calls: pd.DataFrame, n_resamples: int = 2000) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Keepalive on against off on an idle connection: each setting's latency in ping RTTs per size, and on − off per
    size, called as one family.

    ``calls`` are an idle-step run's warm, successful calls under one
    condition but the keepalive (a ``keepalive`` label, "none" when off), with
    ``rtt_ms`` and ``rtt_multiple``. The first table is the location of
    ``rtt_multiple`` per setting and size with its interval
    (:func:`labkit.analysis.summary.summarize_with_location`: below ten calls,
    their mean and Student's t interval). The second has one row per size and setting:
    on − off in ms (:func:`labkit.analysis.inference.two_sample_difference`:
    Welch's t below ten calls a side), its interval and p-value, and the
    verdict after Holm's correction over every size and setting
    (:func:`labkit.analysis.inference.call_table`), with ``mde_ms`` where it
    is unclear. A size without two calls a side is listed, not testable.
    """
    from labkit.analysis.inference import call_table, two_sample_difference

    table = summarize_with_location(calls, "rtt_multiple", by=["keepalive", "payload_bytes"], n_resamples=n_resamples)
    rows, results = [], []
    for size in sorted(calls["payload_bytes"].unique()):
        off = calls[(calls["keepalive"] == "none") & (calls["payload_bytes"] == size)]["rtt_ms"]
        for setting in sorted(k for k in calls["keepalive"].unique() if k != "none"):
            on = calls[(calls["keepalive"] == setting) & (calls["payload_bytes"] == size)]["rtt_ms"]
            result = two_sample_difference(off, on, n_resamples=n_resamples)
            results.append(result)
            rows.append({"keepalive": setting, "payload_bytes": int(size), "n": f"{result.n_a}/{result.n_b}",
                         "off_rtt": table["value"].get(("none", size), np.nan),
                         "on_rtt": table["value"].get((setting, size), np.nan), "statistic": result.statistic,
                         "diff_ms": result.difference, "lo_ms": result.low, "hi_ms": result.high, "p": result.pvalue})
    diffs = pd.DataFrame(rows)
    return table, (call_table(diffs, results, "ms").rename(columns={"mde": "mde_ms"}) if results else diffs)


def knob_table(diffs: pd.DataFrame, knob: str) -> pd.DataFrame:
    """One knob's pairs as a person reads them: per metric, off → on, and on − off [interval] with its verdict (an
    unclear one with the smallest difference the table could have called: its MDE)."""
    from labkit.analysis.inference import verdict_text

    frame = diffs[diffs["knob"] == knob]
    shown = pd.DataFrame({"where": frame["where"]})
    for metric, unit in (("p50", "ms"), ("p99", "ms"), ("rps", "req/s")):
        shown[f"{metric} off → on ({unit})"] = [f"{x:.1f} → {y:.1f}" for x, y in zip(frame[f"{metric}_off"], frame[f"{metric}_on"])]
        shown[f"{metric} on − off [95 % CI]"] = [f"{d:+.1f} [{lo:+.1f}, {hi:+.1f}] {verdict_text(v, mde, unit)}" for d, lo, hi, v, mde in zip(
            frame[f"{metric}_diff"], frame[f"{metric}_lo"], frame[f"{metric}_hi"], frame[f"{metric}_verdict"],
            frame[f"{metric}_mde"])]
    return shown.set_index("where")


def verdict_headline(diffs: pd.DataFrame) -> dict[str, float]:
    """Per knob: pairs compared and, per metric, the range of on − off and how many were called higher, lower or
    neither after Holm's correction (``ci_higher``, ``ci_lower``, ``ci_unclear``: the keys of earlier reports), and
    how many could not be tested (``ci_not_testable``)."""
    headline: dict[str, float] = {}
    for knob in KNOB_COLUMNS:
        frame = diffs[diffs["knob"] == knob]
        headline[f"{knob}.compared"] = int(len(frame))
        for metric in METRICS if len(frame) else []:
            verdicts = frame[f"{metric}_verdict"].value_counts()
            headline[f"{knob}.{metric}.diff_min"] = round(float(frame[f"{metric}_diff"].min()), 2)
            headline[f"{knob}.{metric}.diff_max"] = round(float(frame[f"{metric}_diff"].max()), 2)
            for name in ("higher", "lower", "unclear", "not testable"):
                headline[f"{knob}.{metric}.ci_{name.replace(' ', '_')}"] = int(verdicts.get(name, 0))
    return headline
