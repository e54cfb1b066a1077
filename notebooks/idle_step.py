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
# # The idle-connection step: does a request after an idle second take an extra round trip?
#
# Two grpc-go reports (issues #5599 and #8436; research brief, experiment 1)
# saw, between two cloud VMs 205 ms apart, that with 1 s between calls a
# 14000 B request takes one round trip, 15000 B a mix of one and two, 16000 B
# two, and about 100 KB three; with calls a tenth of a second apart, or a
# 1-byte call on the same channel every quarter second, a request stays at one
# round trip; BBR does not show the step. The explanation tested here is TCP's
# congestion window restart after idle: when a connection has sent nothing for
# longer than one retransmission timeout (RTO ≈ RTT + 200 ms), Linux with
# `net.ipv4.tcp_slow_start_after_idle=1` (the default) and a congestion control
# such as CUBIC shrinks the congestion window (cwnd) back towards the initial
# window of 10 segments, 10 × 1408 B = 14080 B at an MSS of 1408 B.
#
# This notebook reads a `labkit sweep` run, with the other runs made with it
# (`--runs N`); by default it reads the shipped sample `data/samples/idle-step-cubic/`
# and its companions `-2` and `-3` (recorded on the local testbed: 100 ms each
# way, MTU 1460, CUBIC, `tcp_slow_start_after_idle` at 1 and at 0, calls in
# shuffled order). It
#
# 1. shows latency against request size for every condition of the run, in
#    milliseconds and as multiples of the ping RTT measured before the sweep;
# 2. fits the slow-start step model to the calls that step, and locates the
#    step without a model (change point);
# 3. plots the cwnd that `ss -tin` recorded before and after each call, and
#    the window the kernel's restart rule gives at the call's first send;
# 4. predicts each call's number of round trips from its recorded TCP state;
# 5. compares the conditions, with intervals and verdicts corrected for the
#    whole family of comparisons;
# 6. says, from the run's own numbers, which of the published observations it
#    reproduces (`docs/reproductions/idle_step.md` holds what it says of the
#    shipped sample).
#
# It runs on any idle-step run, such as `data/samples/idle-step-knobs/`, which
# adds the other fixes (BBR, short gaps, a background sender, keepalive pings).

# %% tags=["parameters"]
run_dir = ""  # a run (path, id or unique part of one); empty: the shipped sample data/samples/idle-step-cubic
iw = 10  # initial window (segments) of the predicted step; 0: use the window fitted from latency
fit_max_bytes = 32000  # fit the step model to sizes up to this (the first step; 0: every size), see below
robust = True  # fits minimise absolute rather than squared residuals (a few slow calls do not move the step)
formats = "png,svg,pdf"  # figure formats, comma-separated
output_dir = ""  # where figures go; empty: the figures/ directory of the run
headline_path = ""  # the headline JSON file; empty: idle_step.json in output_dir
compare_with = ""  # another run to compare this one with (this run minus it): an id, a path, runs joined with commas
run_it_yourself = False  # True: first make a run of your own on the local testbed (root), see below

# %% [markdown]
# ## Run it yourself
#
# Everything below reads one run (and the runs made with it): by default the shipped sample, recorded with
# labkit on the local testbed. With `run_it_yourself = True` in the parameters,
# this cell first makes a run of your own the same way (it brings up a testbed
# with the sample's link, deploys labkit to its hosts, runs the experiment with
# the sample's settings and takes the testbed down again), and the notebook
# reads that run instead. It needs root, and takes as long as one recording
# (`data/samples/README.md` gives each recording's time; the cell makes one
# run). The cell shows the code it runs. Interrupting it keeps what was
# measured, and running it again finishes that run.

# %%
from labkit import notebooks

run_dir = notebooks.run_it_yourself("idle_step", run_it_yourself, run_dir)

# %%
import numpy as np
import pandas as pd
from IPython.display import Markdown, display

from labkit import notebooks, plots
from labkit.analysis import idle, statistics_named, step_edges, summarize_with_location

