"""What the tuning notebook concludes: its headline numbers, its verdict sentences, and the idle calls it reads.

:mod:`labkit.analysis.tuning` pairs the cells of a load run that differ in
one knob and compares them; this module turns those tables into what the
notebook reports (the A/A and idle-keepalive headline numbers, the claims the
run could not test, one sentence per knob), checks that a cell's raw calls
give back its recorded row, and picks the calls of an idle-step run that show
what keepalive does to an idle connection.
"""

from __future__ import annotations

import pandas as pd

from labkit.analysis.tuning import KNOB_COLUMNS, METRICS

#: The request size of the idle-keepalive sentence: above a 10-segment initial window, so a restart after idle costs a round trip.
IDLE_SENTENCE_BYTES = 16000


def run_description(run_id: str, n_cells: int, config: dict, ping: dict) -> str:
    """The notebook's first line: the load run's cells, its knobs as configured, its windows and the ping RTT."""
    knobs = [f"transports {', '.join(config.get('transports', []))}", f"concurrency {config.get('concurrency')}",
             f"payloads {config.get('payload_bytes')} B", f"connections {config.get('connections')}",
             f"keepalive {config.get('keepalive_ms')} ms"]
    for key, default in (("compression", ["none"]), ("rpc", ["unary"]), ("server_impl", ["python"]), ("grpc_option", [])):
        if config.get(key, default) != default:
            knobs.append(f"{key.replace('_', ' ')} {config[key]}")
    if "stream" in config.get("rpc", []):
        knobs.append(f"{config.get('stream_messages')} messages per stream")
    design = "; every knob changed on its own from the first values" if config.get("design") == "one-at-a-time" else ""
    return (f"Load run `{run_id}`: {n_cells} cells, {', '.join(knobs)}{design}; {config.get('warmup_s')} s warm-up "
            f"(not counted) + {config.get('duration_s')} s measured per cell. Ping RTT before: "
            f"{ping.get('rtt_avg_ms', float('nan')):.1f} ms.")


def keepalive_label(keepalive_ms) -> str:
    """A keepalive setting as the notebook names it: ``"none"`` when off (missing), else ``"250ms"``."""
    return "none" if pd.isna(keepalive_ms) else f"{int(keepalive_ms)}ms"


def unit(metric: str) -> str:
    """The unit of a comparison metric: req/s for ``rps``, ms for the latencies."""
    return "req/s" if metric == "rps" else "ms"


def window_mismatches(cells: pd.DataFrame, calls: dict[str, pd.DataFrame]) -> list[tuple[str, int, int]]:
    """(cell, calls, requests) of every cell whose measured window does not hold as many calls as its row's ``requests``.

    ``calls`` maps a cell id to its calls in the window (:func:`labkit.analysis.tuning.binned_calls`).
    Empty when the raw reports give back every recorded row, i.e. when the
    notebook's window rule is the one ``labkit load`` applied.
    """
    return [(cell, len(calls[cell]), int(n)) for cell, n in zip(cells["cell_id"], cells["requests"]) if len(calls[cell]) != n]


def idle_keepalive_calls(samples: pd.DataFrame, ping_ms: dict[str, float]) -> pd.DataFrame:
    """The calls of an idle-step run that isolate keepalive on an idle connection, with ``rtt_multiple`` and ``keepalive``.

    ``samples`` are labelled by :func:`labkit.analysis.idle.label_conditions`;
    ``ping_ms`` maps its ``pair`` to the ping RTT. Kept: warm, successful
    calls where the idle penalty exists (CUBIC, ``tcp_slow_start_after_idle``
    1), at the longest gap between calls, without a background sender, so
    that keepalive is the only knob left. ``keepalive`` is its
    :func:`keepalive_label`. Raises ValueError when keepalive is not both
    off and on among them.
    """
    samples = samples.assign(rtt_multiple=samples["rtt_ms"] / samples["pair"].map(ping_ms))
    calls = samples[samples["ok"] & ~samples["cold"] & (samples["cc_used"] == "cubic") & (samples["ssai"] == 1)
                    & (samples["gap_s"] == samples["gap_s"].max()) & samples["background_gap_s"].isna()]
    calls = calls.assign(keepalive=calls["keepalive_ms"].map(keepalive_label))
    if "none" not in set(calls["keepalive"]) or set(calls["keepalive"]) == {"none"}:
        raise ValueError("the idle-step run has no CUBIC, sysctl 1 cells with keepalive both off and on "
                         "(at its longest gap, without a background sender)")
    return calls


