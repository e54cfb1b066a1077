# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: labkit
#     language: python
#     name: labkit
# ---

# %% [markdown]
# # The cost of a call under load: gRPC and HTTP/2 against one echo server
#
# The original (Apostolov; research brief, experiment 4) drove a service on
# one laptop with wrk (2 threads, 10 connections, 10 s) directly over HTTP and
# through gRPC, HTTP/2 and NATS request-reply, and compared average and
# maximum latency and req/s. labkit compares transports on one host pair
# under the same load schedule: `labkit load` runs **ghz** (gRPC unary `Echo`,
# on one connection or spread over N) and **h2load** (`POST /echo` to the
# HTTP/2 endpoint of the same `labkit echo serve` process) for a fixed
# duration after an uncounted warm-up, at each concurrency.
#
# This notebook reads a `labkit load` run (by default the shipped sample
# `data/samples/load-small/`: 64 B payloads, concurrency 1, 10 and 50, one and
# four connections, 3 s per cell after 1 s of warm-up, on the local testbed
# with 5 ms each way) and shows
#
# 1. req/s against concurrency per transport;
# 2. p50 and p99 latency against concurrency, with bootstrap intervals from
#    every request the tools logged;
# 3. the echo server's CPU per request;
# 4. HTTP/2 against gRPC, and a pool of connections against one, request by
#    request, each difference with its interval and a verdict corrected for
#    the number of comparisons.
#
# What the run shows is printed under *What this run shows*, computed from
# its cells (`labkit.analysis.load.findings`); the published experiment and
# what labkit's shipped sample gives beside it are in
# `docs/reproductions/load.md`.

# %% tags=["parameters"]
run_dir = ""  # a run (path, id or unique part of one); empty: the shipped sample data/samples/load-small
n_resamples = 1000  # bootstrap resamples of the per-request latency percentiles (0: no intervals)
confidence = 0.95  # of the bootstrap intervals
formats = "png,svg,pdf"  # figure formats, comma-separated
output_dir = ""  # where figures go; empty: the figures/ directory of the run
headline_path = ""  # the headline JSON file; empty: load.json in output_dir
compare_with = ""  # another run to compare this one with (this run minus it): an id, a path, runs joined with commas
run_it_yourself = False  # True: first make a run of your own on the local testbed (root), see below

# %% [markdown]
# ## Run it yourself
#
# Everything below reads one run: by default the shipped sample, recorded with
# labkit on the local testbed. With `run_it_yourself = True` in the parameters,
# this cell first makes a run of your own the same way (it brings up a testbed
# with the sample's link, deploys labkit to its hosts, runs the experiment with
# the sample's settings and takes the testbed down again), and the notebook
# reads that run instead. It needs root, and takes about as long as the
# sample's recording (`data/samples/README.md` gives each one's time). The cell
# shows the code it runs. Interrupting it keeps what was measured, and running
# it again finishes that run.

# %%
from labkit import notebooks

run_dir = notebooks.run_it_yourself("load", run_it_yourself, run_dir)

# %%
import numpy as np
import pandas as pd
from IPython.display import Markdown, display

from labkit import notebooks, plots
from labkit.analysis import load

nb = notebooks.setup("load", run_dir, sample="load-small", experiment="load", formats=formats, output_dir=output_dir,
                     headline_path=headline_path)
run, export = nb.run, nb.export
manifest, config = run.manifest, run.manifest.get("config", {})
display(Markdown(
    f"Run `{run.run_id}`: {len(run.samples())} cells, {config.get('duration_s'):g} s measured after "
    f"{config.get('warmup_s'):g} s of warm-up each; tools: "
    + ", ".join(f"{name} ({t.get('version')})" for name, t in manifest.get("tools", {}).items()) + "."
    + (f" Left out of the matrix: {len(manifest['omitted_cells'])} combinations with fewer requests in flight than "
       "connections." if manifest.get("omitted_cells") else "")
))

# %% [markdown]
# ## The link and the cells
#
# One row per cell: the tool ran for warm-up + duration, and only the
# requests in the measured window count (`rps` is successful requests over
# the window). A **series** is a transport with its number of connections
# (`grpc n=1`: ghz on one connection; `grpc-conns n=4`: ghz spreading the
# same concurrency over four; `http2 n=4`: h2load with four connections,
# concurrency / 4 streams each). Failed requests are counted in `errors`.

