"""What the tuning notebook concludes: its headline numbers, its sentences, and the idle calls it reads.

:mod:`labkit.analysis.tuning` pairs the cells of a load run that differ in
one knob and compares them; this module turns those tables into what the
notebook reports: the headline numbers, and every finding as a sentence
computed from the run, said only where its predicate holds (one per knob,
the A/A control, the comparisons over the runs, keepalive on an idle
connection, and :func:`findings`, the article's claims one by one with the
predicates of :func:`claims`). It also checks that a cell's raw calls give
back its recorded row, and picks the calls of an idle-step run that show
what keepalive does to an idle connection.
"""

from __future__ import annotations

import re

import pandas as pd

from labkit.analysis.message_load import ladder_settings, verdict_words
from labkit.analysis.tuning import KNOB_COLUMNS, METRICS


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


def _g3(value: float) -> str:
    """Three significant digits, a number of four digits or more whole (``0.326``, ``174``, ``1230``)."""
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def _detectable(mde: pd.Series, metric: str) -> str:
    """The range of the unclear comparisons' minimum detectable effects, as a knob's sentence gives it."""
    mde = mde.dropna()
    if mde.empty:
        return ""
    spread = f"{_g3(mde.min())}" if mde.min() == mde.max() else f"{_g3(mde.min())}–{_g3(mde.max())}"
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
            f"neither in {counts.get('unclear', 0)}{_detectable(unclear, metric)}{untestable} of {len(frame)})")
    if (knob, metric) in beyond.index:
        row = beyond.loc[(knob, metric)]
        text += f"; beyond the A/A differences: {row['beyond, higher']} higher, {row['beyond, lower']} lower"
    return text


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
             + (f" (MDE {_g3(unclear[f'{metric}_mde'].min())}–{_g3(unclear[f'{metric}_mde'].max())} {unit(metric)})"
                if len(unclear) else "")
             + (f", and {untestable} could not be tested (no value, or the same difference in every run)"
                if untestable else "")
             + ". Unclear says these runs cannot tell at this family's size, not that a knob does nothing: below, "
             "the largest unclear difference of each knob against the smallest one the family could have called."]
    for _, row in largest_unclear_over_runs(between, metric).iterrows():
        values = ", ".join(f"{row[c]:+.1f}" for c in runs)
        lines.append(f"**{row['knob']}, its largest unclear {metric} difference over the runs**, at {row['where']}: "
                     f"{values} {unit(metric)} in the runs, mean {row[f'{metric}_mean']:+.1f} (95 % t interval over the "
                     f"runs [{row[f'{metric}_lo']:+.1f}, {row[f'{metric}_hi']:+.1f}]); not called after Holm's "
                     f"correction, MDE {_g3(row[f'{metric}_mde'])} {unit(metric)}.")
    return lines


# --- what the notebook says of a run: each finding a sentence computed from its tables ------------------------------


def _minus(lines: list[str]) -> list[str]:
    """The sentences with a negative number's sign as a minus (``−0.4``), as the other sentences print it."""
    return [re.sub(r"(?<![\w.])-(?=\d)", "−", line) for line in lines]


def family_size(table: pd.DataFrame) -> int:
    """The comparisons of one Holm family of :func:`labkit.analysis.tuning.compare_knobs` or
    :func:`labkit.analysis.tuning.diffs_between_runs`: every row, every metric."""
    return len(table) * len(METRICS)


def knob_findings(diffs: pd.DataFrame, knobs: dict, beyond: pd.DataFrame) -> list[str]:
    """One sentence per knob compared in this run (:func:`knob_sentence` for each metric), the family named."""
    total = family_size(diffs)
    return _minus([f"**{knobs[k].meaning}**, this run's {int((diffs['knob'] == k).sum())} pairs: "
            + "; ".join(knob_sentence(diffs, k, m, beyond) for m in METRICS)
            + f"; Holm's correction over the {total} comparisons of the table." for k in knobs])