nb = notebooks.setup("idle_step", run_dir, sample="idle-step-cubic", experiment="idle-step", formats=formats,
                     output_dir=output_dir, headline_path=headline_path)
run, export = nb.run, nb.export
config = run.manifest.get("config", {})
replicates, recorded = notebooks.replicate_samples(run)
display(Markdown(
    f"Run `{run.run_id}`: {len(run.samples())} calls recorded, {config.get('repeats')} per size in each cell, "
    f"sizes {', '.join(str(s) for s in config.get('sizes', []))} B, call order {config.get('order')}."
    + (f" With the other runs of its `--runs {len(replicates)}` group, {len(recorded)} calls, pooled below; *Between "
       "runs* compares the runs." if len(replicates) > 1 else "")
))

# %% [markdown]
# ## The link and the conditions
#
# The sweep pinged the server's data address before and after the calls; the
# mean of the ping before the calls is the RTT every latency below is divided
# by. Each **condition** is one cell of the sweep: the congestion control in
# use (as `ss` reported it for the socket, not only as requested), the sysctl,
# the idle gap between calls, the background sender and the keepalive
# interval. The first call on each channel is a warm-up and is not recorded;
# failed calls are counted here and left out of the latency figures.

# %%
display(notebooks.ping_baselines(run.manifest))
display(Markdown(notebooks.iperf3_baselines(run.manifest)))

host_sysctls = {name: facts.get("sysctl", {}) for name, facts in run.manifest.get("hosts", {}).items()}
samples, knobs = idle.label_conditions(recorded, host_sysctls)
conditions = list(knobs.index)
samples["rtt_multiple"] = samples["rtt_ms"] / samples["ping_ms"]
calls = samples[samples["ok"] & ~samples["cold"]].copy()
failed = samples[~samples["ok"]]
sizes = sorted(calls["payload_bytes"].unique())
largest = int(sizes[-1])

display(samples.groupby("condition").agg(
    cell=("cell_id", "first"), runs=("replicate", "nunique"), calls=("ok", "size"), ok=("ok", "sum"), cold=("cold", "sum"),
    cc_requested=("cc", "first"), tcp_cc=("cc_used", "first"),
).reindex(conditions))
if skipped := run.row_counts().get("cells_skipped", 0):
    display(Markdown(f"**{skipped} cells skipped**: a host refused a kernel setting (the reasons are in `cells.jsonl`)."))
if len(failed):
    display(Markdown(f"**{len(failed)} failed calls** (kept in the run, left out below):"))
    display(failed[["condition", "payload_bytes", "replicate", "seq", "error"]])

# %% [markdown]
# ## How the request goes on the wire
#
# The client recorded `bytes_acked` before and after every call, so the bytes
# each request put on the wire are known: the payload plus gRPC and HTTP/2
# framing (a HEADERS frame, a 9-byte DATA frame header per 16 KiB, the 5-byte
# gRPC message prefix and the protobuf field header). The smallest excess over
# the payload is that framing; calls with more also carried a small control
# frame (an HTTP/2 PING or its acknowledgement) in the same window. The MSS is
# what `ss` reported for the socket.

# %%
framing = idle.request_framing(calls)
overhead, mss = framing.overhead_bytes, idle.recorded_mss(calls)
nb.say(idle.framing_findings(framing, mss, iw), section="framing")

# %% [markdown]
# ## Latency against request size
#
# Each point is one call; the right-hand axis gives the same latency as a
# multiple of the ping RTT. The table gives the median multiple per condition
# and size.

# %%
medians = calls.pivot_table(index="condition", columns="payload_bytes", values="rtt_multiple", aggfunc="median").reindex(conditions)
display(Markdown("Median RTT of warm calls as a multiple of the ping RTT:"))
display(medians.style.format("{:.2f}×"))

