"""The tuning claims compared fairly, from ``labkit load --grpc-tool labkit-go`` runs, where every message is timed.

ghz times a call, so a stream of ten requests and a unary call were compared at
the same concurrency: ten times the messages in flight on one side, and no
message inside the stream timed. labkit-go's load times each request from its
own send to its own answer (``message_p50_ms`` ... in a cell's row), so here:

- **streams and unary** are compared at the same *messages* in flight (unary
  at concurrency × messages per stream) as well as at the same calls in flight;
- **compression** on a payload it can shrink (``payload_kind`` text) beside
  random bytes, which it cannot;
- the article's **cumulative ladder** (``--design ladder``): each step against
  the one before, and everything against the default.

The units are the runs of a ``--runs`` group (each run's cells are one
measurement of each condition, under that run's servers, connections and
machine): each run gives one B − A per comparison and metric, and the runs'
mean gets a Student-t interval and a one-sample t-test (with three runs, two
degrees of freedom). One family per table, Holm's correction over all of its
rows, those not testable counted (:func:`labkit.analysis.inference.call_table`).
A cell's p99 is used only when it has the 299 messages a p99 needs.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from labkit.analysis.inference import (call_table, key_part, min_samples_for_percentile, one_sample_t,
                                      runs_t_interval)

#: metric -> (what it is, unit): each message's own latency, and the messages answered per second.
METRICS = {"message_p50_ms": ("p50 of a message", "ms"), "message_p99_ms": ("p99 of a message", "ms"),
           "messages_per_s": ("messages/s", "msg/s")}
CORRECTION = "Holm"


class Pair(NamedTuple):
    """One comparison: B − A, each side the cells matching its columns (one per run), and the messages each side
    keeps in flight."""

    comparison: str
    where: str
    a_label: str
    b_label: str
    a: dict
    b: dict
    a_in_flight: int
    b_in_flight: int


def _in_flight(cells: pd.DataFrame, match: dict) -> int:
    row = _rows(cells, match).iloc[0]
    return int(row["concurrency"] * row["messages_per_call"])


def message_cells(every_run: pd.DataFrame) -> pd.DataFrame:
    """The labkit-go cells of a group's samples (``replicate`` numbering the runs), with ``messages_per_s`` (answered
    messages over the window) and ``message_p99_ms`` blanked where a cell has fewer messages than a p99 needs."""
    cells = every_run[every_run["tool"] == "labkit-go"].copy()
    cells["messages_per_s"] = cells["messages_ok"] / cells["duration_s"]
    too_few = cells["messages_ok"] < min_samples_for_percentile(99)
    cells.loc[too_few, "message_p99_ms"] = np.nan
    return cells


def _size(payload_bytes: int) -> str:
    return f"{payload_bytes // 1024} KiB" if payload_bytes >= 1024 and payload_bytes % 1024 == 0 else f"{payload_bytes} B"


def stream_pairs(cells: pd.DataFrame) -> list[Pair]:
    """Every stream cell against unary calls at the same calls in flight and at the same messages in flight (unary
    at the stream's concurrency × its messages per call), where the run has them; one payload at a time."""
    pairs = []
    streams = cells[cells["rpc"] == "stream"][["payload_bytes", "concurrency", "messages_per_call"]].drop_duplicates()
    unary = cells[cells["rpc"] == "unary"]
    for payload, concurrency, messages in streams.itertuples(index=False):
        stream = {"rpc": "stream", "payload_bytes": payload, "concurrency": concurrency}
        for name, unary_concurrency in (("same calls in flight", concurrency),
                                        ("same messages in flight", concurrency * messages)):
            match = {"rpc": "unary", "payload_bytes": payload, "concurrency": unary_concurrency}
            if _rows(unary, match).empty:
                continue
            pairs.append(Pair(f"stream vs unary, {name}", f"{_size(int(payload))}, stream c={concurrency}",
                              f"unary c={unary_concurrency}", f"stream c={concurrency}×{messages}", match, stream,
                              _in_flight(cells, match), _in_flight(cells, stream)))
    return pairs


def compression_pairs(cells: pd.DataFrame) -> list[Pair]:
    """gzip against none, for each payload kind and size (and concurrency) the run has."""
    pairs = []
    keys = ["payload_kind", "payload_bytes", "concurrency", "rpc"]
    for kind, payload, concurrency, rpc in cells[keys].drop_duplicates().itertuples(index=False):
        where = dict(zip(keys, (kind, payload, concurrency, rpc)))
        if _rows(cells, {**where, "compression": "gzip"}).empty or _rows(cells, {**where, "compression": "none"}).empty:
            continue
        none, gzip = {**where, "compression": "none"}, {**where, "compression": "gzip"}
        pairs.append(Pair("gzip vs none", f"{kind} {_size(int(payload))}, c={concurrency}", "none", "gzip", none, gzip,
                          _in_flight(cells, none), _in_flight(cells, gzip)))
    return pairs


def ladder_steps(cells: pd.DataFrame) -> list[str]:
    """The ladder's steps in the order the run took them (``default`` first)."""
    steps = cells.dropna(subset=["ladder_step"]).sort_values("t_start_utc_ns")["ladder_step"]
    return list(dict.fromkeys(steps))


def ladder_pairs(cells: pd.DataFrame) -> list[Pair]:
    """Each step of a ``--design ladder`` run against the step before it, and the last (everything) against the
    default; one payload and concurrency at a time."""
    steps, pairs = ladder_steps(cells), []
    for payload, concurrency in cells[["payload_bytes", "concurrency"]].drop_duplicates().itertuples(index=False):
        where = {"payload_bytes": payload, "concurrency": concurrency}
        text = f"{_size(int(payload))}, c={concurrency}"
        sides = [(f"ladder {step}", before, step) for before, step in zip(steps, steps[1:])]
        if len(steps) > 2:
            sides.append(("ladder: all steps vs default", steps[0], steps[-1]))
        for comparison, before, step in sides:
            a, b = {**where, "ladder_step": before}, {**where, "ladder_step": step}
            pairs.append(Pair(comparison, text, before, "all steps" if comparison.startswith("ladder:") else step, a, b,
                              _in_flight(cells, a), _in_flight(cells, b)))
    return pairs


#: The ladder's steps as a figure labels them.
STEP_LABELS = {"+keepalive_ms": "+ keepalive", "+connections": "+ pool", "+codec": "+ vtproto", "+rpc": "+ streams"}


def step_label(step: str) -> str:
    """``+connections=4`` -> ``+ pool 4``; ``default`` as it is."""
    knob, _, value = step.partition("=")
    label = STEP_LABELS.get(knob)
    if label is None:
        return step
    return f"{label} {value}" if knob == "+connections" else label


def ladder_means(cells: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """Each ladder step's mean over the runs of each metric, with its Student-t interval over the runs (``lo``,
    ``hi``) and the runs it has: what the ladder figure draws."""
    rows = []
    for step in ladder_steps(cells):
        at = cells[cells["ladder_step"] == step]
        for metric in METRICS:
            mean, low, high = runs_t_interval(at[metric], confidence)
            rows.append({"step": step_label(step), "metric": metric, "mean": mean, "lo": low, "hi": high,
                         "runs": int(at[metric].notna().sum())})
    return pd.DataFrame(rows)


def _rows(cells: pd.DataFrame, match: dict) -> pd.DataFrame:
    mask = np.ones(len(cells), dtype=bool)
    for column, value in match.items():
        mask &= (cells[column] == value).to_numpy()
    return cells[mask]


def over_runs(cells: pd.DataFrame, pairs: list[Pair], confidence: float = 0.95) -> pd.DataFrame:
    """B − A of every pair and metric in each run, the runs' mean with its Student-t interval, and the verdict after
    Holm's correction over every row of the table. Columns: ``comparison``, ``where``, ``A``, ``B``, the messages
    each keeps in flight (``A in flight``, ``B in flight``), ``metric``,
    ``run 1`` ..., ``A mean``, ``B mean``, ``B / A`` (of the means), ``difference``, ``lo``, ``hi``, ``p``, ``runs``,
    then :func:`~labkit.analysis.inference.call_table`'s ``p_holm``, ``verdict``, ``mde`` and ``cell``."""
    replicates = sorted(cells["replicate"].unique())
    rows, results = [], []
    for pair in pairs:
        a_rows, b_rows = _rows(cells, pair.a).set_index("replicate"), _rows(cells, pair.b).set_index("replicate")
        for metric, (_, unit) in METRICS.items():
            a = np.array([a_rows[metric].get(r, np.nan) for r in replicates], dtype=float)
            b = np.array([b_rows[metric].get(r, np.nan) for r in replicates], dtype=float)
            result = one_sample_t(b - a, confidence)
            results.append(result)
            a_mean, b_mean = (float(np.nanmean(side)) if np.isfinite(side).any() else np.nan for side in (a, b))
            rows.append({"comparison": pair.comparison, "where": pair.where, "A": pair.a_label, "B": pair.b_label,
                         "A in flight": pair.a_in_flight, "B in flight": pair.b_in_flight, "metric": metric,
                         "unit": unit, **{f"run {r}": v for r, v in zip(replicates, b - a)},
                         "A mean": a_mean, "B mean": b_mean, "B / A": b_mean / a_mean if a_mean else np.nan,
                         "difference": result.difference, "lo": result.low, "hi": result.high, "p": result.pvalue,
                         "runs": result.n_a})
    if not rows:
        return pd.DataFrame()
    return call_table(pd.DataFrame(rows), results, method="holm")


#: The tuning article's own headline (research brief §5): ghz P50/P99 and QPS, default and with everything applied.
ARTICLE_LADDER = {"p50_ms": (30.0, 8.0), "p99_ms": (85.0, 18.0), "qps": (8000.0, 25000.0)}


def measured_on(manifest: dict, runs: int) -> str:
    """What a table's sentences say it was measured on: the emulated link as the emulator described it, both
    directions when they differ ("the link" without the emulator's record), and the runs, its n
    ("25 ms one way, no rate limit, 3 runs")."""
    return f"{link_of(manifest)}, {runs} run{'s' if runs != 1 else ''}"


def link_of(manifest: dict) -> str:
    """The emulated link as the emulator described it, both directions when they differ ("the link" without the
    emulator's record)."""
    windows = (manifest.get("emulator") or {}).get("windows") or [{}]
    described = list(dict.fromkeys((windows[0].get("links") or {}).values()))
    return " / ".join(described) if described else "the link"


def _verdicts(rows: pd.DataFrame) -> str:
    """``called lower in 1, unclear in 1 of 2``: the verdicts of some rows, counted."""
    counts = rows["verdict"].value_counts()
    order = [("higher", "called higher"), ("lower", "called lower"), ("unclear", "unclear"), ("not testable", "not testable")]
    return ", ".join(f"{text} in {counts[v]}" for v, text in order if counts.get(v)) + f" of {len(rows)}"


def _in_runs(row: pd.Series) -> str:
    """In how many of a row's runs B − A had the sign of their mean (``higher in 3 of 3 runs``)."""
    values = np.array([row[c] for c in row.index if str(c).startswith("run ")], dtype=float)
    values = values[np.isfinite(values)]
    if not values.size or not np.isfinite(row["difference"]) or row["difference"] == 0:
        return f"no change in {int((values == 0).sum())} of {values.size} runs"
    sign = np.sign(row["difference"])
    return f"{'higher' if sign > 0 else 'lower'} in {int((np.sign(values) == sign).sum())} of {values.size} runs"


def verdict_words(row: pd.Series) -> str:
    """A row's verdict as a sentence says it: called (after the table's Holm correction), not called with its MDE,
    or not testable."""
    if row["verdict"] in ("higher", "lower"):
        return f"called {row['verdict']}"
    if row["verdict"] == "unclear":
        return f"not called, MDE {_number(row['mde'])} {row['unit']}" if np.isfinite(row["mde"]) else "not called"
    return "not testable"


def _number(value: float) -> str:
    """Three significant digits, a large number whole (``1.69``, ``285``, ``2690``)."""
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def _called(rows: pd.DataFrame) -> int:
    return int(rows["verdict"].isin(["higher", "lower"]).sum())


def _span(values, digits: int = 1, signed: bool = True) -> str:
    values = [v for v in values if np.isfinite(v)]
    if not values:
        return "—"
    form = f"{{:{'+' if signed else ''}.{digits}f}}"
    low, high = min(values), max(values)
    return form.format(low) if round(low, digits) == round(high, digits) else f"{form.format(low)} to {form.format(high)}"


def _sizes(rows: pd.DataFrame) -> str:
    return " and ".join(dict.fromkeys(where.split(", ")[0] for where in rows["where"]))


def stream_lines(table: pd.DataFrame, link: str) -> list[str]:
    """What a streams table says on ``link`` (:func:`measured_on`: the link and the runs), in words computed from it:
    at equal messages in flight, and at equal calls."""
    lines = []
    same = table[table["comparison"] == "stream vs unary, same messages in flight"]
    for _, p50 in same[same["metric"] == "message_p50_ms"].iterrows():
        rate = same[(same["metric"] == "messages_per_s") & (same["where"] == p50["where"])].iloc[0]
        lines.append(
            f"**Streams against unary calls at the same messages in flight**, {link}, {p50['where'].split(', ')[0]} "
            f"({p50['B']} against {p50['A']}, {p50['B in flight']} messages in flight each): p50 of a message "
            f"{p50['A mean']:.2f} → {p50['B mean']:.2f} ms ({_signed(p50['difference'])} ms, 95 % t interval over "
            f"the runs {_interval(p50)}; {verdict_words(p50)}, {_in_runs(p50)}), messages/s ×{rate['B / A']:.2f} "
            f"({rate['A mean']:.0f} → {rate['B mean']:.0f}; {verdict_words(rate)}, {_in_runs(rate)}); Holm's correction "
            f"over the {len(table)} rows of the table.")
    calls = table[table["comparison"] == "stream vs unary, same calls in flight"]
    if len(calls):
        rate, p50 = calls[calls["metric"] == "messages_per_s"], calls[calls["metric"] == "message_p50_ms"]
        ratio = _span(rate["B in flight"] / rate["A in flight"], 0, signed=False)
        text = (f"**At the same calls in flight**, {link} ({_sizes(rate)}), the streams carried "
                f"{_span(rate['B / A'], 1, signed=False)}× the unary calls' messages per second with {ratio}× their "
                f"messages in flight ({_verdicts(rate)} after Holm's correction over the {len(table)} rows)")
        text += "".join(f"; at {row['where']} ({row['B in flight']} messages in flight) a message waited "
                        f"{row['B mean']:.2f} ms at the median against {row['A mean']:.2f} ms in a unary call "
                        f"(called higher, {_in_runs(row)})" for _, row in p50[p50["verdict"] == "higher"].iterrows())
        lines.append(text + ": another load, not the same one carried another way.")
    return lines


def _signed(value: float, digits: int = 2) -> str:
    return f"{value:+.{digits}f}".replace("-", "−") if np.isfinite(value) else "—"


def _interval(row: pd.Series, digits: int = 2) -> str:
    return f"[{_signed(row['lo'], digits)}, {_signed(row['hi'], digits)}]" if np.isfinite(row["lo"]) else "(none)"


def compression_lines(table: pd.DataFrame, link: str) -> list[str]:
    """What a compression table says, per payload kind, on ``link`` (:func:`measured_on`: the link and the runs)."""
    lines = []
    for kind in dict.fromkeys(w.split(" ")[0] for w in table["where"]):
        rows = table[table["where"].str.startswith(f"{kind} ") & (table["metric"] == "message_p50_ms")]
        parts = [f"{row['where'].split(', ')[0].removeprefix(kind + ' ')}: {row['A mean']:.1f} → {row['B mean']:.1f} ms "
                 f"({_signed(row['difference'])} ms, 95 % t interval over the runs {_interval(row)}; {verdict_words(row)}, "
                 f"{_in_runs(row)})" for _, row in rows.iterrows()]
        lines.append(f"**gzip against none on {kind} payloads**, {link}: p50 of a message {'; '.join(parts)}; Holm's "
                     f"correction over the {len(table)} rows of the table.")
    return lines


def ladder_lines(table: pd.DataFrame, link: str) -> list[str]:
    """What a ladder table says: each step against the one before, everything against the default, and the
    article's own table beside it (its hardware, link and service are not these: only the directions compare)."""
    lines = []
    steps = table[table["comparison"].str.startswith("ladder +")]
    for where in dict.fromkeys(steps["where"]):
        here = steps[steps["where"] == where]
        parts = []
        for step in dict.fromkeys(here["comparison"]):
            p50 = here[(here["comparison"] == step) & (here["metric"] == "message_p50_ms")].iloc[0]
            rate = here[(here["comparison"] == step) & (here["metric"] == "messages_per_s")].iloc[0]
            parts.append(f"{step.removeprefix('ladder ')} (p50 {_signed(p50['difference'])} ms, {verdict_words(p50)}; "
                         f"messages/s ×{rate['B / A']:.2f}, {verdict_words(rate)})")
        lines.append(f"**The ladder, each step against the one before**, {link}, {where}: " + "; ".join(parts)
                     + f"; Holm's correction over the {len(table)} rows of the table.")
        total = table[(table["comparison"] == "ladder: all steps vs default") & (table["where"] == where)]
        if len(total):
            p50, p99, rate = (total[total["metric"] == m].iloc[0] for m in METRICS)
            article = ARTICLE_LADDER
            lines.append(
                f"**Every step against the default**, {link}, {where}: p50 of a message {p50['A mean']:.2f} → "
                f"{p50['B mean']:.2f} ms ({verdict_words(p50)}, {_in_runs(p50)}), p99 {p99['A mean']:.1f} → "
                f"{p99['B mean']:.1f} ms ({verdict_words(p99)}), messages/s {rate['A mean']:.0f} → {rate['B mean']:.0f} "
                f"(×{rate['B / A']:.1f}, {verdict_words(rate)}, {_in_runs(rate)}); the article's ghz table: "
                f"{article['p50_ms'][0]:.0f} → {article['p50_ms'][1]:.0f} ms p50, {article['p99_ms'][0]:.0f} → "
                f"{article['p99_ms'][1]:.0f} ms p99, {article['qps'][0]:,.0f} → {article['qps'][1]:,.0f} QPS "
                f"(×{article['qps'][1] / article['qps'][0]:.1f}).")
    return lines


#: The settings a ladder's step is named by, as :func:`ladder_settings` says them.
_STEP_SETTINGS = ("connections", "keepalive_ms", "grpc_options", "compression", "server_impl", "rpc")


def ladder_settings(cells: pd.DataFrame, step: str = "default") -> str:
    """What a ladder step ran with, from its cells (``1 connection, no keepalive, unary calls, server option
    codec=proto, ...``): a step is the first value of every knob the run lists, so its "default" carries whatever
    those first values were, a server option among them."""
    row = cells[cells["ladder_step"] == step].iloc[0]
    keepalive = row["keepalive_ms"]
    options = row.get("grpc_options")
    parts = [f"{int(row['connections'])} connection{'s' if row['connections'] != 1 else ''}",
             "no keepalive" if pd.isna(keepalive) else f"keepalive every {int(keepalive)} ms",
             f"{row['rpc']} calls" + (f" of {int(row['messages_per_call'])} messages" if row["rpc"] == "stream" else ""),
             f"compression {row.get('compression') or 'none'}",
             f"the {(row.get('server_impl') or 'python').capitalize()} server "
             + (f"with the option {options}" if isinstance(options, str) and options else "without options"),
             f"{_size(int(row['payload_bytes']))} {row.get('payload_kind') or 'random'} requests at c={int(row['concurrency'])}"]
    return ", ".join(parts)


def ladder_default_lines(cells: pd.DataFrame, link: str) -> list[str]:
    """The sentence that says what a ladder's "default" was, where the run has a ladder."""
    if cells.empty or "ladder_step" not in cells or cells["ladder_step"].isna().all():
        return []
    steps = ladder_steps(cells)
    return [f"**The ladder's \"{steps[0]}\" step**, {link}, is the first value of every knob the run lists: "
            f"{ladder_settings(cells, steps[0])}; each later step adds one knob's second value "
            f"({', '.join(steps[1:])})."]


def same_load_elsewhere(ladder: pd.DataFrame, other: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """The ladder's default step against the cells of another group (``other``, labkit-go's load too) that ran the
    same load (payload, kind, concurrency, connections, keepalive, compression, RPC) with other server options: per
    metric, each group's mean over its runs and mean(other) − mean(default) with Welch's t over the runs (two
    groups, run at different times), Holm's correction over the metrics. Empty without such cells."""
    from labkit.analysis.inference import Difference

    if ladder.empty or other.empty or "ladder_step" not in ladder:
        return pd.DataFrame()
    default = ladder[ladder["ladder_step"] == ladder_steps(ladder)[0]]
    first = default.iloc[0]
    keys = ["payload_bytes", "payload_kind", "concurrency", "connections", "compression", "rpc"]
    same = np.logical_and.reduce([(other[k] == first[k]).to_numpy() for k in keys])
    same &= other["keepalive_ms"].isna().to_numpy() == bool(pd.isna(first["keepalive_ms"]))
    same &= (other["grpc_options"].fillna("none") != _options(first)).to_numpy()
    match = other[same]
    if match.empty:
        return pd.DataFrame()
    from labkit.analysis.inference import welch_t

    rows, results = [], []
    for metric, (_, unit) in METRICS.items():
        a, b = (frame[metric].dropna().to_numpy(float) for frame in (default, match))
        if min(a.size, b.size) >= 2:
            difference, low, high, pvalue, se, df = (float(x) for x in welch_t(a, b, confidence))
        else:
            difference, low, high, pvalue, se, df = float(b.mean() - a.mean()) if a.size and b.size else np.nan, \
                np.nan, np.nan, np.nan, np.nan, np.nan
        results.append(Difference(difference, low, high, pvalue, int(a.size), int(b.size), "Welch t", "mean", se, df))
        rows.append({"metric": metric, "unit": unit, "A": _options(first),
                     "B": match["grpc_options"].fillna("none").iloc[0], "A mean": float(a.mean()),
                     "B mean": float(b.mean()), "B / A": float(b.mean() / a.mean()), "difference": difference,
                     "lo": low, "hi": high, "p": pvalue, "A runs": int(a.size), "B runs": int(b.size)})
    return call_table(pd.DataFrame(rows), results, method="holm")


def _options(row: pd.Series) -> str:
    options = row.get("grpc_options")
    return options if isinstance(options, str) and options else "none"


def same_load_lines(compared: pd.DataFrame, link: str, other_run: str, cells: pd.DataFrame) -> list[str]:
    """What :func:`same_load_elsewhere` says: the ladder's default step beside the same load, on the same ``link``, in
    ``other_run``'s group."""
    if compared.empty:
        return []
    p50, rate = (compared[compared["metric"] == m].iloc[0] for m in ("message_p50_ms", "messages_per_s"))
    row = cells[cells["ladder_step"] == ladder_steps(cells)[0]].iloc[0]
    load = (f"{row['rpc']} calls of {_size(int(row['payload_bytes']))} at c={int(row['concurrency'])} on "
            f"{int(row['connections'])} connection{'s' if row['connections'] != 1 else ''}, {link}")
    other = "without a server option" if p50["B"] == "none" else f"with {p50['B']}"
    return [f"**The ladder's default step against the same load without its server option**: {load}; with "
            f"{p50['A']} (the ladder, {rate['A runs']} runs) {rate['A mean']:.0f} messages/s, {other} "
            f"(`{other_run}`'s group, {rate['B runs']} runs) {rate['B mean']:.0f} ({_signed(rate['difference'], 0)}, "
            f"95 % Welch interval over the runs {_interval(rate, 0)}; {verdict_words(rate)}); p50 of a message "
            f"{p50['A mean']:.2f} → {p50['B mean']:.2f} ms ({_signed(p50['difference'])} ms, {_interval(p50)}; "
            f"{verdict_words(p50)}); Holm's correction over the {len(compared)} metrics. The two groups ran at different "
            "times: a difference is the option and whatever else changed between them."]


#: Each kind of table: what it pairs, and how its sentences read them (each ``(table, where it was measured)``).
KINDS = {"streams": (stream_pairs, stream_lines), "compression": (compression_pairs, compression_lines),
         "ladder": (ladder_pairs, ladder_lines)}


def headline(tables: dict[str, pd.DataFrame]) -> dict[str, float | int]:
    """Headline fields of the fair comparisons: per table its rows, those called and those not testable; the
    differences the sentences lead with (streams against unary at the same messages in flight, and the whole ladder
    against its default), ``fair.<table>.<comparison>.<where>.<metric>``, with their verdicts."""
    leading = ("stream vs unary, same messages in flight", "ladder: all steps vs default")
    fields: dict[str, float | int] = {}
    for name, table in tables.items():
        if table is None or table.empty:
            continue
        fields[f"fair.{name}.rows"] = int(len(table))
        fields[f"fair.{name}.called"] = _called(table)
        fields[f"fair.{name}.not_testable"] = int((table["verdict"] == "not testable").sum())
        for _, row in table[table["comparison"].isin(leading)].iterrows():
            key = f"fair.{name}.{key_part(row['comparison'])}.{key_part(row['where'])}.{row['metric']}"
            fields[key] = round(float(row["difference"]), 3)
            fields[f"{key}.verdict"] = row["verdict"]
    return fields
