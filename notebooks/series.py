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
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Ping vs gRPC echo over time: what a call costs above the round trip
#
# The 2016 write-up (research brief, experiment 2) compared `ping` with a Go
# gRPC echo and called the gap "gRPC overhead"; but its client dialled a new
# connection for every call, so each sample was a handshake plus the RPC. A
# `labkit series` run sends, on one shared schedule (one tick per interval,
# every probe once per tick):
#
# - `ping`: ICMP echo, the network's round trip;
# - `echo-warm`: a gRPC echo on one channel kept open for the whole run;
# - `echo-cold`: a gRPC echo on a new channel per call (what 2016 measured);
# - `tcp-echo`: a raw length-prefixed TCP echo on an open connection, the floor
#   for an application-level round trip;
# - `tcp-connect` (when recorded): the time to open a TCP connection.
#
# This notebook reads such a run (by default the shipped sample
# `data/samples/series-wan/`, recorded on the local testbed with 100 ms each way)
# and shows
#
# 1. every probe's distribution, lost and failed samples counted, with bootstrap
#    confidence intervals for the median;
# 2. a box plot (whiskers at the 5th and 95th percentiles, points beyond drawn
#    one by one) and a violin plot;
# 3. each probe over the send time, with a rolling median;
# 4. what the split says: cold − warm is the cost of opening a connection,
#    warm gRPC − raw TCP is the RPC stack's cost, and each against ping;
# 5. the same numbers on a second run (by default the shipped LAN sample
#    `data/samples/series-lan/`, 1 ms each way), side by side.
#
# The 2016 logs themselves (imported, with their parsing and trimming
# questions) are the `ping_vs_echo` notebook's subject; nothing here is trimmed.

# %% tags=["parameters"]
run_dir = ""  # a series run (path, id or unique part of one); empty: the shipped sample data/samples/series-wan
compare_run_dir = ""  # a second series run to compare with; empty: the shipped data/samples/series-lan; "none": no comparison
window = 15  # rolling median over this many samples in the time series
formats = "png,svg,pdf"  # figure formats, comma-separated
output_dir = ""  # where figures go; empty: the figures/ directory of the run
headline_path = ""  # the headline JSON file; empty: series.json in output_dir

# %%
import pandas as pd
from IPython.display import Markdown, display

from labkit import notebooks, plots
from labkit.analysis import probes as series_probes, summarize_with_ci
from labkit.errors import LabkitError

TABLE = ["count", "lost", "mean", "std", "min", "25%", "50%", "50%_lo", "50%_hi", "75%", "p95", "p99", "max"]
nb = notebooks.setup("series", run_dir, sample="series-wan", experiment="series", formats=formats, output_dir=output_dir,
                     headline_path=headline_path)
run, export = nb.run, nb.export
samples = run.samples()
probes, config, ticks = series_probes.probes_of(samples), run.manifest["config"], int(samples["seq"].nunique())
display(Markdown(
    f"Run `{run.run_id}`: {ticks} ticks of {config['interval_s']:g} s from `{config['client']}` to "
    f"`{config['server']}`, {config['payload_bytes']} B payload; probes: {', '.join(probes)}."
))

# %% [markdown]
# ## Every tick of every probe
#
# One row per probe per tick (plus one per duplicate ping reply, which is not a
# second sample). A lost ping, a failed call, or a tick skipped because the
# probe's previous call was still in flight is a row with `ok = False` and its
# reason: the counts below add up to the ticks.

# %%
tally = series_probes.probe_tally(samples, probes)
display(tally)
errors = samples[~samples["duplicate"] & ~samples["ok"]].groupby(["probe", "error"]).size().rename("rows")
if len(errors):
    display(Markdown("Why samples failed:"))
    display(errors.to_frame())

# %% [markdown]
# ## Summary per probe
#
# Milliseconds, over the successful samples (`lost` counts the others).
# `50%_lo` … `50%_hi` is a 95 % percentile-bootstrap interval for the median
# (seeded, 2000 resamples).

# %%
summary = summarize_with_ci(samples, by="probe").reindex(probes)
display(summary[TABLE])