# %% [markdown]
# ## The step model and the change point
#
# The slow-start model: a request of *S* bytes on the wire needs the least *k*
# round trips with iw·(2^k − 1) ≥ ⌈S / MSS⌉ segments, since the window starts
# at iw segments and doubles every round trip; latency is *k* times a base RTT.
# It is fitted to every condition whose latency steps (a change point jump of
# at least half a ping RTT below `fit_max_bytes`), using the calls up to
# `fit_max_bytes`:
#
# - **free window**: only the window in bytes is fitted, from latency alone;
#   the data can place it anywhere between two tested sizes, so the fit reports
#   that bracket and its midpoint;
# - **iw fitted**: the recorded MSS is given, the number of segments fitted;
# - **the predicted step** uses `iw` (the parameter) and the recorded MSS.
#
# Why only up to `fit_max_bytes`: the model assumes the window restarts at
# iw. Linux restarts it lazily and only *halves* cwnd once per RTO of idle time,
# down to iw at the lowest (next sections). Small calls leave a pre-idle cwnd
# that a few halvings bring back to iw; after large calls cwnd has grown, and
# one idle second (two or three RTOs) may halve it too few times to reach iw.
# Beyond the first step the round trips therefore depend on the calls before
# (the sections on `ss` and on each call's round trips below say, for this
# run, which windows the calls started with).
#
# The change point needs no model: it is the split between two adjacent tested
# sizes that best separates two latency levels, with a seeded bootstrap
# bracket (200 resamples, 95 %). Below the table, the findings: where this run
# steps, whether iw × MSS is where the latency puts the window, and whether the
# published step (14000 B one round trip, 15000 B a mix, 16000 B two) is
# reproduced.

# %%
by_condition = {c: calls[calls["condition"] == c] for c in conditions}
fits = {c: idle.fit_step(frame, frame["ping_ms"].iat[0], overhead_bytes=overhead, mss=mss, iw=iw,
                         fit_max_bytes=fit_max_bytes, robust=robust)
        for c, frame in by_condition.items() if frame["payload_bytes"].nunique() >= 2}
step_fits = {c: f for c, f in fits.items() if f.steps}
fit_table = idle.step_table(fits, overhead)
display(fit_table)

reference = next(iter(step_fits), None)  # the first condition that steps is the reference of what follows
nb.say(idle.step_findings(calls, knobs, fits, reference, fit_max_bytes), section="step")

# %%
reference_ping = float(calls["ping_ms"].median())
# One panel per congestion control (so each panel's conditions get distinct colours); the model in the reference's.
panels = list(dict.fromkeys(knobs["cc"]))
with plots.theme():
    # One row per congestion control: each panel keeps the page's width for the sizes it dodges apart.
    fig, axes = plots.figure(len(panels), 1, height=4.4 * len(panels), sharex=True, squeeze=False)
    for ax, cc in zip(axes[:, 0], panels):
        shown = [c for c in conditions if knobs.at[c, "cc"] == cc]
        model = step_fits[reference].model if reference in shown else None
        plots.latency_vs_size(calls[calls["condition"].isin(shown)], fits=[model] if model else [], by="condition",
                              order=shown, step_fit=model, ax=ax)
        ax.set(xscale="log", xlabel="request payload (bytes, log scale)", ylabel="call latency (ms)")
        plots.rtt_axis(ax, reference_ping)
        if model:
            ax.axvline(step_fits[reference].change_point.params["location_bytes"], color="tab:red", linestyle=":",
                       linewidth=1, label=f"change point ({reference})")
        ax.set_title(f"{cc}; dashed: where the model (iw = {step_fits[reference].iw}) predicts\none more round trip"
                     if model else cc, fontsize="small", loc="left")
        plots.legend_below(ax)  # off the calls at small sizes; conditions are moved apart along x (dodged)
export(fig, "latency")

