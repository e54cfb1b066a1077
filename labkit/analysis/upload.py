"""The upload experiment's rules: conditions, CPU per MB, spread, and TLS and transport compared chunk size by chunk size.

A ``labkit upload`` run (gupload's experiment, research brief experiment 3)
has one row per upload of one file: transport (gRPC streaming or an HTTP/2
POST), TLS, chunk size, MB/s and the CPU seconds of client and server. These
functions are what the upload notebook shows, tested in
``tests/test_analysis_upload.py``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from labkit.analysis.summary import Comparison, compare, summarize_with_ci

#: The conditions of an upload run in reading order: transport, then TLS.
CONDITIONS = ("grpc", "grpc+TLS", "http2", "http2+TLS")
_CELL = ["condition", "chunk_bytes"]


def label_uploads(samples: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The uploads with a ``condition`` (``grpc``, ``http2+TLS``...), and the conditions present, in :data:`CONDITIONS` order.

    When the run has several gRPC stacks the condition names its stack too
    (``grpc+TLS go→go``), stack after stack.
    """
    from labkit.analysis.idle import stack_labels

    condition = samples["transport"] + np.where(samples["tls"], "+TLS", "")
    stacks = stack_labels(samples)
    if stacks.nunique() > 1:
        samples = samples.assign(condition=condition + " " + stacks)
        present = set(samples["condition"])
        return samples, [f"{c} {s}" for s in dict.fromkeys(stacks) for c in CONDITIONS if f"{c} {s}" in present]
    samples = samples.assign(condition=condition)
    return samples, [c for c in CONDITIONS if c in set(samples["condition"])]


def with_cpu_costs(uploads: pd.DataFrame, file_bytes: int) -> pd.DataFrame:
    """Client and server CPU seconds per MB (10^6 B) of the file, and CPU over wall time (1.0: one core busy throughout)."""
    mb = file_bytes / 1e6
    return uploads.assign(
        client_cpu_s_per_mb=uploads["client_cpu_s"] / mb, server_cpu_s_per_mb=uploads["server_cpu_s"] / mb,
        client_cpu_util=uploads["client_cpu_s"] / uploads["seconds"], server_cpu_util=uploads["server_cpu_s"] / uploads["seconds"],
    )


def cell_summary(uploads: pd.DataFrame, value: str, confidence: float = 0.95) -> pd.DataFrame:
    """Per condition and chunk size (columns, not index): the summary of ``value`` with bootstrap intervals of the median."""
    table = summarize_with_ci(uploads, value, by=_CELL, ok=None, confidence=confidence)
    table.index.names = _CELL
    return table.reset_index()


def spread(uploads: pd.DataFrame) -> pd.DataFrame:
    """Per condition and chunk size: uploads, mean and std of MB/s, fastest and slowest, cv and fastest/slowest."""
    table = uploads.groupby(_CELL)["mb_per_s"].agg(uploads="size", mean="mean", std="std", fastest="max", slowest="min")
    return table.assign(cv=table["std"] / table["mean"], **{"fastest / slowest": table["fastest"] / table["slowest"]})


def first_vs_later(uploads: pd.DataFrame) -> pd.DataFrame:
    """Median MB/s of each cell's first upload (``seq`` 0) against the later ones, per chunk size, with the uploads
    each median rests on (``n first``, ``n later``)."""
    marked = uploads.assign(upload=np.where(uploads["seq"] == 0, "first", "later"))
    grouped = marked.groupby(["chunk_bytes", "upload"])["mb_per_s"]
    table = grouped.median().unstack("upload")
    if "first" in table and "later" in table:
        table["later / first"] = table["later"] / table["first"]
    counts = grouped.size().unstack("upload").add_prefix("n ")
    return table.join(counts)


def condition_pairs(conditions: list[str]) -> tuple[dict[str, tuple[str, str]], dict[str, tuple[str, str]]]:
    """The pairs (A, B) worth comparing: TLS on against off per transport, and HTTP/2 against gRPC with TLS and without."""
    tls = {f"TLS on − off, {t}": (t, f"{t}+TLS") for t in ("grpc", "http2") if t in conditions and f"{t}+TLS" in conditions}
    transport = {f"http2 − grpc{s}": (f"grpc{s}", f"http2{s}") for s in ("", "+TLS")
                 if f"grpc{s}" in conditions and f"http2{s}" in conditions}
    return tls, transport