# %%
fig, (left, right) = plots.figure(1, 2, figsize=(11, 4.2))
plots.box(samples, by="probe", order=probes, whiskers=(5, 95), ax=left, ylabel="RTT (ms)")
plots.violin(samples, by="probe", order=probes, ax=right)
right.set_ylabel("RTT (ms)")
right.set_title("KDE per probe, quartiles inside", fontsize="small", loc="right")
export(fig, "box")

# %% [markdown]
# ## Over time
#
# Each probe at its send time, with a rolling median; a lost or failed sample is
# a tick along the bottom. A shift that every probe shares is the path; one that
# only the echo probes show is the server or the client.

# %%
timed = samples[~samples["duplicate"]].assign(t_utc=lambda d: pd.to_datetime(d["t_utc_ns"], unit="ns", utc=True))
fig, ax = plots.figure(figsize=(11, 4.5))
plots.time_series(timed, time="t_utc", by="probe", order=probes, window=window, ax=ax)
ax.set_yscale("log")
ax.set_ylabel("RTT (ms), log scale")
ax.set_xlabel("send time (UTC)")
export(fig, "time")

# %% [markdown]
# ## What the warm/cold split says
#
# Each row is the difference of two probes' medians (B − A) with a 95 %
# bootstrap interval, and the same in round trips (ping's median):
#
# - **cold − warm**: what opening a connection costs. A new gRPC channel pays a
#   TCP handshake (one round trip), and then grpcio's client waits for the
#   server's HTTP/2 SETTINGS frame before it calls the channel ready and sends
#   the request (a second round trip): about two round trips in all, which the
#   shipped WAN sample shows (3 × ping for a cold call). This is the part of the
#   2016 "gRPC overhead" that was connection set-up (the Go client there paid
#   its own share of it).
# - **warm − tcp-echo**: the RPC stack's own cost (HTTP/2 framing, protobuf,
#   the gRPC client and server) over a raw echo on an open connection.
# - **tcp-echo − ping**: an application's round trip over ICMP's (the two
#   user-space hops and the kernel's TCP path).
# - **warm − ping** and **cold − ping**: the whole gap, on a warm channel and
#   as the 2016 client measured it.

# %%
ping_rtt, differences = series_probes.split_latency(samples, probes)
display(Markdown(f"Round trip (ping median): **{ping_rtt:.2f} ms**."))
display(differences)

# %%
said = []
if "echo-cold − echo-warm" in differences.index:
    d = differences.loc["echo-cold − echo-warm"]
    said.append(f"A new channel costs **{d['median_diff_ms']:.1f} ms** more than a warm one "
                f"({d['in_rtts']:.2f} round trips; 95 % CI {d['ci_lo_ms']:.1f} to {d['ci_hi_ms']:.1f} ms): "
                "the handshake, not gRPC.")
if "echo-warm − tcp-echo" in differences.index:
    d = differences.loc["echo-warm − tcp-echo"]
    said.append(f"On an open connection gRPC costs **{d['median_diff_ms']:.2f} ms** more than a raw TCP echo "
                f"(95 % CI {d['ci_lo_ms']:.2f} to {d['ci_hi_ms']:.2f} ms), {d['in_rtts']:.3f} round trips.")
if "echo-warm − ping" in differences.index:
    d = differences.loc["echo-warm − ping"]
    said.append(f"A warm gRPC echo takes **{d['median_diff_ms']:.2f} ms** longer than ping; "
                f"{summary.at['echo-warm', '50%'] / ping_rtt:.3f} × ping's median.")
display(Markdown("\n\n".join(said) or "This run lacks the probes to split."))

# %% [markdown]
# ## A second run: the same probes on another link
#
# On a long path the round trip dominates and the constant costs (the RPC
# stack, the TCP echo's user-space hops) are a small fraction; on a LAN the
# same constant costs are a large part of what a call takes. Cold − warm
# scales with the round trip (plus the CPU time of setting up a channel, which
# shows on a LAN); warm − tcp-echo should not. The figure draws every probe in
# multiples of its own run's ping median.
#
# Resolution: Linux ping prints `time=` with three significant digits, so a
# ping over 100 ms is known to 1 ms only (the WAN sample's ping median is
# exactly 200 ms); differences to ping well below 1 ms on such a link are
# within that rounding.

