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
# # Tuning knobs: which gRPC tuning claims hold on one link, one knob at a time
#
# A Go gRPC tuning article (research brief, experiment 5) recommends: client
# keepalive pings every 10 s with a 3 s timeout; connection pools of 2–4× the
# number of cores; messages under 100 KB; streaming rather than many unary
# calls; and it backs them with ghz P50/P99/QPS numbers before and after.
# These are **claims**, not facts: this notebook checks the ones the recorded
# data can address by switching **one knob** at a time on the same link under
# the same load, and reports each difference with a seeded bootstrap
# confidence interval. The knobs a `labkit load` run can vary:
#
# - **keepalive**: ghz's client keepalive interval against none;
# - **pool**: ghz `--connections` N against 1 (every N the run has);
# - **payload**: the largest request against the smallest, as latency and req/s;
# - **compression**: gzip on every request against none;
# - **rpc**: one bidirectional `EchoStream` of N requests per call against
#   unary `Echo` calls at the same concurrency: latency per call (ghz times a
#   stream as a whole), req/s counting messages;
# - **server**: the grpc-go echo against the Python one; **options**: a server
#   `--grpc-option` set (e.g. 32 MiB static stream and connection windows)
#   against grpc-go's defaults.
#
# By default it reads the shipped sample `data/samples/tuning-go/`: the grpc-go
# server under ghz on the local testbed (25 ms each way), every knob above but
# the server changed on its own from a baseline (`labkit load --design
# one-at-a-time`). Beside that sample, and only there unless they are named in
# the parameters, it also reads the shipped idle-step sweep with a keepalive
# knob (`idle-step-knobs`) and the message-timed runs of *Every message timed*
# (`tuning-messages*`, `tuning-compression*`, `tuning-ladder*`): on a run of
# your own it speaks of that run, and of the runs you name.
#
# Differences are always *knob on − knob off* (for the payload: large − small),
# for the median (p50) and the 99th percentile (p99) of the per-call latencies,
# and for req/s counted in short bins of the measured window. Every finding is
# a sentence computed from the run (`labkit.analysis.tuning_report`,
# `labkit.analysis.message_load`), printed where its predicate holds; the
# article's claims and what labkit's shipped samples give beside them are in
# `docs/reproductions/tuning.md`.

# %% tags=["parameters"]
run_dir = ""  # a load run (path, id or unique part of one); empty: the shipped sample data/samples/tuning-go
idle_run_dir = ""  # an idle-step run with a keepalive knob; empty: the shipped idle-step-knobs beside the shipped sample, else none
rps_bin_s = 0.25  # req/s is counted in bins of this many seconds of the measured window (its CI is over the bins)
n_resamples = 2000  # bootstrap resamples of every confidence interval (seeded: same data, same interval)
formats = "png,svg,pdf"  # figure formats, comma-separated
output_dir = ""  # where figures go; empty: the figures/ directory of the run
headline_path = ""  # the headline JSON file; empty: tuning.json in output_dir
compare_with = ""  # another run to compare this one with (this run minus it): an id, a path, runs joined with commas
run_it_yourself = False  # True: first make a run of your own on the local testbed (root), see below
fair_runs: dict = {}  # "Every message timed": table -> run (streams, streams_lan, compression, compression_100m, ladder, ladder_lan); missing: the shipped one beside the shipped sample, else left out

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

run_dir = notebooks.run_it_yourself("tuning", run_it_yourself, run_dir)

# %%
import pandas as pd
from IPython.display import Markdown, display

from labkit import notebooks, plots
from labkit.analysis import load, statistics_named, summarize_with_ci, tuning, tuning_report
from labkit.analysis.tuning import METRICS
from labkit.units import format_size

nb = notebooks.setup("tuning", run_dir, sample="tuning-go", experiment="load", formats=formats, output_dir=output_dir,
                     headline_path=headline_path)
run, export = nb.run, nb.export
beside_the_sample = notebooks.tuning_beside_its_sample(run)  # only then are the other shipped runs read unasked
idle_run = (notebooks.open_run(idle_run_dir, sample="idle-step-knobs", experiment="idle-step")
            if idle_run_dir or beside_the_sample else None)
