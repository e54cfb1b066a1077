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


def cell_order(runs: list[tuple[dict, pd.DataFrame]]) -> str:
    """How the cells of a run, or of the runs of a ``--runs`` group, were ordered, as their manifests and the cells'
    start times record it: ``runs`` is each run's (manifest, cells). A manifest's ``cell_order`` (a shuffled load,
    upload, under-load run) or a config with ``order: shuffled`` (a sweep's) was shuffled from its seed; a load run
    recorded before labkit shuffled records no order, and ran its cells one after another as it planned them. Whether the runs took them in one order is read from the cells' start times (``t_start_utc_ns``)."""
    configs = [manifest.get("config", {}) for manifest, _ in runs]
    orders = [tuple(cells.sort_values("t_start_utc_ns")["cell_id"].drop_duplicates()) if "t_start_utc_ns" in cells
              else tuple(cells["cell_id"].drop_duplicates()) for _, cells in runs]
    count = len(orders[0])
    # A run that records its realised order (labkit.experiments.order) says whether it shuffled, and from which seed.
    kept = [manifest.get("cell_order") for manifest, _ in runs]
    recorded = {config.get("order") if entry is None else "shuffled" if entry.get("shuffled") else "planned"
                for entry, config in zip(kept, configs)}
    if recorded == {"shuffled"}:
        seeds = ", ".join(str(entry["seed"] if entry is not None else config.get("seed"))
                          for entry, config in zip(kept, configs))
        how = f"in an order shuffled from each run's seed ({seeds})" if len(runs) > 1 else \
              f"in an order shuffled from seed {seeds}"
    elif recorded <= {None}:
        how = "one after another in the order `labkit load` plans them (its manifest records no shuffled order)"
    else:
        how = "in the order its manifest records (" + ", ".join(sorted(str(v) for v in recorded)) + ")"
    text = f"The {count} cells of this run ran {how}"
    if len(runs) > 1:
        distinct = len(set(orders))
        text += (f"; the {len(runs)} runs of its group ran them in the same order, by the cells' start times, so "
                 "whatever drifts during a run falls on the same cells in every run" if distinct == 1 else
                 f"; the {len(runs)} runs of its group ran them in {distinct} different orders, by the cells' start "
                 "times")
    return text + "."


#: Every series is compared with the one a knob away, p50 per request: HTTP/2 against gRPC on one connection each,
#: and a pool of N connections against one (``grpc-conns n=N`` against ``grpc n=1``, ``http2 n=N`` against
#: ``http2 n=1``).
BASE_OF = {"http2": "grpc", "grpc-conns": "grpc"}


def series_pairs(order: list[str]) -> list[tuple[str, str, str]]:
    """(what is compared, series A, series B) for every pair of series one knob apart (:data:`BASE_OF`), the rest of
    their labels (keepalive, payload, stack...) alike."""
    parsed = {}
    for series in order:
        transport, _, rest = series.partition(" n=")
        connections, _, qualifiers = rest.partition(" ")
        parsed[series] = (transport, int(connections), qualifiers)
    by_key = {key: series for series, key in parsed.items()}
    pairs = []
    for series, (transport, connections, qualifiers) in parsed.items():
        if transport == "http2" and connections == 1 and ("grpc", 1, qualifiers) in by_key:
            pairs.append(("HTTP/2 vs gRPC", by_key[("grpc", 1, qualifiers)], series))
        if connections > 1:
            base = ("http2" if transport == "http2" else "grpc", 1, qualifiers)
            if base in by_key:
                pairs.append((f"{connections} connections vs 1", by_key[base], series))
    return pairs


