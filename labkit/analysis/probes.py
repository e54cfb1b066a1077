"""The series experiment's rules: which probes a run has, their tally, and latency split into its parts.

A ``labkit series`` run sends, on every tick, one sample of each probe: ping,
a warm gRPC echo on an open channel, a cold one on a new channel, a raw TCP
echo (and optionally a bare TCP connect). The differences of their medians
split a call's latency: connection set-up (cold − warm), the RPC stack (warm −
TCP echo), TCP over ICMP (TCP echo − ping). :func:`analyse_series` computes
all of it for one run; the ``*_side_by_side`` functions set two runs (a WAN
and a LAN one, say) against each other. What a run shows is said in sentences
built from its numbers, each only where its predicate holds
(:func:`split_claims`): :func:`split_findings` for one run,
:func:`compare_findings` for two, :func:`runs_findings` for a ``--runs`` group.
Tested in ``tests/test_analysis_series.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from labkit.analysis.summary import summarize_with_ci
from labkit.echo.plans import PROBES

#: (A, B, what B − A measures, its short name in headline keys), in the order the split is read.
SPLITS = [
    ("echo-warm", "echo-cold", "connection set-up", "cold_minus_warm"),
    ("tcp-echo", "echo-warm", "RPC stack", "warm_minus_tcp"),
    ("ping", "tcp-echo", "TCP echo over ICMP", "tcp_minus_ping"),
    ("ping", "echo-warm", "warm gRPC over ICMP", "warm_minus_ping"),
    ("ping", "echo-cold", "cold gRPC over ICMP (2016)", "cold_minus_ping"),
]
#: A split's row label ("B − A") -> its short name in headline keys.
SHORT_NAMES = {f"{b} − {a}": short for a, b, _, short in SPLITS}
#: The splits that step from ping up to a cold call, one probe at a time (:func:`per_tick_splits`); a run without
#: the TCP echo steps from ping to the warm call directly.
CHAIN = ("tcp_minus_ping", "warm_minus_tcp", "cold_minus_warm")
CHAIN_WITHOUT_TCP = ("warm_minus_ping", "cold_minus_warm")
#: The columns of a probe's summary a person reads (milliseconds; ``50%_lo`` … ``50%_hi`` the median's interval).
SUMMARY_COLUMNS = ["count", "lost", "mean", "std", "min", "25%", "50%", "50%_lo", "50%_hi", "75%", "p95", "p99", "max"]
#: The columns of a split that two runs are compared on.
SPLIT_COLUMNS = ["median_diff_ms", "ci_lo_ms", "ci_hi_ms", "in_rtts"]


def probes_of(samples: pd.DataFrame) -> list[str]:
    """The probes a run has, in the series agent's order (ping first), then any other (irtt, which the controller
    runs, not the agent) by name."""
    found = set(samples["probe"])
    return [p for p in PROBES if p in found] + sorted(found - set(PROBES))


def probe_tally(samples: pd.DataFrame, probes: list[str]) -> pd.DataFrame:
    """Per probe: ticks, rows, ok, failed, and duplicate replies (which are neither samples nor losses)."""
    rows = samples[~samples["duplicate"]]
    tally = rows.groupby("probe").agg(ticks=("seq", "nunique"), rows=("ok", "size"), ok=("ok", "sum")).reindex(probes)
    tally["failed"] = tally["rows"] - tally["ok"]
    tally["duplicates"] = samples[samples["duplicate"]].groupby("probe").size().reindex(probes).fillna(0).astype(int)
    return tally


def failure_reasons(samples: pd.DataFrame) -> pd.DataFrame:
    """How many rows failed for each probe and error (duplicate replies are not failures); empty when none did."""
    failed = samples[~samples["duplicate"] & ~samples["ok"]]
    return failed.groupby(["probe", "error"]).size().rename("rows").to_frame()


def answered(samples: pd.DataFrame) -> pd.DataFrame:
    """The samples that are a probe's answer: ok, and not a duplicate ping reply (which is not a second sample)."""
    return samples[samples["ok"] & ~samples["duplicate"]]