def aa_findings(aa: dict | None, knobs: dict, cell_s: float, diffs: pd.DataFrame) -> list[str]:
    """The A/A control in a sentence: the largest differences between two cells with nothing changed on the wire,
    and how many of them the table called anyway (each should be 0). Nothing without a control."""
    if not aa:
        return []
    called = sum(aa["excluding"].values())
    return [f"**With no change on the wire** ({knobs['keepalive'].meaning}, cells of {cell_s:g} s: no ping due), the "
            f"largest differences between two cells of this run were " + ", ".join(
                f"{aa['noise'][m]:.1f} {unit(m)} in {m}" for m in METRICS)
            + f" over its {aa['pairs']} pairs; {called} of these {aa['pairs'] * len(METRICS)} A/A comparisons "
            f"{'was' if called == 1 else 'were'} called a difference after Holm's correction over the "
            f"{family_size(diffs)} comparisons of the table"
            + (": none, as it should be." if called == 0 else
               ": each one called is cell-to-cell variation the within-cell intervals miss.")]


def runs_findings(between: pd.DataFrame, run_ids: list[str]) -> list[str]:
    """The comparisons repeated over the runs of a group (:func:`labkit.analysis.tuning.diffs_between_runs`) in
    sentences: how many were called per metric, those that could not be tested, the A/A ones; then the largest
    unclear p50 difference of each knob (:func:`unclear_over_runs_lines`)."""
    from labkit.analysis.tuning import runs_verdict_headline

    h = runs_verdict_headline(between)
    return [f"**Over the {len(run_ids)} runs of this group** ({', '.join(f'`{r}`' for r in run_ids)}), each "
            f"comparison's on − off with the runs as units (Student-t, a t-test against 0) and Holm's correction over "
            f"the {family_size(between)} comparisons of the table: of its {h['runs.comparisons']} pairs, "
            f"{h['runs.called.p50']} called in p50, {h['runs.called.p99']} in p99 and {h['runs.called.rps']} in req/s "
            f"({h['runs.not_testable.p50']}, {h['runs.not_testable.p99']} and {h['runs.not_testable.rps']} not "
            f"testable); of the {h['runs.aa_pairs']} keepalive (A/A) pairs, {h['runs.aa_called.p50']}, "
            f"{h['runs.aa_called.p99']} and {h['runs.aa_called.rps']}.", *_minus(unclear_over_runs_lines(between, "p50"))]


def idle_findings(table: pd.DataFrame, diffs: pd.DataFrame, idle: str) -> list[str]:
    """What keepalive did on an idle connection (:func:`labkit.analysis.tuning.idle_keepalive`'s two frames), one
    sentence per kind of result: the sizes where it was called slower or faster, and those where the extra round
    trip of a window restarted after idle (a latency of at least :data:`PENALTY_RTT` ping RTTs without keepalive)
    stayed. ``idle`` says which run and condition (``idle-step run `X`, CUBIC, ...``)."""
    if diffs is None or not len(diffs):
        return []
    family = f"Holm's correction over the {len(diffs)} sizes and settings"
    lines = []

    def part(row) -> str:
        return (f"{int(row['payload_bytes'])} B: {row['off_rtt']:.2f} → {row['on_rtt']:.2f} ping RTTs "
                f"({row['diff_ms']:+.1f} ms, 95 % interval [{row['lo_ms']:+.1f}, {row['hi_ms']:+.1f}], "
                f"{row['statistic']} of {row['n']} calls)").replace("-", "−")

    for label in dict.fromkeys(diffs["keepalive"]):
        rows = diffs[diffs["keepalive"] == label]
        setting = f"every {label.removesuffix('ms')} ms" if label.endswith("ms") else label
        method = "Welch's t" if (rows["statistic"] == "mean").all() else "the calls' bootstrap"
        for verdict, what in (("higher", "made the idle connection slower"), ("lower", "made the idle connection faster")):
            hit = rows[rows["verdict"] == verdict]
            if len(hit):
                lines.append(f"**Keepalive {setting} {what}** ({idle}), keepalive on − off: "
                             + "; ".join(part(r) for _, r in hit.iterrows())
                             + f"; called {verdict} ({method}) after {family}.")
        stayed = rows[(rows["off_rtt"] >= PENALTY_RTT) & (rows["verdict"] != "lower")]
        if len(stayed):
            lines.append(f"**Keepalive {setting} did not remove the idle penalty** ({idle}) where, without it, a "
                         f"call took {PENALTY_RTT:g} ping RTTs or more: " + "; ".join(part(r) for _, r in stayed.iterrows())
                         + f"; none called lower after {family}.")
    return lines


