"""The load experiment's rules: series of cells, per-request intervals, the cost of a call, the brief's wrk ratios.

A ``labkit load`` run has one row per cell (a transport, a concurrency, a
number of connections, a payload, a keepalive) with the tool's numbers over
the measured window; ``raw/`` keeps every request. These functions are what
the load notebook shows, tested in ``tests/test_analysis_load.py``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from labkit.analysis.hop import PUBLISHED
from labkit.analysis.summary import summarize_with_ci
from labkit.analysis.windows import measured_window
from labkit.parsers import parse_ghz_json, parse_h2load_log
from labkit.parsers.grpcload import parse_grpcload_csv

#: The research brief's wrk figures (experiment 4): average and maximum latency in ms, and req/s, per transport
#: (the published table of :mod:`labkit.analysis.hop`, by its method names).
WRK_PUBLISHED = PUBLISHED.set_index("method")[["avg_ms", "max_ms", "rps"]]


def label_series(cells: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The cells with a ``series`` label (transport and connections, keepalive and payload when they vary), and the series in order.

    A series is what one line of the notebook's figures follows across
    concurrency: ``grpc n=1``, ``grpc-conns n=4 ka=1000ms``, ``http2 n=4 1024B``,
    ``grpc n=1 gzip``, ``grpc n=1 stream=10`` (whose req/s and latency are per
    stream). The payload is named only when the run has several, the server's
    stack (``go``, ``python max-concurrent-streams=8``) only when it has several.
    """
    several_payloads = cells["payload_bytes"].nunique() > 1
    stack_columns = [c for c in ("server_impl", "grpc_options") if c in cells.columns]
    several_stacks = bool(stack_columns) and len(cells[stack_columns].drop_duplicates()) > 1

    def label(row) -> str:
        text = f"{row['transport']} n={int(row['connections'])}"
        if pd.notna(row["keepalive_ms"]):
            text += f" ka={int(row['keepalive_ms'])}ms"
        text += " gzip" if row.get("compression") == "gzip" else ""
        text += f" stream={int(row['messages_per_call'])}" if row.get("rpc") == "stream" else ""
        text += f" {int(row['payload_bytes'])}B" if several_payloads else ""
        if several_stacks:  # the server's implementation, and its options when any
            text += f" {row['server_impl']}" + (f" {row['grpc_options']}" if pd.notna(row.get("grpc_options")) else "")
        return text

    cells = cells.assign(series=cells.apply(label, axis=1))
    keys = ["transport", "connections", "keepalive_ms", *[c for c in ("compression", "rpc") if c in cells.columns],
            "payload_bytes", *(stack_columns if several_stacks else [])]
    order = cells.sort_values(keys)["series"].drop_duplicates()
    return cells, order.tolist()


def with_call_costs(cells: pd.DataFrame) -> pd.DataFrame:
    """The cells with the server's CPU µs per request and the req/s Little's law expects.

    The server's CPU is read over the whole cell, warm-up included, so it is
    divided by the requests of the whole cell at the measured rate. With
    ``in_flight`` requests outstanding, Little's law gives req/s = in flight /
    mean latency: when the tools kept the asked concurrency in flight the two
    agree.
    """
    return cells.assign(
        server_cpu_us_per_request=cells["server_cpu_s"] / (cells["rps"] * (cells["warmup_s"] + cells["duration_s"])) * 1e6,
        littles_law_rps=cells["in_flight"] / (cells["latency_mean_ms"] / 1e3),
    )


def littles_law_gap(cells: pd.DataFrame) -> dict:
    """Measured req/s over Little's law's (:func:`with_call_costs`' ``littles_law_rps``), minus 1, across the cells:
    ``low``, ``high``, ``largest`` (in size), ``cells``, and ``systematic``: every cell's gap on one side of 0 in a
    run of several cells (noise would fall on both sides)."""
    gap = cells["rps"] / cells["littles_law_rps"] - 1
    return {"low": float(gap.min()), "high": float(gap.max()), "largest": float(gap.abs().max()), "cells": int(len(gap)),
            "systematic": bool(len(gap) > 1 and ((gap > 0).all() or (gap < 0).all()))}


def per_request_file(raw_files: str | None, tool: str | None = None) -> str | None:
    """The cell's per-request output among its ``raw_files`` (ghz's JSON report, h2load's log or labkit-go's CSV, kept
    gzipped), or None."""
    names = [n for n in str(raw_files or "").split(",") if n.endswith(".gz") and (tool is None or n.startswith(f"{tool}-"))]
    return names[0] if names else None


def cell_requests(tool: str, text: str, warmup_s: float, duration_s: float) -> pd.DataFrame:
    """A cell's requests in its measured window, from the tool's per-request output.

    ghz reports every call, warm-up included, so the window rule of
    :func:`~labkit.analysis.windows.measured_window` cuts it as ``labkit
    load`` did; h2load logs the measured window only.
    """
    if tool == "ghz":
        return measured_window(parse_ghz_json(text).rows, float(warmup_s), float(duration_s))
    if tool == "labkit-go":
        return message_calls(cell_messages(text, warmup_s, duration_s))
    return parse_h2load_log(text).rows


def cell_messages(text: str, warmup_s: float, duration_s: float) -> pd.DataFrame:
    """The request messages of a labkit-go cell's calls that started in its measured window, each with its own
    latency (:func:`labkit.parsers.grpcload.parse_grpcload_csv`)."""
    return measured_window(parse_grpcload_csv(text).rows, float(warmup_s), float(duration_s), time_column="call_t_utc")