def split_latency(samples: pd.DataFrame, probes: list[str]) -> tuple[float, pd.DataFrame]:
    """The ping median (the round trip), and one row per split of :data:`SPLITS` whose two probes the run has.

    Each row, indexed ``"B − A"``: what it measures, the difference of
    medians (they add up along the split), its 95 % interval from resampling
    ticks in blocks with both probes together (they share the schedule, so
    they are compared tick by tick: :func:`labkit.analysis.inference.paired_block_difference`),
    the same in round trips, the ticks both probes answered (``pairs``), the
    p99 difference (only from 299 samples each), the p-value, and the p-value
    after Holm's correction over the run's splits (``p_holm``: one family).
    """
    from labkit.analysis.inference import adjust, min_samples_for_percentile, paired_block_difference

    answered_rows = answered(samples)
    rtt = answered_rows.loc[answered_rows["probe"] == "ping", "rtt_ms"].median()
    by_tick = answered_rows.pivot_table(index="seq", columns="probe", values="rtt_ms", aggfunc="first").sort_index()
    rows = []
    for a, b, meaning, _ in SPLITS:
        if a in probes and b in probes and a in by_tick and b in by_tick:
            d = paired_block_difference(by_tick[a].to_numpy(), by_tick[b].to_numpy())
            enough = min(by_tick[a].count(), by_tick[b].count()) >= min_samples_for_percentile(99)
            rows.append({"B − A": f"{b} − {a}", "meaning": meaning, "median_diff_ms": d.difference, "ci_lo_ms": d.low,
                         "ci_hi_ms": d.high, "in_rtts": d.difference / rtt, "pairs": d.n_a,
                         "p99_diff_ms": by_tick[b].quantile(0.99) - by_tick[a].quantile(0.99) if enough else float("nan"),
                         "p": d.pvalue})
    columns = ["B − A", "meaning", "median_diff_ms", "ci_lo_ms", "ci_hi_ms", "in_rtts", "pairs", "p99_diff_ms", "p"]
    table = pd.DataFrame(rows, columns=columns).set_index("B − A")
    table["p_holm"] = adjust(table["p"].to_list(), "holm")[1] if len(table) else []
    return rtt, table


def per_tick_splits(samples: pd.DataFrame, probes: list[str]) -> pd.DataFrame:
    """The split tick by tick, for a figure: ping's RTT, then each step of :data:`CHAIN` (ping → TCP echo → warm gRPC →
    cold gRPC; ``B − A`` at the same tick) whose probes the run has (:data:`CHAIN_WITHOUT_TCP` without a TCP echo). Long:
    ``seq`` (the tick), ``t_utc`` (its first send), ``part`` (``"ping"`` or ``"B − A"``, in chain order), ``ms``; a tick where
    either probe failed has no row for that part."""
    answered_rows = answered(samples)
    by_tick = answered_rows.pivot_table(index="seq", columns="probe", values="rtt_ms", aggfunc="first").sort_index()
    sent = answered_rows.groupby("seq")["t_utc_ns"].min()
    pairs = {short: (a, b) for a, b, _, short in SPLITS}
    chain = [pairs[short] for short in (CHAIN if "tcp-echo" in probes else CHAIN_WITHOUT_TCP)]
    parts = [("ping", by_tick["ping"])] if "ping" in by_tick else []
    parts += [(f"{b} − {a}", by_tick[b] - by_tick[a]) for a, b in chain if a in by_tick and b in by_tick]
    frames = [pd.DataFrame({"seq": v.index, "t_utc": pd.to_datetime(sent.reindex(v.index).to_numpy(), unit="ns", utc=True),
                            "part": name, "ms": v.to_numpy()}).dropna(subset=["ms"]) for name, v in parts]
    if not frames:
        return pd.DataFrame(columns=["seq", "t_utc", "part", "ms"])
    return pd.concat(frames, ignore_index=True)


@dataclass
class SeriesAnalysis:
    """One series run analysed: its samples and probes, their tally and summary, and the latency split."""

    samples: pd.DataFrame
    probes: list[str]
    #: Distinct sequence numbers: the ticks of the schedule that were sent.
    ticks: int
    tally: pd.DataFrame
    failures: pd.DataFrame
    #: :func:`summarize_with_ci` per probe, in probe order.
    summary: pd.DataFrame
    #: ping's median, the unit the split's ``in_rtts`` column counts in.
    ping_rtt: float
    differences: pd.DataFrame

    def in_round_trips(self) -> pd.DataFrame:
        """The samples with ``rtt_in_pings``: each RTT over this run's ping median."""
        return self.samples.assign(rtt_in_pings=self.samples["rtt_ms"] / self.ping_rtt)

    def as_dict(self, *, tally: bool = True) -> dict:
        """Probes, tally (unless ``tally=False``), summary and split as plain mappings, for a headline JSON's detail."""
        detail: dict = {"probes": self.probes}
        if tally:
            detail["tally"] = self.tally.to_dict(orient="index")
        detail.update(summary=self.summary.to_dict(orient="index"), differences=self.differences.to_dict(orient="index"))
        return detail