#: A latency of at least this many ping RTTs on an idle connection is one round trip more than a call needs.
PENALTY_RTT = 1.5
#: The tuning article's message size limit (research brief §5).
ARTICLE_MESSAGE_BYTES = 100_000
#: The tuning article's pool: 2 to 4 connections per core.
ARTICLE_POOL_PER_CORE = (2, 4)


def _better(frame: pd.DataFrame) -> pd.Series:
    """Per pair, whether any metric was called better (a lower p50 or p99, more req/s)."""
    return ((frame["p50_verdict"] == "lower") | (frame["p99_verdict"] == "lower") | (frame["rps_verdict"] == "higher"))


def _worse(frame: pd.DataFrame) -> pd.Series:
    return ((frame["p50_verdict"] == "higher") | (frame["p99_verdict"] == "higher") | (frame["rps_verdict"] == "lower"))


def _fair_rows(fair: dict, kind_tables: tuple[str, ...], comparison: str, metric: str) -> list[tuple[str, pd.Series]]:
    """(link, row) of every fair table among ``kind_tables`` with ``comparison`` in ``metric``."""
    found = []
    for name in kind_tables:
        if name not in fair:
            continue
        table, link = fair[name][:2]
        rows = table[(table["comparison"] == comparison) & (table["metric"] == metric)]
        found += [(link, row) for _, row in rows.iterrows()]
    return found


def client_cores(manifest: dict) -> int | None:
    """The cores online on the run's client host, where its facts record them (``cpus_online``)."""
    client = (manifest.get("config") or {}).get("client")
    facts = (manifest.get("hosts") or {}).get(client) or {}
    cores = facts.get("cpus_online")
    return int(cores) if cores else None


def claims(diffs: pd.DataFrame, between: pd.DataFrame | None, idle_diffs: pd.DataFrame | None,
           fair: dict) -> dict[str, bool]:
    """The findings the tuning notebook states about the article's claims, each a predicate on the run's tables:
    ``diffs`` (:func:`labkit.analysis.tuning.compare_knobs`), ``between`` (over the runs, or None), ``idle_diffs``
    (:func:`labkit.analysis.tuning.idle_keepalive`, or None) and ``fair`` (table name -> (the
    :func:`labkit.analysis.message_load.over_runs` table, where it was measured)):

    - ``keepalive_called``: some keepalive pair was called a difference in some metric, in this run or over its runs;
    - ``idle_cured`` / ``idle_hurt``: keepalive was called faster / slower on an idle connection at some size;
    - ``pool_better`` / ``pool_worse``: some pool against one connection was called better / worse in some metric;
    - ``payload_costs``: the larger request was called slower (p50) in some pair;
    - ``streams_same_messages_better``: at the same messages in flight (every message timed), a stream was called
      faster (p50 of a message lower, or messages/s higher) on some link;
    - ``ladder_p50_lower``: every step against the default lowered a message's p50 (called) on some link, as the
      article's table has it."""
    from labkit.analysis.tuning import called

    def any_called(knob: str, test) -> bool:
        frames = [diffs] + ([between] if between is not None and len(between) else [])
        return any(bool(test(f[f["knob"] == knob]).any()) for f in frames if len(f))

    keepalive = any_called("keepalive", lambda f: called(f["p50_verdict"]) | called(f["p99_verdict"])
                           | called(f["rps_verdict"]))
    same = [row for _, row in _fair_rows(fair, ("streams", "streams_lan"), "stream vs unary, same messages in flight",
                                         "messages_per_s") if row["verdict"] == "higher"]
    same += [row for _, row in _fair_rows(fair, ("streams", "streams_lan"), "stream vs unary, same messages in flight",
                                          "message_p50_ms") if row["verdict"] == "lower"]
    ladder = [row for _, row in _fair_rows(fair, ("ladder", "ladder_lan"), "ladder: all steps vs default",
                                           "message_p50_ms") if row["verdict"] == "lower"]
    idle = idle_diffs if idle_diffs is not None and len(idle_diffs) else pd.DataFrame({"verdict": []})
    return {"keepalive_called": keepalive,
            "idle_cured": bool((idle["verdict"] == "lower").any()), "idle_hurt": bool((idle["verdict"] == "higher").any()),
            "pool_better": any_called("pool", _better), "pool_worse": any_called("pool", _worse),
            "payload_costs": any_called("payload", lambda f: f["p50_verdict"] == "higher"),
            "streams_same_messages_better": bool(same), "ladder_p50_lower": bool(ladder)}