config, ping = run.manifest.get("config", {}), run.ping_baseline() or {}
display(Markdown(tuning_report.run_description(run.run_id, len(run.samples()), config, ping)))

# %% [markdown]
# ## The cells as `labkit load` recorded them
#
# One row per cell: req/s, latency percentiles (nearest rank, as ghz computes
# them) and errors over the measured window, and the echo server's CPU. In
# one run each cell runs **once**, one after the other: the intervals below
# describe the spread of calls within a cell, not how much a cell would move
# if run again, and a difference between two cells is the knob *plus*
# whatever else changed between the two. *Between runs* repeats every
# comparison over the run's `--runs` group, when it has one. The order the
# cells ran in is said below, from the run's manifest and the cells' start
# times.

# %%
# The claims are about gRPC: h2load (HTTP/2) cells, if the run has any, are left out here (the `load` notebook has them).
cells, left_out = tuning.ghz_cells(run.samples())
if len(left_out):
    display(Markdown(f"Left out: {len(left_out)} cells without a ghz report (" + ", ".join(
        sorted(f"{t}: {n}" for t, n in left_out["transport"].value_counts().items())) + ")."))
if cells.empty:
    raise ValueError(f"{run.path} has no gRPC (ghz) cell with its raw report")
display(cells[["transport", "concurrency", "payload_bytes", "setting", "requests", "errors", "rps", "latency_p50_ms",
               "latency_p99_ms", "latency_max_ms", "server_cpu_util"]])
failed_cells = cells[cells["error"].notna() & (cells["error"] != "")]
if len(failed_cells):
    display(Markdown(f"**{len(failed_cells)} cells report a problem** (kept, and compared only where calls succeeded):"))
    display(failed_cells[["condition", "error"]])
replicates = run.replicates()
nb.say(load.cell_order([(r.manifest, r.samples()) for r in replicates]), section="order")

# %% [markdown]
# ## Every call, from ghz's raw output
#
# A confidence interval for a p50 or a p99 needs the calls, not the cell's
# summary row. ghz keeps every call's start time, latency and status in its
# JSON report (`raw/ghz-*.json.gz`); the calls that started in the first
# `warmup_s` are the warm-up, and the next `duration_s` seconds are the
# window, the same rule `labkit load` applied to compute each row (checked
# below: the number of calls in the window must equal the row's `requests`).
# req/s gets its interval from the window cut into bins of `rps_bin_s`
# seconds: successful calls started in each bin, divided by its length. A
# stream call counts as its messages in req/s; its latency is the whole
# stream's, as ghz timed it (no message in it was timed on its own).

# %%
per_call = notebooks.tuning_calls(run, cells, rps_bin_s)
n_bins = int(round(config.get("duration_s", 0) / rps_bin_s))
all_calls = pd.concat(per_call.values(), ignore_index=True).merge(
    cells[["cell_id", "condition", "setting", "transport", "concurrency", "connections", "ka", "payload_bytes"]], on="cell_id")
table = summarize_with_ci(all_calls, "latency_ms", by="condition", n_resamples=n_resamples)
display(Markdown(f"{len(all_calls)} calls in the measured windows, {int((~all_calls['ok']).sum())} failed. "
                 "Per cell (ms; `_lo`/`_hi`: 95 % bootstrap interval):"))
display(table[["count", "lost", "50%", "50%_lo", "50%_hi", "p99", "p99_lo", "p99_hi", "max"]])