def analyse_series(samples: pd.DataFrame) -> SeriesAnalysis:
    """Everything the series notebook reads off one run's samples (see :class:`SeriesAnalysis`)."""
    probes = probes_of(samples)
    ping_rtt, differences = split_latency(samples, probes)
    return SeriesAnalysis(samples=samples, probes=probes, ticks=int(samples["seq"].nunique()),
                          tally=probe_tally(samples, probes), failures=failure_reasons(samples),
                          summary=summarize_with_ci(samples, by="probe").reindex(probes), ping_rtt=ping_rtt,
                          differences=differences)


#: A verdict's level: a split is called when its p-value after Holm's correction over the run's splits is below it.
ALPHA = 0.05
#: The round trips a cold h2c unary call needs at least (TCP handshake, HTTP/2 preface and SETTINGS, the call;
#: research brief, "what is known from elsewhere"): a cold call at this many times ping's median or more.
COLD_CALL_RTTS = 3


def _p(value: float) -> str:
    return "Holm-adjusted p < 0.0001" if value < 1e-4 else f"Holm-adjusted p = {value:.2g}"


def verdict(row: pd.Series, family: int) -> str:
    """Whether a split (a row of :func:`split_latency`) is called above or below zero, with the correction and its
    family: its Holm-adjusted p-value over the ``family`` splits of its run against :data:`ALPHA`."""
    where = f"Holm's correction over the {family} splits of this run"
    if pd.isna(row["p_holm"]):
        return f"not testable, counted in {where}"
    if row["p_holm"] < ALPHA:
        return f"called {'above' if row['median_diff_ms'] > 0 else 'below'} zero after {where} ({_p(row['p_holm'])})"
    return f"not called after {where} ({_p(row['p_holm'])})"


def _interval(row: pd.Series, digits: int) -> str:
    return (f"95 % paired block-bootstrap interval [{row['ci_lo_ms']:.{digits}f}, {row['ci_hi_ms']:.{digits}f}] ms over "
            f"the {int(row['pairs'])} ticks both answered")


def split_claims(series: SeriesAnalysis) -> dict[str, bool]:
    """The predicates :func:`split_findings` rests on, each on this run's numbers (only those whose probes it has):

    - ``setup_over_a_round_trip``: cold − warm's interval lies above one round trip (ping's median): a new channel
      costs more than the TCP handshake's round trip;
    - ``cold_call_three_round_trips``: cold − ping's interval lies at or above two round trips, so a cold call
      takes at least the :data:`COLD_CALL_RTTS` round trips of a cold h2c call;
    - ``setup_most_of_the_2016_gap``: connection set-up is more than half of cold − ping, the gap the 2016 client
      measured;
    - ``rpc_stack_called``: warm − TCP echo is called above zero after Holm's correction over the run's splits."""
    d, rtt, held = series.differences, series.ping_rtt, {}
    if "echo-cold − echo-warm" in d.index:
        held["setup_over_a_round_trip"] = bool(d.at["echo-cold − echo-warm", "ci_lo_ms"] > rtt)
    if "echo-cold − ping" in d.index:
        held["cold_call_three_round_trips"] = bool(d.at["echo-cold − ping", "ci_lo_ms"] >= (COLD_CALL_RTTS - 1) * rtt)
    if {"echo-cold − echo-warm", "echo-cold − ping"} <= set(d.index):
        held["setup_most_of_the_2016_gap"] = bool(
            d.at["echo-cold − echo-warm", "median_diff_ms"] > 0.5 * d.at["echo-cold − ping", "median_diff_ms"])
    if "echo-warm − tcp-echo" in d.index:
        row = d.loc["echo-warm − tcp-echo"]
        held["rpc_stack_called"] = bool(row["p_holm"] < ALPHA and row["median_diff_ms"] > 0)
    return held