# %% [markdown]
# ## What `ss -tin` shows: a reset applied lazily
#
# The client sampled its socket with `ss -tin` just before and just after every
# call. With the sysctl at 1 one might expect to see cwnd = 10 before every
# call after an idle second, but the reading *before* a call can show the cwnd
# the connection had before it went idle, while that call still took two or
# three round trips.
#
# The reason is in the kernel: the restart is not done by a timer while the
# connection is idle. It is done when the next segment is sent
# (`tcp_slow_start_after_idle_check()` before a send with nothing in flight):
# if the last send (`lastsnd`) is more than one RTO ago, `tcp_cwnd_restart()`
# halves cwnd once for every RTO elapsed, never below the initial window, and
# slow start begins again. `ss` reads cwnd before that first send, so the reset
# shows in the latency and in `lastsnd_ms_before > rto_ms_before`, not in
# `cwnd_before`. The middle panel applies that rule to each call's recorded
# `cwnd_before`, `lastsnd_ms_before` and `rto_ms_before`: the window the
# request actually started with. Congestion controls that set the window
# themselves (BBR has its own `cong_control`) skip the restart, so the sysctl
# is expected to have no effect under BBR. The findings below the table say,
# per condition, how many calls restarted and how many of those restarts `ss`
# did not show.

# %%
initial_window = iw or (int(step_fits[reference].by_iw.params["iw"]) if reference else 10)
tcp = idle.predict_round_trips(calls, initial_window, overhead)
in_tcp = [c for c in conditions if c in set(tcp["condition"])]
with plots.theme():
    fig, axes = plots.figure(1, 3, height=3.6, sharey=True)
    for ax, column, title in zip(axes, ["cwnd_before", "window_at_send", "cwnd_after"],
                                 ["ss before the call", "at the first send (restart applied)", "ss after the call"]):
        plots.cwnd_vs_size(tcp, cwnd=column, mss=mss, iw=initial_window, by="condition", order=in_tcp, ax=ax)
        ax.set(xscale="log", yscale="log", xlabel="", ylabel="cwnd (segments, log scale)" if ax is axes[0] else "")
        ax.set_title(title, fontsize="small")
    axes[1].set_xlabel("request payload (bytes, log scale)")
    # One legend for the three panels, below them: inside one it would cover the calls of its smallest sizes.
    plots.shared_legend(fig, axes, plots.short_labels(in_tcp), ncols=2 if len(in_tcp) > 4 else 3)
export(fig, "cwnd")

display(Markdown("Per condition: cwnd (segments) `ss` showed before and after the calls, calls restarted at their first "
                 "send (idle longer than one RTO), and those whose restart `ss` did not show (a larger cwnd before the call "
                 "than the window it started with):"))
display(idle.restart_summary(tcp, in_tcp))
nb.say(idle.restart_findings(tcp, in_tcp, initial_window), section="restart")

# %% [markdown]
# ## Every call's round trips, predicted from its TCP state
#
# With the window at the first send known, the slow-start rule predicts how
# many round trips each request needs (request bytes on the wire = payload +
# framing). The observed number is the call's latency in ping RTTs, rounded.
# Calls are marked "sent shortly before" when the client had sent something
# less than one smoothed RTT before the call (`lastsnd_ms_before < srtt`): that
# segment was still unacknowledged and took a slot of the window.

# %%
agreement = tcp.groupby("in_flight")["agrees"].agg(calls="size", predicted="sum")
agreement.index = agreement.index.map({False: "nothing in flight", True: "sent shortly before"})
display(agreement)
misses = tcp[~tcp["agrees"]]
display(Markdown("The calls the rule misses:"))
display(misses[["condition", "payload_bytes", "replicate", "seq", "rtt_ms", "rtt_multiple", "cwnd_before", "lastsnd_ms_before",
                "srtt_ms_before", "window_at_send", "predicted_rounds"]])

# %% [markdown]
# How many calls of each size took each number of round trips, and the window
# at their first send behind each count (segments: lowest, highest, and how
# many were back at the initial window); `latest_seq` is the latest such call
# in its cell's order. Below it, the findings: how many calls the rule
# predicts, what the window at the first send did where one size took
# different numbers of round trips, and whether the published three round
# trips at around 100 KB are reproduced.