# %%
other = None
if compare_run_dir.strip().lower() != "none":
    try:
        other = notebooks.open_run(compare_run_dir, sample="series-lan", experiment="series")
    except LabkitError as exc:  # e.g. the default sample where labkit is installed without data/samples/
        if compare_run_dir:
            raise
        display(Markdown(f"No comparison run: {exc}"))
    if other is not None and other.run_id == run.run_id:  # the run itself, or a copy of it
        other = None
        display(Markdown("The comparison run is this run: nothing to compare."))
if other is not None:
    other_samples = other.samples()
    other_probes = series_probes.probes_of(other_samples)
    other_summary = summarize_with_ci(other_samples, by="probe").reindex(other_probes)
    other_rtt, other_differences = series_probes.split_latency(other_samples, other_probes)
    shared = [p for p in probes if p in other_probes]
    this_label, other_label = run.manifest["config"]["name"], other.manifest["config"]["name"]
    if this_label == other_label:
        this_label, other_label = run.run_id, other.run_id
    display(Markdown(f"Medians per probe, `{run.run_id}` against `{other.run_id}`:"))
    display(pd.DataFrame({
        f"{this_label} median (ms)": summary.loc[shared, "50%"], f"{this_label} × ping": summary.loc[shared, "50%"] / ping_rtt,
        f"{other_label} median (ms)": other_summary.loc[shared, "50%"],
        f"{other_label} × ping": other_summary.loc[shared, "50%"] / other_rtt,
    }))
    display(Markdown("The split on both runs:"))
    display(pd.concat({label: frame[["median_diff_ms", "ci_lo_ms", "ci_hi_ms", "in_rtts"]]
                       for label, frame in ((this_label, differences), (other_label, other_differences))}, axis=1))
    said = []
    for name, what in (("echo-warm − tcp-echo", "the RPC stack"), ("echo-cold − echo-warm", "a new connection")):
        if name in differences.index and name in other_differences.index:
            a, b = differences.loc[name], other_differences.loc[name]
            said.append(f"{what.capitalize()} costs {a['median_diff_ms']:.2f} ms ({a['in_rtts']:.2f} round trips) on "
                        f"`{this_label}` and {b['median_diff_ms']:.2f} ms ({b['in_rtts']:.2f} round trips) on `{other_label}`.")
    display(Markdown(" ".join(said)))

    fig, axes = plots.figure(1, 2, figsize=(11, 4.2))
    for ax, label, frame, rtt in ((axes[0], this_label, samples, ping_rtt), (axes[1], other_label, other_samples, other_rtt)):
        plots.box(frame.assign(rtt_in_pings=frame["rtt_ms"] / rtt), "rtt_in_pings", by="probe", order=shared, ax=ax,
                  ylabel="RTT / ping median")
        ax.set_title(f"{label} (ping {rtt:.3g} ms)", fontsize="medium", loc="left")
    export(fig, "compare")

# %% [markdown]
# ## Headline numbers
#
# Written to a small JSON file (`series.json`) that `labkit report` prints and
# the tests check.

# %%
headline: dict = {"ticks": ticks, "interval_s": config["interval_s"], "ping_rtt_ms": round(float(ping_rtt), 3),
                  **series_probes.series_headline(summary, differences, probes)}
if "echo-cold − echo-warm" in differences.index:
    headline["cold_minus_warm_ci_lo_ms"] = round(float(differences.at["echo-cold − echo-warm", "ci_lo_ms"]), 3)
    headline["cold_minus_warm_ci_hi_ms"] = round(float(differences.at["echo-cold − echo-warm", "ci_hi_ms"]), 3)
if other is not None:
    headline.update({"compare.run_id": other.run_id, "compare.ping_rtt_ms": round(float(other_rtt), 3),
                     **series_probes.series_headline(other_summary, other_differences, shared, prefix="compare.")})

nb.finish(
    headline, settings={"window": window, "compare_run_dir": compare_run_dir}, probes=probes,
    tally=tally.to_dict(orient="index"), summary=summary.to_dict(orient="index"),
    differences=differences.to_dict(orient="index"),
    compare=None if other is None else {
        "run_id": other.run_id, "run_path": str(other.path), "probes": other_probes,
        "summary": other_summary.to_dict(orient="index"), "differences": other_differences.to_dict(orient="index"),
    },
)