def aa_headline(aa: dict | None, beyond: pd.DataFrame) -> dict[str, float]:
    """The A/A control's largest |on − off| per metric; per other knob and metric, the pairs beyond it, higher and lower.

    ``aa`` is :func:`labkit.analysis.tuning.aa_control` (None: no control, no
    numbers), ``beyond`` the table of :func:`labkit.analysis.tuning.beyond_null`.
    """
    headline: dict[str, float] = {}
    for metric in METRICS if aa else []:
        headline[f"aa_keepalive.{metric}.max_abs_diff"] = round(aa["noise"][metric], 2)
    for (knob, metric), row in beyond.iterrows():
        headline[f"{knob}.{metric}.beyond_aa_higher"] = int(row["beyond, higher"])
        headline[f"{knob}.{metric}.beyond_aa_lower"] = int(row["beyond, lower"])
    return headline


def idle_headline(table: pd.DataFrame, diffs: pd.DataFrame) -> dict[str, float | str]:
    """Per request size, the idle latency in ping RTTs with keepalive off and each setting on; then on − off.

    ``table`` and ``diffs`` are :func:`labkit.analysis.tuning.idle_keepalive`'s
    two frames (the latency is the table's ``value``: the mean of the calls below ten of them, else their
    median). Keys: ``idle.ka=<setting>.rtt_multiple.<size>``, then
    ``idle.ka=<setting>.diff_ms.<size>``, ``.diff_verdict.<size>`` and, where unclear, ``.diff_mde_ms.<size>``.
    """
    settings = ["none", *sorted(s for s in table.index.unique("keepalive") if s != "none")]
    headline: dict[str, float | str] = {}
    for size in sorted(table.index.unique("payload_bytes")):
        for setting in (s for s in settings if (s, size) in table.index):
            headline[f"idle.ka={setting}.rtt_multiple.{int(size)}"] = round(float(table.at[(setting, size), "value"]), 3)
    for _, row in diffs.iterrows():
        headline[f"idle.ka={row['keepalive']}.diff_ms.{row['payload_bytes']}"] = round(row["diff_ms"], 2)
        headline[f"idle.ka={row['keepalive']}.diff_verdict.{row['payload_bytes']}"] = row["verdict"]
        if row["verdict"] == "unclear":
            headline[f"idle.ka={row['keepalive']}.diff_mde_ms.{row['payload_bytes']}"] = round(row["mde_ms"], 2)
    return headline


def untested_claims(cells: pd.DataFrame, knobs: dict) -> str:
    """The claims the run cannot address, ``; ``-separated: dead peers, other pool sizes, >100 KB, knobs not varied.

    ``knobs`` are the knobs compared (as :func:`labkit.analysis.tuning.knob_range` gives them).
    """
    untested = ["keepalive's dead-peer detection (measured apart: bench/keepalive_dead_peer.py)",
                f"pool sizes other than {', '.join(str(n) for n in sorted(cells['connections'].unique()))}"]
    if cells["payload_bytes"].max() <= 100_000:  # the article's threshold
        untested.append("messages above 100 KB")
    untested += [f"{knob} (not varied)" for knob in KNOB_COLUMNS if knob not in knobs]
    return "; ".join([*untested, "the article's absolute numbers"])


def _detectable(mde: pd.Series, metric: str) -> str:
    """The range of the unclear comparisons' minimum detectable effects, as a knob's sentence gives it."""
    mde = mde.dropna()
    if mde.empty:
        return ""
    spread = f"{mde.min():.3g}" if mde.min() == mde.max() else f"{mde.min():.3g}–{mde.max():.3g}"
    return f" (MDE {spread} {unit(metric)})"


def knob_sentence(diffs: pd.DataFrame, knob: str, metric: str, beyond: pd.DataFrame) -> str:
    """One knob and metric in words: the range of on − off, how many were called higher, lower or neither (after
    Holm's correction, :func:`labkit.analysis.tuning.compare_knobs`) with the smallest differences the unclear ones
    could have called (their MDE), how many could not be tested, and those beyond the A/A control.

    The A/A part is there when ``beyond`` (:func:`labkit.analysis.tuning.beyond_null`) has the knob.
    """
    frame = diffs[diffs["knob"] == knob]
    counts = frame[f"{metric}_verdict"].value_counts()
    unclear = frame.loc[frame[f"{metric}_verdict"] == "unclear", f"{metric}_mde"]
    untestable = f", not testable in {counts['not testable']}" if counts.get("not testable", 0) else ""
    text = (f"{metric} on − off from {frame[f'{metric}_diff'].min():+.1f} to {frame[f'{metric}_diff'].max():+.1f} "
            f"{unit(metric)} (called higher in {counts.get('higher', 0)}, lower in {counts.get('lower', 0)}, "
            f"neither in {counts.get('unclear', 0)}{_detectable(unclear, metric)}{untestable} of {len(frame)}, after "
            "Holm's correction)")
    if (knob, metric) in beyond.index:
        row = beyond.loc[(knob, metric)]
        text += f"; beyond the A/A differences: {row['beyond, higher']} higher, {row['beyond, lower']} lower"
    return text