# %%
display(idle.rounds_by_window(tcp, in_tcp, initial_window))
nb.say(idle.rounds_findings(tcp, knobs, reference, initial_window, overhead), section="round trips")

# %% [markdown]
# Why a call can miss the rule: the client sends small HTTP/2 frames on its own
# between calls. grpc core's bandwidth-delay-product probe (channel argument
# `grpc.http2.bdp_probe`) sends HTTP/2 PING frames at intervals that grow over
# time, so they drift across the idle gap. Two effects follow:
#
# - such a PING sent after more than one RTO of idle time triggers the restart
#   itself, so `ss` shows cwnd = 10 before the call although `lastsnd_ms_before`
#   is small;
# - a PING sent less than one RTT before the call is still in flight when the
#   request goes out, and takes one slot of the 10-segment window: a request of
#   exactly 10 segments then needs a second round trip, and a call's last
#   segment can leave when the PING's acknowledgement arrives, which gives
#   latencies between one and two RTT.
#
# A packet capture of the idle gap (`labkit sweep --capture`, then
# `labkit explain`) shows what the client really sent.

# %% [markdown]
# ## The conditions compared
#
# Each condition against the reference condition, size by size: reference −
# condition, what the reference costs more, by labkit's small-sample rule
# (`labkit.analysis.inference.method_for`): from ten calls a side the
# difference of the medians with a seeded 95 % percentile bootstrap interval;
# below ten the difference of the means with Welch's interval, as a bootstrap
# over three values is no wider than their range. Every condition and size is
# **one family**, corrected with Holm's method: a difference is called higher
# or lower only where it survives it. The 95 % intervals in the table are
# uncorrected, so an interval clear of zero can stand beside a difference the
# correction leaves unclear; the findings name both. An unclear one shows its
# MDE, the smallest difference the family could have called with 80 %
# probability: an MDE well below a round trip says a whole round trip's
# difference would have been seen, an MDE above it that these calls cannot
# tell. The findings then say, for each condition that changes one knob of the
# reference, what the comparison called, and whether the published fixes (the
# sysctl at 0, shorter gaps, a background call, BBR) are reproduced.

# %%
summary = summarize_with_location(calls, "rtt_ms", by=["condition", "payload_bytes"])
summary["median_rtt_multiple"] = summary["50%"] / [calls[calls["condition"] == c]["ping_ms"].iat[0] for c, _ in summary.index]
display(Markdown("Summary per condition and size (ms; `value` [`lo`, `hi`]: the location and its 95 % interval by "
                 "the same rule, the mean with Student's t below ten calls, else the median with a bootstrap):"))
display(summary.reindex(conditions, level=0)[["count", "lost", "min", "50%", "statistic", "value", "lo", "hi", "max",
                                              "median_rtt_multiple"]])

reference_condition = reference or (conditions[0] if conditions else None)
comparisons = idle.compare_to_reference(calls, conditions, reference_condition)
if len(comparisons):
    statistics = statistics_named(comparisons["statistic"])
    display(Markdown(f"Reference: **{reference_condition}**. Reference − condition, the difference of the "
                     f"{statistics}s in ms [95 % interval] and its verdict after Holm's correction over all "
                     f"{len(comparisons)} comparisons, by request size:"))
    display(idle.comparison_table(comparisons).reindex([c for c in conditions if c != reference_condition]))
nb.say(idle.condition_findings(calls, knobs, fits, comparisons, reference, fit_max_bytes), section="conditions")

# %%
with plots.theme():
    at_largest = calls[calls["payload_bytes"] == largest]
    present = [c for c in conditions if c in set(at_largest["condition"])]
    short = plots.short_labels(present)
    fig, ax = plots.figure(height=5.2 if len(present) > 4 else 3.4)  # room for the names set on end
    plots.box(at_largest.assign(condition=at_largest["condition"].map(short)), value="rtt_ms", by="condition",
              order=[short[c] for c in present], ax=ax, ylabel="call latency (ms)", xlabel="", every_value=True)
    plots.rtt_axis(ax, reference_ping)
    ax.tick_params(axis="x", labelrotation=90 if len(present) > 4 else 0, labelsize="x-small")
    common = plots.shared_words(present)  # what the short labels leave out, said once
    ax.set_title(f"{largest} B requests, every call" + (f"; {common}" if common else ""), loc="left", fontsize="small")