def compare_pairs(uploads: pd.DataFrame, pairs: dict[str, tuple[str, str]],
                  confidence: float = 0.95) -> tuple[pd.DataFrame, dict[tuple[str, int], Comparison]]:
    """B against A in MB/s, chunk size by chunk size (two uploads or more each): a table and the comparisons."""
    rows, results = [], {}
    for name, (a, b) in pairs.items():
        for size in sorted(int(s) for s in uploads["chunk_bytes"].unique()):
            at_size = uploads[uploads["chunk_bytes"] == size]
            xa, xb = at_size[at_size["condition"] == a]["mb_per_s"], at_size[at_size["condition"] == b]["mb_per_s"]
            if len(xa) < 2 or len(xb) < 2:
                continue
            result = results[(name, size)] = compare(xa, xb, confidence=confidence)
            rows.append({"comparison": name, "chunk_bytes": size, "A": a, "B": b,
                         "B / A (medians)": result.median_b / result.median_a,
                         "cell": f"{result.median_diff:+.1f} [{result.median_diff_ci[0]:+.1f}, {result.median_diff_ci[1]:+.1f}]",
                         "mannwhitney_p": result.mannwhitney_p})
    return pd.DataFrame(rows), results


def kept_uploads(samples: pd.DataFrame, drop_first_upload: bool = False) -> pd.DataFrame:
    """The uploads a notebook reads: those acknowledged whole (``ok``), without the first of each cell when
    ``drop_first_upload``."""
    return samples[samples["ok"] & ((samples["seq"] > 0) | (not drop_first_upload))]


def upload_headline(conditions: list[str], throughput: pd.DataFrame, cpu: dict[str, pd.DataFrame],
                    utilisation: pd.DataFrame, sizes: tuple[int, int]) -> dict[str, float]:
    """Per condition at the smallest and largest chunk: median MB/s with its interval, CPU s/MB per side, client CPU use.

    ``throughput`` and ``cpu[side]`` are :func:`cell_summary` tables;
    ``utilisation`` the medians of ``client_cpu_util`` per condition and chunk.
    """
    smallest, largest = sizes
    by_cell = throughput.set_index(_CELL)
    cpu_cells = {side: table.set_index(_CELL) for side, table in cpu.items()}
    headline: dict[str, float] = {}
    for condition in conditions:
        for size in (s for s in (smallest, largest) if (condition, s) in by_cell.index):
            for suffix, column in (("", "50%"), ("_lo", "50%_lo"), ("_hi", "50%_hi")):
                headline[f"mb_per_s.{condition}.{size}{suffix}"] = round(float(by_cell.loc[(condition, size), column]), 3)
        for side in ("client", "server"):
            for size in (s for s in (smallest, largest) if (condition, s) in cpu_cells[side].index):
                headline[f"{side}_cpu_s_per_mb.{condition}.{size}"] = round(float(cpu_cells[side].loc[(condition, size), "50%"]), 5)
        if (condition, smallest) in utilisation.index:
            headline[f"client_cpu_util.{condition}.{smallest}"] = round(float(utilisation.loc[(condition, smallest), "client_cpu_util"]), 3)
    return headline


def runs_headline(runs_table: pd.DataFrame | None, sizes: tuple[int, int]) -> dict[str, float]:
    """Headline fields of a :func:`labkit.analysis.between_runs` table of MB/s by condition and chunk: the interval
    over runs at the smallest and largest chunk (``mb_per_s.<condition>.<chunk>.runs_lo`` / ``.runs_hi``); none
    without a table (a run made alone)."""
    from labkit.analysis.inference import runs_interval_fields

    return runs_interval_fields(runs_table, lambda key: f"mb_per_s.{key[0]}.{key[1]}" if key[1] in sizes else None)


def pairs_headline(tls: dict[tuple[str, int], Comparison], transport: dict[tuple[str, int], Comparison],
                   pairs: dict[str, tuple[str, str]], sizes: tuple[int, int]) -> dict[str, float]:
    """At the smallest and largest chunk: TLS on − off in MB/s per transport, and HTTP/2 ÷ gRPC (medians) with TLS and without.

    ``tls`` and ``transport`` are :func:`compare_pairs` results; ``pairs``
    every pair compared (name → (A, B)), as :func:`condition_pairs` gives them.
    """
    headline: dict[str, float] = {}
    for (name, size), result in tls.items():
        if size in sizes:
            headline[f"tls_effect.{pairs[name][0]}.{size}"] = round(result.median_diff, 3)
    for (name, size), result in transport.items():
        if size in sizes:
            mode = "tls" if pairs[name][0].endswith("+TLS") else "plain"
            headline[f"http2_vs_grpc.{mode}.{size}"] = round(result.median_b / result.median_a, 3)
    return headline