def split_findings(series: SeriesAnalysis) -> list[str]:
    """What the split says of this run, one sentence per split its probes allow, each with its numbers, n, interval
    and verdict (:func:`verdict`), and the reading :func:`split_claims` allows: a new channel's cost against a
    round trip, a cold call against a cold h2c call's round trips, what of the 2016 gap is connection set-up, the
    RPC stack's cost, TCP's over ICMP's, and a warm call's over ping's. Empty when the run has none of the splits."""
    d, rtt, family = series.differences, series.ping_rtt, len(series.differences)
    held, said = split_claims(series), []
    if "echo-cold − echo-warm" in d.index:
        row = d.loc["echo-cold − echo-warm"]
        text = (f"A new channel costs {row['median_diff_ms']:.2f} ms more than a warm one, {row['in_rtts']:.2f} round "
                f"trips of ping's median ({rtt:.3f} ms) (difference of medians; {_interval(row, 2)}; "
                f"{verdict(row, family)})")
        if held["setup_over_a_round_trip"]:
            text += (": its interval lies above one round trip, so a new channel costs more than its TCP handshake "
                     "(a gRPC client then waits for the server's HTTP/2 SETTINGS before it sends the call).")
        elif row["ci_hi_ms"] < rtt:
            text += ": its interval lies below one round trip, less than a TCP handshake takes."
        else:
            text += ": its interval holds one round trip, the TCP handshake's."
        said.append(text)
    if "echo-cold − ping" in d.index:
        row = d.loc["echo-cold − ping"]
        cold = series.summary.at["echo-cold", "50%"]
        text = (f"A cold call, the only kind the 2016 client made, takes {cold / rtt:.2f} × ping's median "
                f"({cold:.2f} ms, n = {int(series.summary.at['echo-cold', 'count'])}); cold − ping is "
                f"{row['median_diff_ms']:.2f} ms ({_interval(row, 2)}; {verdict(row, family)})")
        if held["cold_call_three_round_trips"]:
            text += (f", at least {COLD_CALL_RTTS - 1} round trips over ping across its interval: the "
                     f"{COLD_CALL_RTTS} round trips a cold h2c call needs (TCP handshake, HTTP/2 preface and "
                     "SETTINGS, the call) hold.")
        else:
            text += (f", below {COLD_CALL_RTTS - 1} round trips over ping at its interval's low end "
                     f"({row['ci_lo_ms'] / rtt:.2f}): fewer than the {COLD_CALL_RTTS} round trips a cold h2c call "
                     "needs (TCP handshake, HTTP/2 preface and SETTINGS, the call).")
        said.append(text)
    if "setup_most_of_the_2016_gap" in held:
        whole = d.at["echo-cold − ping", "median_diff_ms"]
        parts = [(name, what) for name, what in (("echo-cold − echo-warm", "connection set-up"),
                                                 ("echo-warm − tcp-echo", "the RPC stack"),
                                                 ("tcp-echo − ping", "TCP over ICMP"),
                                                 ("echo-warm − ping", "a warm call over ping"))
                 if name in d.index and not (name == "echo-warm − ping" and "tcp-echo − ping" in d.index)]
        shares = ", ".join(f"{what} ({name}) {100 * d.at[name, 'median_diff_ms'] / whole:.1f} %" for name, what in parts)
        said.append(f"Of the gap the 2016 client measured, cold − ping ({whole:.2f} ms, differences of medians, which "
                    f"add up): {shares}; " + ("most of it is connection set-up, not the RPC." if
                                              held["setup_most_of_the_2016_gap"] else
                                              "connection set-up is less than half of it."))
    for name, what, digits in (("echo-warm − tcp-echo", "On an open connection gRPC costs {d} ms more than the raw TCP "
                                                         "echo", 3),
                               ("tcp-echo − ping", "The raw TCP echo takes {d} ms more than ping", 3),
                               ("echo-warm − ping", "A warm gRPC echo takes {d} ms more than ping", 3)):
        if name in d.index:
            row = d.loc[name]
            said.append(what.format(d=f"{row['median_diff_ms']:.{digits}f}") + f" ({_interval(row, digits)}; "
                        f"{verdict(row, family)}): {row['in_rtts']:.4f} round trips.")
    return said


def run_labels(name: str, run_id: str, other_name: str, other_run_id: str) -> tuple[str, str]:
    """How two runs are named side by side: their configured names, or their run ids when the names are the same."""
    return (name, other_name) if name != other_name else (run_id, other_run_id)