def message_calls(messages: pd.DataFrame) -> pd.DataFrame:
    """The calls of labkit-go's per-message rows, one row each as ghz reports a call: its start (``t_utc``), its
    latency, ``ok`` when every message was answered, its status and its first error ("" for none). The latency and
    status are on a call's last row (a stream's earlier rows are written before its end): ``first`` skips the
    missing ones. A call a signal cut short has no end, so no latency: it is left out, as ghz leaves out the
    calls it did not finish (its answered messages stay in ``messages``)."""
    calls = messages.groupby(["worker", "call"], sort=False, as_index=False).agg(
        t_utc=("call_t_utc", "first"), latency_ms=("call_latency_ms", "first"), ok=("ok", "all"),
        code=("code", "first"), error=("error", lambda errors: next((e for e in errors if e), "")))
    return calls[calls["latency_ms"].notna()].reset_index(drop=True)


def latency_with_ci(cells: pd.DataFrame, requests: pd.DataFrame | None, *, confidence: float = 0.95,
                    n_resamples: int = 1000) -> pd.DataFrame:
    """Per series and concurrency: p50 and p99 from every request with bootstrap intervals, beside the recorded ones.

    ``requests`` has ``series``, ``concurrency``, ``latency_ms`` and ``ok``
    per request; without it (no raw output kept) or with ``n_resamples`` 0
    the recorded percentiles are given without intervals. The recorded p50 and
    p99 are nearest-rank (as ghz computes them), these interpolate.
    """
    if requests is not None and n_resamples:
        latency = summarize_with_ci(requests, "latency_ms", by=["series", "concurrency"], confidence=confidence,
                                    n_resamples=n_resamples)
        latency.index.names = ["series", "concurrency"]
    else:
        latency = cells.rename(columns={"latency_p50_ms": "50%", "latency_p99_ms": "p99", "ok": "count"})[
            ["series", "concurrency", "count", "50%", "p99"]].set_index(["series", "concurrency"])
        latency = latency.assign(**{"50%_lo": np.nan, "50%_hi": np.nan, "p99_lo": np.nan, "p99_hi": np.nan})
    recorded = cells.set_index(["series", "concurrency"])
    return latency.assign(recorded_count=recorded["ok"], recorded_p50=recorded["latency_p50_ms"],
                          recorded_p99=recorded["latency_p99_ms"])


def http2_over_grpc(cells: pd.DataFrame, order: list[str], concurrency: int) -> dict[str, tuple[str, float, float]]:
    """HTTP/2 ÷ gRPC at ``concurrency`` on one connection each: {name: (what, the brief's wrk ratio, this run's)}.

    Empty when the run lacks either series at that concurrency. The brief has
    no server CPU, so its ratio there is NaN.
    """
    at = cells[cells["concurrency"] == concurrency].set_index("series")
    grpc = next((s for s in order if s.startswith("grpc n=1")), None)
    http2 = next((s for s in order if s.startswith("http2 n=1")), None)
    if grpc not in at.index or http2 not in at.index:
        return {}
    g, h, wrk = at.loc[grpc], at.loc[http2], WRK_PUBLISHED
    return {
        "rps": ("req/s", wrk.at["HTTP/2", "rps"] / wrk.at["gRPC", "rps"], h["rps"] / g["rps"]),
        "mean_latency": ("mean latency", wrk.at["HTTP/2", "avg_ms"] / wrk.at["gRPC", "avg_ms"],
                         h["latency_mean_ms"] / g["latency_mean_ms"]),
        "max_latency": ("max latency", wrk.at["HTTP/2", "max_ms"] / wrk.at["gRPC", "max_ms"],
                        h["latency_max_ms"] / g["latency_max_ms"]),
        "server_cpu_per_request": ("server CPU per request", np.nan,
                                   h["server_cpu_us_per_request"] / g["server_cpu_us_per_request"]),
    }


def series_headline(cells: pd.DataFrame, latency: pd.DataFrame, order: list[str], ping_ms: float) -> dict[str, float]:
    """Per series: req/s, p50 and p99 at each concurrency; at the highest, the intervals and server CPU; the call cost at 1.

    ``latency`` is :func:`latency_with_ci`'s table; the call cost is the
    recorded p50 at concurrency 1 minus the ping RTT.
    """
    top = int(cells["concurrency"].max())
    headline: dict[str, float] = {}
    for series in order:
        frame = cells[cells["series"] == series].set_index("concurrency")
        for c in frame.index:
            headline[f"rps.{series}.c={c}"] = round(float(frame.at[c, "rps"]), 2)
        for c in frame.index:
            headline[f"p50_ms.{series}.c={c}"] = round(float(latency.at[(series, c), "50%"]), 3)
            headline[f"p99_ms.{series}.c={c}"] = round(float(latency.at[(series, c), "p99"]), 3)
        if top in frame.index:
            for stat, name in (("50%", "p50_ms"), ("p99", "p99_ms")):
                for bound in ("lo", "hi"):
                    headline[f"{name}.{series}.c={top}_{bound}"] = round(float(latency.at[(series, top), f"{stat}_{bound}"]), 3)
            headline[f"server_cpu_us_per_request.{series}"] = round(float(frame.at[top, "server_cpu_us_per_request"]), 2)
        if 1 in frame.index:
            headline[f"call_cost_ms.{series}"] = round(float(frame.at[1, "latency_p50_ms"] - ping_ms), 3)
    return headline