def compare_series(requests: pd.DataFrame | None, order: list[str], *, confidence: float = 0.95,
                   n_resamples: int = 1000) -> pd.DataFrame:
    """B − A of the p50 per request for every pair of :func:`series_pairs` at each concurrency both have, from every
    request in the measured windows (``requests``: ``series``, ``concurrency``, ``latency_ms``, ``ok``, in the order
    the tool logged them), with a block-bootstrap interval (requests under load are not independent:
    :func:`labkit.analysis.inference.two_sample_difference`, time-ordered) and the verdict after Holm's correction
    over every row of the table. Columns: ``comparison``, ``A``, ``B``, ``concurrency``, ``n_a``, ``n_b``, ``a_ms``,
    ``b_ms`` (the medians), ``difference``, ``lo``, ``hi``, ``p``, then ``p_holm``, ``verdict``, ``mde``, ``cell``.
    Empty without the requests (no raw output kept) or without resamples (``n_resamples`` 0: no intervals)."""
    from labkit.analysis.inference import call_table, two_sample_difference

    rows, results = [], []
    ok = requests[requests["ok"]] if requests is not None and n_resamples else None
    for comparison, a_series, b_series in series_pairs(order) if ok is not None else []:
        for concurrency in sorted(set(ok.loc[ok["series"] == a_series, "concurrency"])
                                  & set(ok.loc[ok["series"] == b_series, "concurrency"])):
            a, b = (ok.loc[(ok["series"] == s) & (ok["concurrency"] == concurrency), "latency_ms"].to_numpy(float)
                    for s in (a_series, b_series))
            result = two_sample_difference(a, b, np.median, time_ordered=True, confidence=confidence,
                                           n_resamples=n_resamples)
            results.append(result)
            rows.append({"comparison": comparison, "A": a_series, "B": b_series, "concurrency": int(concurrency),
                         "n_a": result.n_a, "n_b": result.n_b, "a_ms": float(np.median(a)), "b_ms": float(np.median(b)),
                         "difference": result.difference, "lo": result.low, "hi": result.high, "p": result.pvalue})
    columns = ["comparison", "A", "B", "concurrency", "n_a", "n_b", "a_ms", "b_ms", "difference", "lo", "hi", "p"]
    if not rows:
        return pd.DataFrame(columns=[*columns, "p_holm", "verdict", "mde", "cell"])
    return call_table(pd.DataFrame(rows, columns=columns), results, "ms", method="holm")


#: A cell whose echo server used at least this share of one core is called server-bound: the Python echo server
#: (grpcio's, labkit's h2 endpoint) runs its handlers on one core.
SERVER_BOUND_UTIL = 0.9
#: At concurrency 1 a closed loop carries at most 1000 / RTT calls a second; at least this share of it is called
#: held by the round trip.
RTT_BOUND_SHARE = 0.8


def claims(cells: pd.DataFrame, ping_ms: float) -> dict[str, bool]:
    """The findings the load notebook states, each a predicate on the run's own cells:

    - ``rps_grows``: every series with several concurrencies carried more req/s at each higher one;
    - ``rtt_bound``: at concurrency 1, every series carried at least :data:`RTT_BOUND_SHARE` of 1000 / ping RTT;
    - ``server_bound``: some cell's echo server used at least :data:`SERVER_BOUND_UTIL` of a core;
    - ``littles_law_systematic``: measured req/s was on one side of Little's law's in every cell (of several)."""
    grows = [bool((frame.sort_values("concurrency")["rps"].diff().dropna() > 0).all())
             for _, frame in cells.groupby("series") if frame["concurrency"].nunique() > 1]
    at_one = cells[cells["concurrency"] == 1]
    bound = 1000 / ping_ms if ping_ms and np.isfinite(ping_ms) else np.nan
    return {"rps_grows": bool(grows) and all(grows),
            "rtt_bound": bool(len(at_one)) and bool(np.isfinite(bound)) and bool((at_one["rps"] >= RTT_BOUND_SHARE * bound).all()),
            "server_bound": bool((cells["server_cpu_util"] >= SERVER_BOUND_UTIL).any()),
            "littles_law_systematic": littles_law_gap(cells)["systematic"]}


def _signed(value: float, digits: int = 2) -> str:
    return f"{value:+.{digits}f}".replace("-", "−")