def shared_probes(runs: dict[str, SeriesAnalysis]) -> list[str]:
    """The probes every run has, in the first run's order."""
    first, *others = runs.values()
    return [p for p in first.probes if all(p in other.probes for other in others)]


def medians_side_by_side(runs: dict[str, SeriesAnalysis]) -> pd.DataFrame:
    """Per shared probe, each run's median in ms and in multiples of its own ping median; runs keyed by label."""
    shared = shared_probes(runs)
    columns = {}
    for label, series in runs.items():
        columns[f"{label} median (ms)"] = series.summary.loc[shared, "50%"]
        columns[f"{label} × ping"] = series.summary.loc[shared, "50%"] / series.ping_rtt
    return pd.DataFrame(columns)


def splits_side_by_side(runs: dict[str, SeriesAnalysis]) -> pd.DataFrame:
    """Each run's split (:data:`SPLIT_COLUMNS`), the runs' labels as the top column level."""
    return pd.concat({label: series.differences[SPLIT_COLUMNS] for label, series in runs.items()}, axis=1)


def splits_between_runs(analyses: list[SeriesAnalysis], confidence: float = 0.95) -> pd.DataFrame:
    """Several runs' splits side by side (each run's difference of medians, B − A in ms: ``run 1``, ...), their
    mean and its interval with the runs as units (``lo``, ``hi``: :func:`labkit.analysis.runs_t_interval`, NaN with
    fewer than two runs): a run's own interval says how well its ticks pin its split down, this one how much the
    split moves between runs."""
    from labkit.analysis.inference import runs_t_interval

    table = pd.concat({f"run {i}": a.differences["median_diff_ms"] for i, a in enumerate(analyses, 1)}, axis=1)
    bounds = [runs_t_interval(row.to_numpy(dtype=float), confidence) for _, row in table.iterrows()]
    table["mean"], table["lo"], table["hi"] = (list(column) for column in zip(*bounds))
    return table


def runs_headline(splits: pd.DataFrame) -> dict:
    """Headline fields of :func:`splits_between_runs`: how many runs, and each split's interval over runs (ms)."""
    headline: dict = {"runs": int(splits.filter(like="run ").shape[1])}
    for name, row in splits.iterrows():
        if pd.notna(row["lo"]):
            headline[f"{SHORT_NAMES[name]}_runs_lo_ms"] = round(float(row["lo"]), 3)
            headline[f"{SHORT_NAMES[name]}_runs_hi_ms"] = round(float(row["hi"]), 3)
    return headline


def _overlap(x: pd.Series, y: pd.Series) -> bool:
    return bool(x["ci_lo_ms"] <= y["ci_hi_ms"] and y["ci_lo_ms"] <= x["ci_hi_ms"])


def compare_findings(runs: dict[str, SeriesAnalysis]) -> list[str]:
    """Two runs' connection set-up and RPC stack side by side (the first two of ``runs``, keyed by label): whether
    the set-up is above one round trip of each run's own ping (it scales with the round trip) and whether the RPC
    stack's intervals in ms overlap (a constant cost, whatever the link); each with both runs' numbers and n."""
    (label_a, a), (label_b, b) = list(runs.items())[:2]
    said = []
    name = "echo-cold − echo-warm"
    if name in a.differences.index and name in b.differences.index:
        x, y = a.differences.loc[name], b.differences.loc[name]
        over = [label for label, row, run in ((label_a, x, a), (label_b, y, b)) if row["ci_lo_ms"] > run.ping_rtt]
        where = ("on both: it scales with the round trip" if len(over) == 2 else
                 f"on `{over[0]}` only" if over else "on neither")
        said.append(f"Connection set-up (cold − warm) is {x['median_diff_ms']:.2f} ms, {x['in_rtts']:.2f} round trips, "
                    f"on `{label_a}` ({int(x['pairs'])} ticks) and {y['median_diff_ms']:.2f} ms, {y['in_rtts']:.2f} round "
                    f"trips, on `{label_b}` ({int(y['pairs'])} ticks); its 95 % interval lies above one round trip of "
                    f"the run's own ping median {where}.")
    name = "echo-warm − tcp-echo"
    if name in a.differences.index and name in b.differences.index:
        x, y = a.differences.loc[name], b.differences.loc[name]
        text = (f"The RPC stack (warm − tcp-echo) costs {x['median_diff_ms']:.3f} ms [{x['ci_lo_ms']:.3f}, "
                f"{x['ci_hi_ms']:.3f}] on `{label_a}` ({int(x['pairs'])} ticks) and {y['median_diff_ms']:.3f} ms "
                f"[{y['ci_lo_ms']:.3f}, {y['ci_hi_ms']:.3f}] on `{label_b}` ({int(y['pairs'])} ticks; 95 % paired "
                "block-bootstrap intervals)")
        if _overlap(x, y):
            text += (f": the intervals overlap, about the same cost in ms on both links, {x['in_rtts']:.4f} and "
                     f"{y['in_rtts']:.4f} of their round trips.")
        else:
            more = label_a if x["median_diff_ms"] > y["median_diff_ms"] else label_b
            text += f": the intervals do not overlap; it costs more on `{more}`."
        said.append(text)
    return said