# %%
display(notebooks.ping_baselines(manifest))
ping_ms = float(run.ping_baseline()["rtt_avg_ms"])

cells, order = load.label_series(load.with_call_costs(run.samples()))
concurrencies = sorted(int(c) for c in cells["concurrency"].unique())
display(cells[["series", "concurrency", "in_flight", "requests", "errors", "rps", "littles_law_rps", "latency_p50_ms",
               "latency_p90_ms", "latency_p99_ms", "latency_max_ms", "server_cpu_util", "server_cpu_us_per_request", "error"]]
        .sort_values(["series", "concurrency"]).set_index(["series", "concurrency"]))
littles_law = load.littles_law_gap(cells)
display(Markdown(
    f"Ping RTT before the load: **{ping_ms:.2f} ms**. Requests: {int(cells['requests'].sum())} in the measured windows "
    f"of {littles_law['cells']} cells, **{int(cells['errors'].sum())} failed**. Measured req/s over Little's law's "
    f"(in flight ÷ mean latency): from {littles_law['low']:+.1%} to {littles_law['high']:+.1%} per cell."
))
display(Markdown(load.cell_order([(manifest, run.samples())])))

# %% [markdown]
# ## Every request: percentiles with bootstrap intervals
#
# The run keeps both tools' per-request outputs in `raw/` (ghz's JSON report
# with every call, h2load's `--log-file`). They are read with labkit's
# parsers and cut to the measured window as `labkit load` did (ghz: the calls
# that started from `warmup_s` after its first call, for `duration_s`; h2load
# logs the measured window only), so each cell's p50 and p99 get a seeded
# bootstrap interval. The recorded p50/p99 are nearest-rank (as ghz computes
# them); the summary here interpolates, so the two can differ by a fraction of
# the spacing between neighbouring requests.

# %%
def requests_of(row) -> pd.DataFrame | None:
    """The cell's requests in the measured window, from its raw output (None if not kept)."""
    name = load.per_request_file(row["raw_files"])
    if name is None or not (run.raw_dir / name).exists():
        return None
    frame = load.cell_requests(row["tool"], run.raw_text(name), row["warmup_s"], row["duration_s"])
    return frame[["latency_ms", "ok"]].assign(series=row["series"], concurrency=int(row["concurrency"]))


per_request = [requests_of(row) for _, row in cells.iterrows()]
missing_raw = sum(frame is None for frame in per_request)
requests = pd.concat([f for f in per_request if f is not None], ignore_index=True) if missing_raw < len(cells) else None
latency = load.latency_with_ci(cells, requests, confidence=confidence, n_resamples=n_resamples)
count_mismatch = int((latency["count"] != latency["recorded_count"]).sum())
p50_gap = float((latency["50%"] - latency["recorded_p50"]).abs().max())
display(latency[["count", "recorded_count", "50%", "50%_lo", "50%_hi", "recorded_p50", "p99", "p99_lo", "p99_hi",
                 "recorded_p99"]].reindex(order, level=0))
display(Markdown(
    (f"{missing_raw} cells have no raw output (their percentiles are the recorded ones, without intervals). "
     if missing_raw else "")
    + f"Requests re-read from the raw outputs: {count_mismatch} cells whose count differs from the recorded one; "
      f"the largest difference between the interpolated and the recorded p50 is {p50_gap:.3f} ms."
))

# %% [markdown]
# ## Throughput and latency against concurrency
#
# One call in flight waits at least a round trip, so at concurrency 1 a
# closed loop carries at most 1000 / RTT (ms) calls a second. More calls in
# flight add throughput as long as the server and the client keep up; when
# they do not, the extra calls queue and p50 and p99 grow instead.

# %%
with plots.theme():
    fig, axes = plots.figure(1, 2, height=3.4)
    for ax, column, label in zip(axes, ["rps", "server_cpu_us_per_request"], ["req/s (measured window)", "server CPU µs per request"]):
        plots.lines_with_ci(cells, "concurrency", column, by="series", order=order, logx=True, ax=ax,
                            xlabel="concurrency (requests in flight)", ylabel=label)
        ax.set_ylim(bottom=0)
        ax.set_xticks(concurrencies, [str(c) for c in concurrencies])
        ax.minorticks_off()
    axes[0].set_title(f"ping RTT {ping_ms:.1f} ms", loc="left", fontsize="small")