# %% [markdown]
# ## One knob at a time
#
# Each knob is compared in every combination of the other knobs the run has
# (in a one-at-a-time run: at the baseline of the others, and for the payload
# and concurrency at every setting): same concurrency, same payload.
# The calls of a cell are resampled in blocks of consecutive calls (in the
# order they started; a circular block bootstrap with a data-driven block
# length, 2000 seeded resamples by default), each cell on its own: calls on
# one connection under load are not independent, and an iid resampling makes
# their intervals too narrow. Each comparison gives the difference of the
# medians and of the p99s (a p99 only where both cells have at least 299
# calls), on − off, with a 95 % interval; req/s is the mean over the bins
# (the window's rate), its bins resampled in blocks the same way. A
# difference is called higher or lower only where its p-value stays below
# 0.05 after Holm's correction over every comparison of the table (all
# knobs, all metrics): with dozens of comparisons, some pass alone by chance.
# A comparison without a p-value (a p99 from fewer than 299 calls, a side
# without two successful calls, req/s bins that did not vary) is listed as
# **not testable** and still counts in that family. An **unclear** one shows
# its MDE, the minimum detectable effect: the smallest on − off the table
# could have called with 80 % probability, from the comparison's own
# standard error, at the level the next comparison had to pass (Holm:
# 0.05 / (comparisons − those called)). An on − off well below its MDE is
# one this run could not have seen, not one shown to be absent.
# Even then, one cell per setting measures one connection at one moment;
# only several runs (`labkit load --runs N`) show how far two runs of the
# same setting come apart.

# %%
knobs = tuning.knob_range(cells)
if missing_knobs := [knob for knob in tuning.KNOB_COLUMNS if knob not in knobs]:
    display(Markdown(f"Not varied in this run, so not compared: {', '.join(missing_knobs)}."))
diffs = tuning.compare_knobs(cells, per_call, knobs, n_bins=n_bins, bin_s=rps_bin_s, n_resamples=n_resamples)
knobs = {knob: spec for knob, spec in knobs.items() if (diffs["knob"] == knob).any()}
for knob in knobs:
    display(Markdown(f"**{knob}**: {knobs[knob].meaning}"))
    display(tuning.knob_table(diffs, knob))

# %% [markdown]
# ## How large is a difference when nothing changes on the wire?
#
# ghz is a grpc-go client, and grpc-go sends a keepalive ping only after the
# interval passes **without activity** on the connection. With an interval
# longer than a cell's warm-up + measured window, under continuous load, no
# ping is due in any cell, and the echo server is the same process, started
# once for its stack. So the
# keepalive comparison is, as far as the wire is concerned, an **A/A test**:
# one configuration recorded twice, a few seconds apart (this is grpc-go's
# documented behaviour, not checked here with a capture). Its differences
# are the cell-to-cell variation of this machine (another connection,
# another moment), which the intervals (the spread of calls *within* a cell)
# do not include. A pool or payload difference is only worth reading when it
# is larger than the largest of these.

# %%
cell_s = float(config.get("warmup_s", 0)) + float(config.get("duration_s", 0))
aa = tuning.aa_control(diffs, knobs, cell_s)
others = [knob for knob in knobs if knob != "keepalive"] if aa else []
beyond_table = tuning.beyond_null(diffs, others)
if not aa:
    display(Markdown(f"No A/A control in this run: it has no keepalive off/on pair with an interval longer than a cell "
                     f"({cell_s:g} s)."))
else:
    display(Markdown("Differences of the other knobs larger than the largest A/A difference, and called after the "
                     "correction:"), beyond_table)
nb.say(tuning_report.knob_findings(diffs, knobs, beyond_table) + tuning_report.aa_findings(aa, knobs, cell_s, diffs),
       section="knobs")

# %%
with plots.theme():
    fig, axes = plots.figure(max(1, len(knobs)), len(METRICS), height=2.3 * max(1, len(knobs)) + 0.4, squeeze=False)
    for row_axes, knob in zip(axes, knobs):
        frame = diffs[diffs["knob"] == knob].assign(others=lambda f: f["where"].str.replace(r"c=\d+ ?", "", regex=True))
        said = plots.short_labels(frame["others"].unique())  # "32 MiB windows", not the option string
        for ax, metric in zip(row_axes, METRICS):
            plots.lines_with_ci(frame, "concurrency", f"{metric}_diff", f"{metric}_lo", f"{metric}_hi", by="others", ax=ax,
                                ylabel=f"{metric} on − off ({tuning_report.unit(metric)})", labels=said)
            ax.axhline(0, color="0.3", linewidth=0.8)
            ax.set_xticks(sorted(frame["concurrency"].unique()))
            ax.set_title(f"{knob}: {metric}", loc="left", fontsize="small")
            ax.set_xlabel("concurrency" if knob == list(knobs)[-1] else "")  # the rows share the axis: once, below
            ax.get_legend().remove()
        plots.legend_right(row_axes[-1])  # one legend a row: inside the panels it covered the intervals