def runs_findings(analyses: list[SeriesAnalysis], splits: pd.DataFrame) -> list[str]:
    """Over several runs of a ``--runs`` group (``analyses``, each run's own; ``splits``: their
    :func:`splits_between_runs`): per split, the runs' mean and its Student-t interval with the runs as units, in
    how many runs it is called (each run's Holm family), and for connection set-up in how many runs its interval
    lies above one round trip, for a cold call's in how many it reaches :data:`COLD_CALL_RTTS` round trips."""
    n = len(analyses)
    if n < 2:
        return []
    said = []
    for name, row in splits.iterrows():
        runs = [a for a in analyses if name in a.differences.index]
        calls = [a.differences.loc[name] for a in runs]
        above = sum(1 for r in calls if r["p_holm"] < ALPHA and r["median_diff_ms"] > 0)
        below = sum(1 for r in calls if r["p_holm"] < ALPHA and r["median_diff_ms"] < 0)
        text = (f"{name} over the {n} runs: mean {row['mean']:.3f} ms, 95 % Student-t interval over the runs "
                f"[{row['lo']:.3f}, {row['hi']:.3f}] ms (the runs as units); called above zero in {above} of "
                f"{len(runs)} runs" + (f" and below zero in {below}" if below else "")
                + " (each after Holm's correction over its own splits)")
        if name == "echo-cold − echo-warm":
            over = sum(1 for a in runs if a.differences.at[name, "ci_lo_ms"] > a.ping_rtt)
            text += f"; above one round trip of its run's ping median in {over} of {len(runs)} runs"
        if name == "echo-cold − ping":
            over = sum(1 for a in runs if a.differences.at[name, "ci_lo_ms"] >= (COLD_CALL_RTTS - 1) * a.ping_rtt)
            text += f"; a cold call at {COLD_CALL_RTTS} round trips or more in {over} of {len(runs)} runs"
        said.append(text + ".")
    return said


def series_headline(series: SeriesAnalysis, probes: list[str] | None = None, prefix: str = "") -> dict:
    """The ping median, per probe count, lost, median and p99 (ms), each split in ms and in round trips, and the
    interval of cold − warm; rounded to µs.

    ``probes`` (default: the run's) chooses the probes. With a ``prefix`` (a
    comparison run's ``compare.``) only the ping median, the medians and the
    splits in ms.
    """
    summary, differences = series.summary, series.differences
    headline: dict = {f"{prefix}ping_rtt_ms": round(float(series.ping_rtt), 3)}
    for probe in series.probes if probes is None else probes:
        if not prefix:
            headline[f"count.{probe}"] = int(summary.at[probe, "count"])
            headline[f"lost.{probe}"] = int(summary.at[probe, "lost"])
        headline[f"{prefix}median_ms.{probe}"] = round(float(summary.at[probe, "50%"]), 3)
        if not prefix:
            headline[f"p99_ms.{probe}"] = round(float(summary.at[probe, "p99"]), 3)
    for name, row in differences.iterrows():
        headline[f"{prefix}{SHORT_NAMES[name]}_ms"] = round(float(row["median_diff_ms"]), 3)
        if not prefix:
            headline[f"{SHORT_NAMES[name]}_rtts"] = round(float(row["in_rtts"]), 3)
    if not prefix and "echo-cold − echo-warm" in differences.index:
        headline["cold_minus_warm_ci_lo_ms"] = round(float(differences.at["echo-cold − echo-warm", "ci_lo_ms"]), 3)
        headline["cold_minus_warm_ci_hi_ms"] = round(float(differences.at["echo-cold − echo-warm", "ci_hi_ms"]), 3)
    return headline