export(fig, "largest")

# %% [markdown]
# ## Between runs
#
# The intervals above resample calls, so they say how well this run's calls
# pin down its medians, not how much another run would differ: the
# connections' history, the machine's load and the link move between runs.
# With several runs (`labkit sweep --runs N`, each on fresh servers and
# connections, cells and calls in shuffled order) the median latency in ping
# RTTs is given per run and pooled, and the runs' mean with a 95 % Student-t
# interval, the runs as units (resampling three runs would give about their
# range, a 75 % interval). It narrows only with more runs, not with more calls
# per run. The findings say in how many runs each median gives the same whole
# number of round trips, in how many the published round trips are the
# median, and where the reference's step lies in each run alone.

# %%
runs_table = notebooks.runs_section("sweep", replicates, calls, "rtt_multiple", ["condition", "payload_bytes"],
                                    "Median latency in ping RTTs", order=conditions)
nb.say(idle.runs_findings(runs_table, calls, knobs, reference, largest, robust), section="between runs")

# %% [markdown]
# ## Other links: where the step would be
#
# The first step lies at iw × MSS bytes on the wire, the second at three times
# that (slow start doubles the window each round trip). Raising `initcwnd` on
# the route (`ip route change … initcwnd 32`) raises the window the restart
# falls back to, and so moves the step; loopback's MTU of 65536 gives an MSS of
# up to 65483 B (MTU − 40 B of IPv4/TCP headers − 12 B of timestamps), so ten
# segments there are more than half a megabyte, which is why an in-process
# reproduction over loopback needs payloads of megabytes. The table applies the
# model's arithmetic to this run's MSS and window and to those two cases (the
# sweep has no initcwnd knob yet).

# %%
# Loopback: MTU 65536, advertised MSS 65483 (MTU − 40 B of IPv4/TCP headers − 12 B of timestamps, as ss prints it);
# Linux may send smaller segments while the peer's window is small.
what_if = pd.DataFrame({
    "link": [f"this run (MSS {mss})", f"initcwnd 32 (MSS {mss})", "loopback (MSS 47616)", "loopback (MSS 65483)"],
    "iw": [initial_window, 32, initial_window, initial_window],
    "mss": [mss, mss, 47616, 65483],
})
what_if["first step (B on the wire)"] = what_if["iw"] * what_if["mss"]
what_if["second step (B)"] = 3 * what_if["iw"] * what_if["mss"]
display(what_if.set_index("link"))

# %% [markdown]
# ## Every call in round trips (`labkit explain`)
#
# Each call cut into what it spent: the round trips of a connection's set-up,
# one base RTT (the ping minimum) per round trip the request needed, the
# server's own time, time above the base RTT (queueing), and the client's own
# remainder; and one cause for what it took beyond one round trip. From the
# packets when the run was made with `--capture`, else from the TCP state
# recorded around each call and the kernel's rules (the first line says which
# for how many calls).

# %%
explain_numbers = notebooks.explain_section(nb, by=("cell", "size"))

# %% [markdown]
# ## How much data does this need?
#
# For each condition and size: the warm calls this run has, how wide the
# interval of their median is now (in ping RTTs, resampled in blocks in call
# order), how many calls would put it within a quarter of an RTT either side
# (enough to tell one round trip from two), and whether there are the 299 a
# p99 needs. Sizes near a step can need the most, as their calls may take one
# round trip or two.

# %%
from labkit.analysis import data_needs, data_needs_in_short