export(fig, "differences")

# %% [markdown]
# ## Between runs
#
# Every interval above is within a cell: how well a cell's calls pin down its
# median, not how far the cell would move if run again; the A/A control only
# shows that such moves exist. With several runs of the same cells (`labkit
# load --runs N`, each on fresh servers and connections, in the order said
# under the cells above), each comparison is repeated in every run, and its
# runs are the units: the mean of its on − off over the runs with a Student-t
# interval, a t-test against 0, and a verdict after Holm's correction over the
# whole table (every pair and metric, those that cannot be tested counted).
# With N runs a t-test has N − 1 degrees of freedom, and Holm's level over the
# table is a small fraction of 0.05: with few runs, only a difference that
# every run repeats, by about the same amount, many times the runs' spread, is
# called. A difference the runs gave exactly alike (req/s counts whole calls
# per bin, so a difference can be the same step in every run) has no spread to
# test against: **not testable**, listed and counted. Each unclear verdict
# shows its MDE, and the sentences below the table give, per knob, the largest
# difference that stayed unclear: an interval over the runs that excludes 0
# can still be unclear once the table's size is accounted for.

# %%
# The other runs' comparisons need only their differences, not their intervals: fewer resamples.
between, replicates, runs_headline = notebooks.tuning_runs_section(run, diffs, knobs, n_bins=n_bins, bin_s=rps_bin_s,
                                                                   n_resamples=min(n_resamples, 200))
if between is not None:
    nb.say(tuning_report.runs_findings(between, [r.run_id for r in replicates]), section="runs")

# %% [markdown]
# The distributions behind the differences: every call of the measured
# window (a stream's as a whole), one panel per payload and concurrency, one
# line per setting of the knobs.

# %%
with plots.theme():
    payloads, concurrencies = sorted(cells["payload_bytes"].unique()), sorted(cells["concurrency"].unique())
    fig, axes = plots.figure(len(payloads), len(concurrencies), height=2.4 * len(payloads) + 1.4, squeeze=False)
    said = plots.short_labels(sorted(all_calls["setting"].unique()))
    for (payload, concurrency), ax in zip([(p, c) for p in payloads for c in concurrencies], axes.flat):
        frame = all_calls[(all_calls["payload_bytes"] == payload) & (all_calls["concurrency"] == concurrency)]
        plots.ecdf(frame.assign(setting=frame["setting"].map(said)), "latency_ms", by="setting",
                   order=[said[s] for s in sorted(frame["setting"].unique())], ax=ax)
        plots.readable_log_axis(ax, "x", "call latency (ms, log)" if payload == payloads[-1] else "")
        ax.set_title(f"{format_size(payload)}, concurrency {concurrency}", loc="left", fontsize="small")
    plots.shared_legend(fig, axes)  # each setting is a line in each panel; inside one, its legend hid the curves
export(fig, "ecdf")

# %% [markdown]
# ## Every message timed: streams, compression and the ladder, compared fairly
#
# ghz times a call, so the sections above compare a stream of N requests with
# a unary call at the same concurrency: N times the messages in flight on one
# side, and no message inside the stream timed. These tables come from runs
# made with labkit-go's own load (`labkit load --grpc-tool labkit-go`), which
# times every request from its own send to its own answer, inside a stream too:
#
# - **streams**: each stream cell against unary calls at the same calls in
#   flight, and at the same *messages* in flight (unary at the stream's
#   concurrency × its messages per call);
# - **compression**: gzip against none on random bytes, which no compressor
#   shrinks, and on text (JSON-like records), which gzip can shrink; on a
#   link without a rate limit and on one with a rate limit;
# - **the ladder**: the article's headline is a cumulative ladder, not one knob
#   at a time: default, + keepalive, + a pool of 4 connections, + vtprotobuf
#   (`codec=vtproto` at both ends), + streaming, each step against the one
#   before and everything against the default; on a link with added delay,
#   where every call waits at least the round trip, and on one without, where
#   what each call costs the two ends can set the rate instead.
#
# Each table's units are the runs of its group: each run gives one B − A per
# comparison and metric (a message's p50 and p99, messages answered per
# second), and their mean gets a Student-t interval over the runs. Holm's
# correction runs over each table's rows, those that cannot be tested listed
# (runs that all gave the same messages per second have no spread to test
# against). A finding about a group says in how many of its runs the
# difference had the sign of the mean. The ladder's steps are named by what
# each adds to the one before; its first step is the first value of every knob
# the run lists, whatever those were (a server option among them), and a
# sentence says which. Where another group ran the same load on the same link
# without that option, the two are set side by side (Welch's t over the runs
# of two groups recorded at different times).

