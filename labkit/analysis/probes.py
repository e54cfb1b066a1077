"""The series experiment's rules: which probes a run has, their tally, and latency split into its parts.

A ``labkit series`` run sends, on every tick, one sample of each probe: ping,
a warm gRPC echo on an open channel, a cold one on a new channel, a raw TCP
echo (and optionally a bare TCP connect). The differences of their medians
split a call's latency: connection set-up (cold − warm), the RPC stack (warm −
TCP echo), TCP over ICMP (TCP echo − ping). Tested in
``tests/test_analysis_series.py``.
"""

from __future__ import annotations

import pandas as pd

from labkit.analysis.summary import compare_groups

#: (A, B, what B − A measures, its short name in headline keys), in the order the split is read.
SPLITS = [
    ("echo-warm", "echo-cold", "connection set-up", "cold_minus_warm"),
    ("tcp-echo", "echo-warm", "RPC stack", "warm_minus_tcp"),
    ("ping", "tcp-echo", "TCP echo over ICMP", "tcp_minus_ping"),
    ("ping", "echo-warm", "warm gRPC over ICMP", "warm_minus_ping"),
    ("ping", "echo-cold", "cold gRPC over ICMP (2016)", "cold_minus_ping"),
]


def probes_of(samples: pd.DataFrame) -> list[str]:
    """The probes a run has, in the series agent's order (ping first)."""
    from labkit.echo.series_agent import PROBES

    return [p for p in PROBES if p in set(samples["probe"])]


def probe_tally(samples: pd.DataFrame, probes: list[str]) -> pd.DataFrame:
    """Per probe: ticks, rows, ok, failed, and duplicate replies (which are neither samples nor losses)."""
    rows = samples[~samples["duplicate"]]
    tally = rows.groupby("probe").agg(ticks=("seq", "nunique"), rows=("ok", "size"), ok=("ok", "sum")).reindex(probes)
    tally["failed"] = tally["rows"] - tally["ok"]
    tally["duplicates"] = samples[samples["duplicate"]].groupby("probe").size().reindex(probes).fillna(0).astype(int)
    return tally


def split_latency(samples: pd.DataFrame, probes: list[str]) -> tuple[float, pd.DataFrame]:
    """The ping median (the round trip), and one row per split of :data:`SPLITS` whose two probes the run has.

    Each row, indexed ``"B − A"``: what it measures, the difference of
    medians with its bootstrap interval, the same in round trips, the p99
    difference and the Mann–Whitney p-value.
    """
    rtt = samples.loc[samples["ok"] & ~samples["duplicate"] & (samples["probe"] == "ping"), "rtt_ms"].median()
    rows = []
    for a, b, meaning, short in SPLITS:
        if a in probes and b in probes:
            c = compare_groups(samples, "rtt_ms", "probe", a, b)
            rows.append({"B − A": f"{b} − {a}", "meaning": meaning, "short": short, "median_diff_ms": c.median_diff,
                         "ci_lo_ms": c.median_diff_ci[0], "ci_hi_ms": c.median_diff_ci[1], "in_rtts": c.median_diff / rtt,
                         "p99_diff_ms": c.p99_diff, "mannwhitney_p": c.mannwhitney_p})
    columns = ["B − A", "meaning", "short", "median_diff_ms", "ci_lo_ms", "ci_hi_ms", "in_rtts", "p99_diff_ms", "mannwhitney_p"]
    return rtt, pd.DataFrame(rows, columns=columns).set_index("B − A")


def series_headline(summary: pd.DataFrame, differences: pd.DataFrame, probes: list[str], prefix: str = "") -> dict:
    """Per probe count, lost, median and p99 (ms), and each split's difference in ms and in round trips.

    With a ``prefix`` (a comparison run's ``compare.``) only the medians and the splits in ms.
    """
    headline: dict = {}
    for probe in probes:
        if not prefix:
            headline[f"count.{probe}"] = int(summary.at[probe, "count"])
            headline[f"lost.{probe}"] = int(summary.at[probe, "lost"])
        headline[f"{prefix}median_ms.{probe}"] = round(float(summary.at[probe, "50%"]), 3)
        if not prefix:
            headline[f"p99_ms.{probe}"] = round(float(summary.at[probe, "p99"]), 3)
    for _, row in differences.iterrows():
        headline[f"{prefix}{row['short']}_ms"] = round(float(row["median_diff_ms"]), 3)
        if not prefix:
            headline[f"{row['short']}_rtts"] = round(float(row["in_rtts"]), 3)
    return headline