def _tally(frame: pd.DataFrame, metric: str) -> str:
    """``called lower in 3, higher in 0 of 12``: a knob's verdicts in one metric."""
    counts = frame[f"{metric}_verdict"].value_counts()
    return f"called lower in {counts.get('lower', 0)}, higher in {counts.get('higher', 0)} of {len(frame)}"


def _tallies(frame: pd.DataFrame, metrics=METRICS) -> str:
    """The verdicts of several metrics, ``none called in p50, p99 or rps of 4`` when none was."""
    from labkit.analysis.tuning import called

    if not any(called(frame[f"{m}_verdict"]).any() for m in metrics):
        return f"none called in {', '.join(metrics[:-1])} or {metrics[-1]} of {len(frame)}" if len(metrics) > 1 else \
            f"none called in {metrics[0]} of {len(frame)}"
    return ", ".join(f"{m} {_tally(frame, m)}" for m in metrics)


def _where_called(frame: pd.DataFrame, metric: str) -> str:
    hit = frame[frame[f"{metric}_verdict"].isin(["higher", "lower"])]
    return f" ({'; '.join(hit['where'])})" if 0 < len(hit) <= 4 else ""


def _over_runs(between: pd.DataFrame | None, knob: str, metrics=METRICS) -> str:
    if between is None or not len(between):
        return ""
    frame = between[between["knob"] == knob]
    runs = len([c for c in between.columns if c.startswith("p50 run ")])
    return f"; over the {runs} runs of the group (Holm over {family_size(between)}): {_tallies(frame, metrics)}"