# %%
fair, fair_lines, fair_headline = notebooks.tuning_fair_section(fair_runs, confidence=0.95, export=export,
                                                                use_samples=beside_the_sample)
if fair:
    nb.say(fair_lines, section="fair")

# %% [markdown]
# ## Keepalive and the idle penalty
#
# Under continuous load a keepalive interval longer than a cell has nothing
# to do: gRPC sends keepalive pings only on a connection without activity, so
# such load cells can only show that it costs nothing (or how much two runs
# of the same cell differ). The case where a
# keepalive might matter is the idle connection: after more than one RTO
# without sending, Linux restarts the congestion window
# (`tcp_slow_start_after_idle=1`), and a request larger than the initial
# window takes extra round trips (experiment 1, the `idle_step` notebook).
# If keepalive pings were sent during the idle time, the connection would not
# be idle. An idle-step run with a keepalive knob tests it: the calls with
# CUBIC, sysctl 1, the longest gap between calls and no background sender,
# keepalive off and on, latency in multiples of the ping RTT; a size where a
# call without keepalive takes 1.5 ping RTTs or more pays the extra round trip.

# %%
idle_table = idle_diffs = None
if idle_run is None:
    display(Markdown("No idle-step run named (`idle_run_dir`): this section reads the shipped one only beside the "
                     "notebook's own shipped sample, so the idle connection is left out."))
else:
    idle_calls, idle_ping_ms = notebooks.idle_keepalive_calls(idle_run)
    idle_gap_s = float(idle_calls["gap_s"].iat[0])
    idle_table, idle_diffs = tuning.idle_keepalive(idle_calls, n_resamples=n_resamples)
    idle_statistic = statistics_named(idle_table["statistic"])
    idle_what = (f"idle-step run `{idle_run.run_id}`, CUBIC, sysctl 1, {idle_gap_s:g} s between calls, ping RTT "
                 + ", ".join(f"{v:.1f} ms" for v in idle_ping_ms.values()))
    display(Markdown(f"The {idle_what}. Latency in ping RTTs per keepalive setting and request size, its "
                     f"{idle_statistic} over the `count` calls with a 95 % interval (`method`: `t` is Student's, the "
                     "rule below ten calls):"))
    display(idle_table[["count", "statistic", "value", "lo", "hi", "method", "50%", "max"]].round(3))
    display(Markdown("Keepalive on − off (ms) by request size, with its 95 % interval: below ten calls a side the "
                     "difference of the means, Welch's t (`labkit.analysis.inference.method_for`), and the verdict after "
                     "Holm's correction over every size; an unclear one with its MDE (`mde_ms`):"))
    display(idle_diffs.set_index(["keepalive", "payload_bytes"]))
    nb.say(tuning_report.idle_findings(idle_table, idle_diffs, idle_what), section="idle")

    with plots.theme():
        fig, ax = plots.figure(height=3.6)
        plots.lines_with_ci(idle_table.reset_index(), "payload_bytes", "value", "lo", "hi", by="keepalive", logx=True,
                            ax=ax, xlabel="request payload (bytes, log scale)",
                            ylabel=f"latency (ping RTTs; {idle_statistic}, 95 % CI)", n="count", n_unit="calls")
        plots.size_ticks(ax, idle_table.reset_index()["payload_bytes"])
        ax.axhline(1, color="0.3", linewidth=0.8)
        ax.set_title(f"idle connection: CUBIC, sysctl 1, {idle_gap_s:g} s between calls", loc="left", fontsize="small")
    export(fig, "idle_keepalive")