export(fig, "throughput")

with plots.theme():
    fig, axes = plots.figure(1, 2, height=3.4, sharey=True)
    for ax, (column, name) in zip(axes, (("50%", "p50"), ("p99", "p99"))):
        plots.lines_with_ci(latency.reset_index(), "concurrency", column, f"{column}_lo", f"{column}_hi", by="series",
                            order=order, logx=True, ax=ax, xlabel="concurrency (requests in flight)",
                            ylabel=f"{name} latency (ms, 95 % CI)", n="count", n_unit="requests")
        ax.axhline(ping_ms, color="0.4", linestyle="--", linewidth=0.8, label="ping RTT")
        ax.set_xticks(concurrencies, [str(c) for c in concurrencies])
        ax.minorticks_off()
        ax.set_title(name, loc="left", fontsize="small")
    axes[1].get_legend().remove()  # one legend, with the ping line, for both panels
    axes[0].legend(fontsize="x-small")
export(fig, "latency")

# %% [markdown]
# ## The cost of one call
#
# At concurrency 1 a call's latency is the round trip plus what client and
# server spend on it; p50 − ping RTT is that cost. The server's CPU per
# request is the other half of the cost of a call (the Python echo server:
# grpcio's server for gRPC, labkit's `h2` endpoint for HTTP/2; the grpc-go
# one with `--server-impl go`). Whether it is what limits req/s shows in its
# CPU utilisation (1.0: one core busy; a cell at 90 % of a core or more is
# called server-bound); below that, something else (the round trip, the
# client) sets the rate. Its CPU time is read from `/proc` before and after
# each cell, so the warm-up's requests are counted at the measured rate (see
# the formula above) and per-request numbers at concurrency 1, where the
# server is mostly idle, carry its idle wake-ups too.

# %%
top = concurrencies[-1]
at_top, at_one = cells[cells["concurrency"] == top].set_index("series"), cells[cells["concurrency"] == 1].set_index("series")
display(pd.DataFrame({
    "p50 − ping at c=1 (ms)": at_one["latency_p50_ms"] - ping_ms,
    f"req/s at c={top}": at_top["rps"],
    f"server CPU µs/request at c={top}": at_top["server_cpu_us_per_request"],
    f"server CPU util at c={top}": at_top["server_cpu_util"],
}).reindex(order))

# %% [markdown]
# ## HTTP/2 against gRPC, and why not against the wrk figures of the brief
#
# The brief's figures (wrk, 10 connections, one laptop) measured a **relay**:
# a front service calling a back service over HTTP/2, gRPC or NATS. This run
# calls the echo directly, over one connection per transport, so its ratios
# are not the brief's quantity and are not set beside them; `labkit hop` and
# its notebook (`notebooks/hop.py`) rerun the relay. The brief's table is
# shown for reference only. Here HTTP/2 ÷ gRPC at concurrency 10 (or the
# middle one): req/s, latency and the server's CPU per request, one cell
# each; and, request by request, the p50 of HTTP/2 against gRPC and of a pool
# of connections against one at every concurrency both have: B − A with a
# 95 % interval from a block bootstrap of each cell's requests (in the order
# the tool logged them: requests under load are not independent), and a
# verdict only where it survives Holm's correction over every comparison of
# the table. One cell a side measures one connection at one moment: the
# intervals do not hold how far a second run would land.