needs = data_needs(calls.sort_values("t_start_utc_ns"), "rtt_multiple", ["condition", "payload_bytes"], halfwidth=0.25)
short = data_needs_in_short(needs, halfwidth=0.25)
display(needs)
nb.say(idle.data_needs_findings(short, halfwidth=0.25), section="data needs")

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
# Written to a small JSON file (`idle_step.json`) that `labkit report` prints
# and the tests check. `runs` and `calls`: the runs and warm calls the
# numbers rest on. `step.*` describe the reference condition;
# `rtt_multiple_at_largest.*` is each condition's median latency at the
# largest size in ping RTTs (with several runs, `.runs_lo` and `.runs_hi`
# give the interval over runs); `cost_vs.*` the reference's latency minus the
# condition's at that size (of the medians, or of the means below ten calls a
# side), with its interval and verdict (and its MDE where unclear), for the
# conditions that change one knob of the reference (every comparison is in
# the JSON's `comparisons`): its 95 % interval is uncorrected, its verdict
# taken after Holm's correction from `p_holm` over `cost_vs.family`
# comparisons. `claim.*` are the findings' predicates on this run (a claim
# the run has no condition for is left out); the sentences the notebook said
# are in the JSON's `sentences`.

# %%
headline: dict = {
    "reference_condition": reference or "none",
    "ping_rtt_ms": round(reference_ping, 3),
    "mss_bytes": mss,
    "request_overhead_bytes": overhead,
    "iw_segments": initial_window,
    "iw_x_mss_bytes": initial_window * mss if mss else None,
}
if reference:
    headline.update(idle.step_headline(step_fits[reference], overhead, reference_ping))
headline.update({"runs": len(replicates), "calls": int(len(calls)), "restart_rule.calls": int(len(tcp)), "restart_rule.predicted": int(tcp["agrees"].sum()),
                 "largest_size_bytes": largest, **explain_numbers})
for condition in conditions:
    value = medians.at[condition, largest] if largest in medians.columns else np.nan
    headline[f"rtt_multiple_at_largest.{condition}"] = round(float(value), 3)
headline.update(idle.runs_headline(runs_table, largest))
headline.update(idle.cost_headline(comparisons, knobs, reference_condition, largest))
claims = {**idle.step_claims(calls, knobs, fits, reference), **idle.rounds_claims(tcp, knobs, initial_window, overhead),
          **idle.condition_claims(calls, knobs, fits), **idle.runs_claims(runs_table)}
headline.update({f"claim.{name}": held for name, held in claims.items()})

conditions_detail = [{
    "condition": c, "cell_id": k["cell"], "pair": k["pair"], "cc": k["cc"], "slow_start_after_idle": int(k["ssai"]),
    "gap_s": float(k["gap"]), "background_gap_s": None if pd.isna(k["bg"]) else float(k["bg"]),
    "keepalive_ms": None if pd.isna(k["ka"]) else int(k["ka"]),
    "median_rtt_multiple": {str(int(s)): medians.at[c, s] for s in medians.columns},
    "steps": bool(fit_table.at[c, "steps"]) if c in fit_table.index else False,
} for c, k in knobs.iterrows()]
nb.finish(
    headline,
    settings={"iw": iw, "fit_max_bytes": fit_max_bytes, "robust": robust},
    conditions=conditions_detail,
    fits={c: {"free_window": {"params": f.free.params, "intervals": f.free.intervals},
              "iw_fitted": {"params": f.by_iw.params, "intervals": f.by_iw.intervals},
              "model": {"params": f.model.params},
              "change_point": {"params": f.change_point.params, "intervals": f.change_point.intervals},
              "change_points": f.later, "predicted_steps_bytes": step_edges(f.model, largest)}
          for c, f in step_fits.items()},
    comparisons=comparisons.to_dict(orient="records"),
    restart_rule={"misses": misses[["condition", "payload_bytes", "replicate", "seq", "rtt_ms", "cwnd_before", "lastsnd_ms_before",
                                    "srtt_ms_before", "window_at_send", "predicted_rounds", "observed_rounds"]].to_dict(orient="records"),
                  "by_in_flight": agreement.to_dict(orient="index")},
)