def claim_lines(diffs: pd.DataFrame, knobs: dict, beyond: pd.DataFrame, idle_diffs: pd.DataFrame) -> list[str]:
    """The Markdown bullets of "what the data say": one per knob (:func:`knob_sentence` per metric), and the idle keepalive.

    ``knobs`` maps a knob to its :class:`~labkit.analysis.tuning.Knob`; ``idle_diffs`` is
    :func:`labkit.analysis.tuning.idle_keepalive`'s second frame (its first
    setting at :data:`IDLE_SENTENCE_BYTES` is described, when compared).
    """
    from labkit.analysis.inference import verdict_text

    lines = [f"- **{knobs[k].meaning}**: " + "; ".join(knob_sentence(diffs, k, m, beyond) for m in METRICS) + "."
             for k in knobs]
    at_size = idle_diffs[idle_diffs["payload_bytes"] == IDLE_SENTENCE_BYTES] if len(idle_diffs) else idle_diffs
    for _, row in at_size.head(1).iterrows():
        lines.append(f"- **idle connection, keepalive {row['keepalive']} vs none** at {IDLE_SENTENCE_BYTES} B "
                     f"({row['n']} calls): {row['statistic']} {row['off_rtt']:.2f} → {row['on_rtt']:.2f} ping RTTs "
                     f"({row['diff_ms']:+.1f} ms [{row['lo_ms']:+.1f}, {row['hi_ms']:+.1f}], "
                     f"{verdict_text(row['verdict'], row['mde_ms'], 'ms')} after Holm's correction over "
                     f"{len(idle_diffs)} sizes).")
    return lines


def runs_table(between: pd.DataFrame, metric: str) -> pd.DataFrame:
    """One metric of :func:`labkit.analysis.tuning.diffs_between_runs` as a person reads it: per pair, on − off in
    each run, their mean [95 % t interval over the runs], and the verdict, an unclear one with its MDE."""
    from labkit.analysis.inference import verdict_text

    runs = [c for c in between.columns if c.startswith(f"{metric} run ")]
    shown = between[["knob", "where", *runs]].copy()
    shown[f"mean [95 % CI] ({unit(metric)})"] = [f"{m:+.2f} [{lo:+.2f}, {hi:+.2f}]" for m, lo, hi in zip(
        between[f"{metric}_mean"], between[f"{metric}_lo"], between[f"{metric}_hi"])]
    shown["verdict"] = [verdict_text(v, mde, unit(metric)) for v, mde in zip(between[f"{metric}_verdict"],
                                                                            between[f"{metric}_mde"])]
    return shown.set_index(["knob", "where"])


def largest_unclear_over_runs(between: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Per knob, the comparison of :func:`labkit.analysis.tuning.diffs_between_runs` with the largest mean
    |on − off| among those not called in ``metric`` (knobs whose every comparison was called or untestable have
    none), in the table's order of knobs."""
    unclear = between[between[f"{metric}_verdict"] == "unclear"]
    largest = unclear.groupby("knob", sort=False)[f"{metric}_mean"].apply(lambda means: means.abs().idxmax())
    return unclear.loc[largest.to_numpy()]


def unclear_over_runs_lines(between: pd.DataFrame, metric: str) -> list[str]:
    """What "unclear" over the runs means in ``metric``, as Markdown: how many comparisons are unclear and the range
    of their MDEs, how many could not be tested; then per knob its largest unclear difference, with each run's
    value and the MDE it fell short of."""
    verdicts = between[f"{metric}_verdict"]
    unclear = between[verdicts == "unclear"]
    runs = [c for c in between.columns if c.startswith(f"{metric} run ")]
    untestable = int((verdicts == "not testable").sum())
    lines = [f"Over the {len(runs)} runs, {len(unclear)} of the {len(between)} {metric} comparisons are unclear after "
             f"Holm's correction over the table's {len(between) * len(METRICS)} comparisons"
             + (f" (MDE {unclear[f'{metric}_mde'].min():.3g}–{unclear[f'{metric}_mde'].max():.3g} {unit(metric)})"
                if len(unclear) else "")
             + (f", and {untestable} could not be tested (no value, or the same difference in every run)"
                if untestable else "")
             + ". Unclear says these runs cannot tell at this family's size, not that a knob does nothing; the "
             "largest unclear difference of each knob against the smallest one the family could have called:", ""]
    for _, row in largest_unclear_over_runs(between, metric).iterrows():
        values = ", ".join(f"{row[c]:+.1f}" for c in runs)
        lines.append(f"- **{row['knob']}** at {row['where']}: {values} {unit(metric)} in the runs, mean "
                     f"{row[f'{metric}_mean']:+.1f} [{row[f'{metric}_lo']:+.1f}, {row[f'{metric}_hi']:+.1f}]; MDE "
                     f"{row[f'{metric}_mde']:.3g} {unit(metric)}.")
    return lines