def findings(diffs: pd.DataFrame, knobs: dict, cells: pd.DataFrame, manifest: dict, *, aa: dict | None,
             between: pd.DataFrame | None, idle_diffs: pd.DataFrame | None, fair: dict,
             idle: str | None = None) -> list[str]:
    """What this run says of each of the article's claims (research brief §5), each sentence with the numbers, the n
    and the family of its verdicts, and whether the run supports the claim, tests it only in part, or cannot test it
    (the predicates of :func:`claims`). The tables are those :func:`claims` reads (``fair``'s values may carry the
    table's cells third, for the ladder's default step); ``knobs`` the knobs compared, ``cells`` the ghz cells,
    ``manifest`` the run's, ``idle`` what the idle-step run was (its id and condition)."""
    held = claims(diffs, between, idle_diffs, fair)
    total = family_size(diffs)
    lines = []
    # Keepalive.
    if "keepalive" in knobs:
        frame = diffs[diffs["knob"] == "keepalive"]
        what = ("an interval longer than a cell, so no ping was due: an A/A control" if aa else
                "not an A/A control: an interval a cell can outlast, or no setting without keepalive")
        text = (f"**Keepalive, the article's first claim** ({knobs['keepalive'].meaning}, {what}): in this run's "
                f"{len(frame)} pairs, {_tallies(frame)} (Holm over {total}){_over_runs(between, 'keepalive')}")
        text += (": this run shows no effect of keepalive under continuous load." if not held["keepalive_called"] else
                 ": keepalive was called a difference" + (", where nothing differed on the wire: cell-to-cell "
                                                          "variation, not the knob." if aa else "."))
        lines.append(text)
    else:
        lines.append("**Keepalive, the article's first claim**: this run does not vary keepalive, so it does not test it "
                     "under load.")
    if idle_diffs is not None and len(idle_diffs):
        verdict = ("supports keepalive against the idle penalty at " + ", ".join(
            f"{s} B" for s in idle_diffs.loc[idle_diffs["verdict"] == "lower", "payload_bytes"])
            if held["idle_cured"] else "does not support keepalive as a cure for the idle penalty")
        hurt = (", and it was called slower at " + ", ".join(f"{s} B" for s in idle_diffs.loc[
            idle_diffs["verdict"] == "higher", "payload_bytes"]) if held["idle_hurt"] else "")
        named = f" ({idle})" if idle else ""
        lines.append(f"**Keepalive on an idle connection**{named}: the run {verdict} ("
                     + (f"called faster after Holm over {len(idle_diffs)}" if held["idle_cured"] else
                        f"no size called faster after Holm over {len(idle_diffs)}")
                     + f"{hurt}). Noticing a dead peer, what keepalive is for, is measured apart "
                     "(bench/keepalive_dead_peer.py).")
    # Pools.
    if "pool" in knobs:
        frame = diffs[diffs["knob"] == "pool"]
        cores = client_cores(manifest)
        sizes = sorted(int(v) for v in knobs["pool"].on)
        if cores:
            low, high = (cores * k for k in ARTICLE_POOL_PER_CORE)
            inside = [n for n in sizes if low <= n <= high]
            rule = (f"the client has {cores} cores, so the article's pool is {low}–{high} connections; of this run's "
                    f"pools ({', '.join(map(str, sizes))}) {', '.join(map(str, inside)) or 'none'} "
                    f"{'is' if len(inside) == 1 else 'are'} in it")
        else:
            rule = (f"the run's manifest records no core count, so the \"× cores\" rule is not tested: only pools of "
                    f"{', '.join(map(str, sizes))} connections on these hosts")
        outcome = ("a pool was called better than one connection" + (" and also worse" if held["pool_worse"] else "")
                   if held["pool_better"] else
                   "no pool was called better than one connection" + (", some worse" if held["pool_worse"] else ""))
        lines.append(f"**Connection pools of 2–4× cores**: {rule}. Against one connection at the same concurrency, "
                     f"in this run's {len(frame)} pairs: p50 {_tally(frame, 'p50')}{_where_called(frame, 'p50')}, req/s "
                     f"{_tally(frame, 'rps')}{_where_called(frame, 'rps')} (Holm over {total})"
                     f"{_over_runs(between, 'pool', ('p50', 'rps'))}: {outcome}.")
    for link, p50 in _fair_rows(fair, ("ladder", "ladder_lan"), "ladder +connections=4", "message_p50_ms"):
        rate = next(row for l, row in _fair_rows(fair, ("ladder", "ladder_lan"), "ladder +connections=4",
                                                 "messages_per_s") if l == link)
        lines.append(f"**A pool in the ladder** ({link}, every message timed): adding a pool of 4 connections to the "
                     f"step before, messages/s ×{rate['B / A']:.2f} ({verdict_words(rate)}), p50 of a message "
                     f"{p50['difference']:+.2f} ms ({verdict_words(p50)}), after Holm's correction over the "
                     "ladder's table.".replace("+-", "−").replace(" -", " −"))
    # Message size.
    if "payload" in knobs:
        frame = diffs[diffs["knob"] == "payload"]
        sizes = sorted(int(v) for v in cells["payload_bytes"].unique())
        below = [s for s in sizes if s <= ARTICLE_MESSAGE_BYTES]
        above = [s for s in sizes if s > ARTICLE_MESSAGE_BYTES]
        cost = (f"larger requests cost latency (p50 called higher in {int((frame['p50_verdict'] == 'higher').sum())} of "
                f"{len(frame)} pairs, by {frame['p50_diff'].min():+.1f} to {frame['p50_diff'].max():+.1f} ms; req/s "
                f"{_tally(frame, 'rps')}; Holm over {total}{_over_runs(between, 'payload', ('p50',))})"
                if held["payload_costs"] else
                f"no larger request was called slower in p50 ({len(frame)} pairs, Holm over {total})")
        by_size = "; ".join(f"{meaning}: p50 called higher in {int((rows['p50_verdict'] == 'higher').sum())} of "
                            f"{len(rows)}" for meaning, rows in frame.groupby("meaning", sort=False))
        threshold = (f"the run has sizes on both sides of 100 KB beside the smallest, each compared with it ({by_size})"
                     if len(below) >= 2 and above else
                     f"whether 100 KB is a threshold takes sizes on both sides of it beside the smallest, and the run's "
                     f"are {', '.join(f'{s} B' for s in sizes)}: the threshold is not tested")
        lines.append(f"**Messages under 100 KB**: {cost}; {threshold}.".replace("+-", "−"))
    # Streaming.
    if "rpc" in knobs:
        frame = diffs[diffs["knob"] == "rpc"]
        messages = int(cells.loc[cells["rpc"] == "stream", "messages_per_call"].max())
        lines.append(f"**Streaming, as ghz times it** (a stream of {messages} requests per call against unary calls at "
                     f"the same concurrency, {len(frame)} pairs): req/s counting messages {_tally(frame, 'rps')}, a "
                     f"call's p50 {_tally(frame, 'p50')} (Holm over {total}): at the same concurrency a stream keeps "
                     f"{messages}× the messages in flight, another load, so ghz's pairs do not test the claim.")
    same_links = {}
    for link, rate in _fair_rows(fair, ("streams", "streams_lan"), "stream vs unary, same messages in flight",
                                 "messages_per_s"):
        p50 = next(row for l, row in _fair_rows(fair, ("streams", "streams_lan"),
                                                "stream vs unary, same messages in flight", "message_p50_ms")
                   if l == link and row["where"] == rate["where"])
        better = rate["verdict"] == "higher" or p50["verdict"] == "lower"
        same_links.setdefault(link, []).append(better)
    if same_links:
        supported = [link for link, hits in same_links.items() if any(hits)]
        not_shown = [link for link, hits in same_links.items() if not any(hits)]
        lines.append("**Streaming beats many unary calls**, every message timed at the same messages in flight: "
                     + (f"supported on {'; '.join(supported)}" if supported else "")
                     + ("; " if supported and not_shown else "")
                     + (f"not shown on {'; '.join(not_shown)}" if not_shown else "")
                     + " (a stream called faster in messages/s or in a message's p50, after Holm over each table).")
    # The article's headline table.
    for link, rate in _fair_rows(fair, ("ladder", "ladder_lan"), "ladder: all steps vs default", "messages_per_s"):
        p50 = next(row for l, row in _fair_rows(fair, ("ladder", "ladder_lan"), "ladder: all steps vs default",
                                                "message_p50_ms") if l == link)
        from labkit.analysis.message_load import ARTICLE_LADDER

        qps = ARTICLE_LADDER["qps"][1] / ARTICLE_LADDER["qps"][0]
        agree_rate = "as the article's" if rate["verdict"] == "higher" else "not as the article's"
        agree_p50 = ("as the article's" if p50["verdict"] == "lower" else
                     "against the article's" if p50["verdict"] == "higher" else "not the article's")
        name = next(n for n in ("ladder", "ladder_lan") if n in fair and fair[n][1] == link)
        default = f", {ladder_settings(fair[name][2])}" if len(fair[name]) > 2 else ""
        lines.append(f"**The article's ghz table, as directions** ({link}): every step against the ladder's first "
                     f"step (\"default\"{default}): "
                     f"messages/s ×{rate['B / A']:.1f} ({verdict_words(rate)}; the article ×{qps:.1f}), {agree_rate}; a "
                     f"message's p50 {p50['A mean']:.2f} → {p50['B mean']:.2f} ms ({verdict_words(p50)}; the article "
                     f"{ARTICLE_LADDER['p50_ms'][0]:.0f} → {ARTICLE_LADDER['p50_ms'][1]:.0f} ms), {agree_p50}. Its "
                     "hardware, link and service are not these: absolute numbers do not carry over.")
    return _minus(lines)