def findings(cells: pd.DataFrame, latency: pd.DataFrame, compared: pd.DataFrame, order: list[str],
             ping: dict) -> list[str]:
    """The sentences the load notebook says of a run, each where its predicate (:func:`claims`) holds, with the
    run's numbers and their n: how req/s follows concurrency, what holds a single call in flight, the cost of one
    call, what the echo server's CPU says, Little's law, and every series against the one a knob away
    (:func:`compare_series`, its verdicts after Holm's correction over its rows)."""
    ping_ms = float(ping.get("rtt_avg_ms", np.nan))
    held = claims(cells, ping_ms)
    lines = []
    by_series = {s: cells[cells["series"] == s].sort_values("concurrency") for s in order}
    several = {s: f for s, f in by_series.items() if f["concurrency"].nunique() > 1}

    def rates(frame):
        return ", ".join(f"{r.rps:.0f} at c={int(r.concurrency)}" for r in frame.itertuples())

    if several:
        if held["rps_grows"]:
            lines.append("**req/s rose with every step of concurrency** in every series (one cell each, req/s over "
                         "its measured window): " + "; ".join(f"{s}: {rates(f)}" for s, f in several.items()) + ".")
        else:
            flat = [s for s, f in several.items() if not (f["rps"].diff().dropna() > 0).all()]
            lines.append(f"**req/s stopped rising with concurrency** in {len(flat)} of {len(several)} series (one cell "
                         "each): " + "; ".join(f"{s}: {rates(several[s])}" for s in flat) + ".")
    at_one = cells[cells["concurrency"] == 1].set_index("series").reindex([s for s in order if s in
                                                                           set(cells.loc[cells["concurrency"] == 1, "series"])])
    if len(at_one) and np.isfinite(ping_ms):
        bound = 1000 / ping_ms
        shares = ", ".join(f"{s} {row['rps']:.1f} req/s ({100 * row['rps'] / bound:.0f} %)" for s, row in at_one.iterrows())
        pings = f"mean of {ping.get('received')} pings" if ping.get("received") else "ping"
        if held["rtt_bound"]:
            lines.append(f"**At concurrency 1 the round trip set the rate**: one call in flight allows at most 1000 / "
                         f"{ping_ms:.2f} ms = {bound:.1f} req/s (ping RTT, {pings}), and every series carried at "
                         f"least {100 * RTT_BOUND_SHARE:.0f} % of it: {shares}.")
        else:
            lines.append(f"**At concurrency 1 something beside the round trip held the rate**: of the {bound:.1f} "
                         f"req/s one call in flight allows over a {ping_ms:.2f} ms ping RTT ({pings}), {shares}.")
        costs = []
        for series in at_one.index:
            if (series, 1) not in latency.index:
                continue
            row = latency.loc[(series, 1)]
            interval = (f" [{row['50%_lo'] - ping_ms:.2f}, {row['50%_hi'] - ping_ms:.2f}]"
                        if np.isfinite(row.get("50%_lo", np.nan)) else "")
            costs.append(f"{series} {row['50%'] - ping_ms:.2f} ms{interval} (n = {int(row['count'])})")
        if costs:
            lines.append("**The cost of one call** at concurrency 1, p50 − ping RTT with the p50's 95 % bootstrap "
                         "interval over the cell's requests: " + "; ".join(costs) + ".")
    top = int(cells["concurrency"].max())
    busiest = cells.sort_values("server_cpu_util").iloc[-1]
    if held["server_bound"]:
        bound_cells = cells[cells["server_cpu_util"] >= SERVER_BOUND_UTIL]
        lines.append(f"**The echo server's CPU was the limit** in {len(bound_cells)} of {len(cells)} cells (at least "
                     f"{100 * SERVER_BOUND_UTIL:.0f} % of a core: " + ", ".join(
                         f"{r.series} c={int(r.concurrency)} {r.server_cpu_util:.2f}" for r in bound_cells.itertuples())
                     + ").")
    else:
        lines.append(f"**The echo server's CPU was not the limit**: it stayed below {100 * SERVER_BOUND_UTIL:.0f} % of a core "
                     f"in all {len(cells)} cells (the most: {busiest['server_cpu_util']:.2f} in {busiest['series']} at "
                     f"c={int(busiest['concurrency'])}), so the round trip or the client set req/s up to c={top}.")
    gap = littles_law_gap(cells)
    if held["littles_law_systematic"]:
        side = "below" if gap["high"] < 0 else "above"
        lines.append(f"**Measured req/s was {side} Little's law's** (requests in flight ÷ mean latency) in every one of "
                     f"the {gap['cells']} cells, by {100 * abs(gap['high'] if side == 'below' else gap['low']):.2f} % to "
                     f"{100 * gap['largest']:.2f} %: a gap on one side is systematic, not noise, and this run does not explain "
                     "it.")
    in_flight = cells.set_index(["series", "concurrency"])["in_flight"]
    for comparison in dict.fromkeys(compared["comparison"]):
        rows = compared[compared["comparison"] == comparison]
        parts = []
        for r in rows.itertuples():
            flights = (in_flight.get((r.A, r.concurrency)), in_flight.get((r.B, r.concurrency)))
            flying = f", {flights[1]} against {flights[0]} in flight" if flights[0] != flights[1] else ""
            parts.append(f"{r.B} − {r.A} at c={r.concurrency}: {_signed(r.difference)} ms (95 % interval "
                         f"[{_signed(r.lo)}, {_signed(r.hi)}]; {r.a_ms:.2f} → {r.b_ms:.2f} ms, n = {r.n_a}/{r.n_b} "
                         f"requests{flying}), {_verdict_after_holm(r.verdict, r.mde)}")
        counts = rows["verdict"].value_counts()
        lines.append(f"**{comparison}**, p50 per request: " + "; ".join(parts)
                     + f". Called higher in {counts.get('higher', 0)} and lower in {counts.get('lower', 0)} of these "
                     f"{len(rows)}, after Holm's correction over the {len(compared)} comparisons of this table "
                     "(block bootstrap of each cell's requests in the order they were logged; one cell a side, so "
                     "run-to-run variation is not in the intervals).")
    versus = compared[compared["comparison"] == "HTTP/2 vs gRPC"]
    if len(versus):
        slower = versus[versus["verdict"] == "higher"]
        where = ", ".join(f"c={c}" for c in slower["concurrency"])
        shown = (f"at every one of its {len(versus)} concurrencies" if len(slower) == len(versus) else
                 f"at {len(slower)} of its {len(versus)} concurrencies ({where})" if len(slower) else
                 f"at none of its {len(versus)} concurrencies")
        lines.append(f"**The post's order, HTTP/2 slower than gRPC**: calling the echo directly, this run called "
                     f"HTTP/2's p50 higher than gRPC's {shown} (the comparisons above, Holm over "
                     f"{len(compared)}). The post measured a relay, which this run is not: the `hop` notebook reruns it.")
    c_ref = reference_concurrency(sorted(int(c) for c in cells["concurrency"].unique()))
    if ratios := http2_over_grpc(cells, order, c_ref):
        lines.append(f"**HTTP/2 ÷ gRPC** at c={c_ref}, one connection and one cell each: " + ", ".join(
            f"{label} ×{here:.2f}" for label, _, here in ratios.values()) + " (one echo server process behind both).")
    return lines