# %% [markdown]
# ## What the data say about each claim
#
# Each of the article's claims against this run's tables, one sentence per
# claim, printed from the numbers above with their n and the family of each
# verdict (`labkit.analysis.tuning_report.findings`):
#
# - **Keepalive 10 s / 3 s.** Under continuous load a keepalive interval longer
#   than a cell sends no ping (grpc-go's documented behaviour), so its pairs
#   are an A/A control: the claim is tested only where pings can matter, on
#   the idle connection of an idle-step run. What the setting is for,
#   noticing a dead peer, is measured apart, by partitioning the testbed's
#   link under a held stream (`bench/keepalive_dead_peer.py`, its figures in
#   docs/experiments.md). Keeping a NAT binding alive needs a middlebox the
#   testbed does not have: **not tested**.
# - **Pools of 2–4× cores.** Each pool size against one connection under the
#   same concurrency, read beside the A/A differences; the "× cores" rule is
#   tested only where the run's hosts record their cores, and the run does
#   not vary them.
# - **Messages under 100 KB.** The largest request against the smallest;
#   whether 100 KB is a threshold takes sizes on both sides of it.
# - **Streaming beats unary.** ghz times a stream call as a whole, so at the
#   same concurrency a stream carries its messages-per-call times the
#   messages in flight: another load. *Every message timed* compares the same
#   messages in flight, each message timed on its own.
# - **The article's ghz P50/P99/QPS.** Its hardware, link and service are not
#   these: absolute numbers do not carry over (**not comparable**); the
#   ladder's directions do.
# - **Compression and server options** are not among the article's claims;
#   their rows above compare gzip (on random bytes in ghz's cells, on random
#   and text payloads in *Every message timed*) and the server's
#   `--grpc-option` set against none. ghz's own windows stay at its
#   grpc-go's defaults.

# %%
nb.say(tuning_report.findings(diffs, knobs, cells, run.manifest, aa=aa, between=between, idle_diffs=idle_diffs,
                              fair=fair, idle=idle_what if idle_run is not None else None), section="claims")

# %% [markdown]
# ## How much data does this need?
#
# Per cell: the successful calls of its window, the half-width of their
# median's interval now (in blocks, in the order the calls started), the
# calls that would put the median within half a millisecond, and whether
# there are the 299 a p99 needs. These are calls within one cell; how far a
# second run of the same cell lands is what `--runs` measures.

# %%
from labkit.analysis import data_needs

display(data_needs(all_calls[all_calls["ok"]].sort_values("t_utc"), "latency_ms", "condition", halfwidth=0.5))

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
# Written to `tuning.json` (what `labkit report` prints and the tests check).
# For each knob and metric: the range of the on − off differences over the
# cells compared, and how many are called higher, lower, or neither after
# Holm's correction, or could not be tested (`ci_not_testable`); over the
# runs, the same counts (`runs.called.*`, `runs.not_testable.*`); the largest
# keepalive (A/A) differences, and how many differences of the other knobs
# exceed them and are called; for the idle penalty, the latency in ping RTTs
# (the mean of its few calls) with keepalive off and on at each size, and the
# difference at each size with its verdict (and its MDE where unclear). Every
# comparison, with its interval, verdict and MDE, is in the JSON's
# `comparisons`.

# %%
headline: dict = {
    "ping_rtt_ms": round(float(ping.get("rtt_avg_ms", float("nan"))), 3),
    "cells": int(len(cells)),
    "calls": int(len(all_calls)),
    "failed_calls": int((~all_calls["ok"]).sum()),
    **tuning.verdict_headline(diffs),
    **runs_headline,
    **tuning_report.aa_headline(aa, beyond_table),
    **(tuning_report.idle_headline(idle_table, idle_diffs) if idle_run is not None else {}),
    **fair_headline,
    "not_tested": tuning_report.untested_claims(cells, knobs),
}

nb.finish(headline, settings={"rps_bin_s": rps_bin_s, "n_resamples": n_resamples},
          idle_run_id=idle_run.run_id if idle_run is not None else None,
          idle_run_path=str(idle_run.path) if idle_run is not None else None, comparisons=diffs.to_dict(orient="records"),
          idle_keepalive=idle_diffs.to_dict(orient="records") if idle_diffs is not None else [])