# %%
display(load.WRK_PUBLISHED)
c_ref = 10 if 10 in concurrencies else concurrencies[len(concurrencies) // 2]
ratios = load.http2_over_grpc(cells, order, c_ref)  # short name -> (label, wrk's ratio, this run's ratio)
if ratios:
    display(Markdown(f"HTTP/2 ÷ gRPC in this run (one connection each, concurrency {c_ref}, one cell each):"))
    display(pd.DataFrame({label: {"this run": b} for label, _, b in ratios.values()}).T)
compared = load.compare_series(requests, order, confidence=confidence, n_resamples=n_resamples)
display(compared[["comparison", "A", "B", "concurrency", "n_a", "n_b", "a_ms", "b_ms", "cell"]]
        .set_index(["comparison", "B", "concurrency"]))

# %% [markdown]
# The raw TCP echo of the brief's transport list is not in `labkit load` (its
# floor is in `labkit series` runs); gRPC streams are (`--rpc stream`), and the
# `tuning` notebook compares them with unary calls.
#
# ## What this run shows
#
# Each sentence is printed only where its predicate holds on this run's
# cells, with their numbers and n: whether req/s rose with every step of
# concurrency, whether at concurrency 1 the calls reached at least 80 % of
# 1000 / RTT (the round trip set the rate), the cost of one call, whether the
# echo server's CPU was the limit, whether req/s fell on one side of Little's
# law in every cell, and the comparisons above.

# %%
nb.say(load.findings(cells, latency, compared, order, run.ping_baseline()), section="findings")

# %% [markdown]
# ## How much data does this need?
#
# Per series and concurrency: the successful requests of the measured
# window, the half-width of their median's interval now (resampled in blocks
# in the order the tool logged them: requests under load are not
# independent), the requests that would put the median within half a
# millisecond, and whether there are the 299 a p99 needs.

# %%
from labkit.analysis import data_needs

if requests is not None:
    display(data_needs(requests[requests["ok"]], "latency_ms", ["series", "concurrency"], halfwidth=0.5))

# %% [markdown]
# ## Before and after (`labkit compare`)
#
# This run against another, when `compare_with` names one (`labkit report RUN --compare-with OTHER`): first what
# differs between their manifests (link, each host's kernel, sysctls and tools, versions, git commit, config),
# then every statistic this notebook reports, cell by cell, as this run minus the other with a 95 % interval,
# and a verdict corrected over the whole table. One run a side, the calls are the units and run-to-run
# variation is not in the intervals (the section says so); `--runs` groups make the runs the units.

# %%
notebooks.compare_section(nb, compare_with)

# %% [markdown]
# ## Headline numbers
#
# Written to `load.json`, which `labkit report` prints and the tests check:
# `rps.<series>.c=<N>` req/s, `p50_ms.` and `p99_ms.` latency (interpolated,
# from every request) with `_lo`/`_hi` bootstrap bounds at the highest
# concurrency, `server_cpu_us_per_request.<series>` at the highest
# concurrency, `call_cost_ms.<series>` (p50 − ping at concurrency 1) and
# `http2_over_grpc.<what>.this_run` (and `.wrk`, the brief's relay ratio,
# kept for reference, not comparable), and each request-by-request comparison
# (`p50_diff_ms.<comparison>.<B>.c=<N>` with its `.verdict`). The JSON's
# `cells` hold every cell, its `sentences` what the run shows.

# %%
headline: dict = {
    "ping_rtt_ms": round(ping_ms, 3),
    "cells": int(len(cells)),
    "requests": int(cells["requests"].sum()),
    "errors": int(cells["errors"].sum()),
    "max_concurrency": top,
    "littles_law_max_deviation": round(littles_law["largest"], 4),
    "raw_count_mismatches": count_mismatch,
    "raw_vs_recorded_p50_max_gap_ms": round(p50_gap, 4),
    **load.series_headline(cells, latency, order, ping_ms),
    **load.compare_headline(compared),
}
for name, (_, published, here) in ratios.items():
    headline[f"http2_over_grpc.{name}.this_run"] = round(float(here), 3)
    if np.isfinite(published):
        headline[f"http2_over_grpc.{name}.wrk"] = round(float(published), 3)

CELL_COLUMNS = ["series", "transport", "concurrency", "connections", "in_flight", "keepalive_ms", "payload_bytes", "requests",
                "errors", "rps", "littles_law_rps", "latency_p50_ms", "latency_p90_ms", "latency_p99_ms", "latency_max_ms",
                "server_cpu_s", "server_cpu_util", "server_cpu_us_per_request"]
nb.finish(
    headline,
    settings={"n_resamples": n_resamples, "confidence": confidence},
    cells=[{**row[CELL_COLUMNS].to_dict(),
            "latency_ci": latency.loc[(row["series"], row["concurrency"]),
                                      ["count", "50%", "50%_lo", "50%_hi", "p99", "p99_lo", "p99_hi"]].to_dict()}
           for _, row in cells.sort_values(["series", "concurrency"]).iterrows()],
    wrk=load.WRK_PUBLISHED.to_dict(orient="index"),
    ratios={name: {"what": label, "wrk": published, "this_run": here, "concurrency": c_ref}
            for name, (label, published, here) in ratios.items()},
)