def reference_concurrency(concurrencies: list[int]) -> int:
    """The concurrency HTTP/2 and gRPC are set side by side at: 10 where the run has it, else the middle one."""
    return 10 if 10 in concurrencies else concurrencies[len(concurrencies) // 2]


def _verdict_after_holm(verdict: str, mde: float) -> str:
    """A verdict in a sentence: called (after Holm's correction), not called (with the MDE), or not testable."""
    if verdict in ("higher", "lower"):
        return f"called {verdict} after Holm's correction"
    if verdict == "unclear":
        return f"not called after Holm's correction (MDE {mde:.3g} ms)" if np.isfinite(mde) else \
            "not called after Holm's correction"
    return "not testable"


def compare_headline(compared: pd.DataFrame) -> dict[str, float | str]:
    """Headline fields of :func:`compare_series`: ``p50_diff_ms.<comparison>.<B>.c=<N>`` (B − A) and its
    ``.verdict``."""
    from labkit.analysis.inference import key_part

    fields: dict[str, float | str] = {}
    for r in compared.itertuples():
        key = f"p50_diff_ms.{key_part(r.comparison)}.{r.B}.c={r.concurrency}"
        fields[key] = round(float(r.difference), 3)
        fields[f"{key}.verdict"] = r.verdict
    return fields
