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
from labkit.analysis import compare_groups, summarize_with_ci
from labkit.errors import LabkitError

PROBE_ORDER = ["ping", "echo-warm", "echo-cold", "tcp-echo", "tcp-connect"]
TABLE = ["count", "lost", "mean", "std", "min", "25%", "50%", "50%_lo", "50%_hi", "75%", "p95", "p99", "max"]


def open_series(ref, sample):
    run = notebooks.open_run(ref, sample=sample, experiment="series")
    frame = run.samples()
    probes = [p for p in PROBE_ORDER if p in set(frame["probe"])]
    return run, frame, probes


run, samples, probes = open_series(run_dir, "series-wan")
figures_dir = notebooks.output_dir(run, output_dir)
figure_formats = notebooks.parse_formats(formats)
headline_file = notebooks.headline_file(headline_path, figures_dir, "series")
config = run.manifest["config"]
ticks = int(samples["seq"].nunique())
pd.set_option("display.precision", 3)
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
rows = samples[~samples["duplicate"]]
tally = rows.groupby("probe").agg(ticks=("seq", "nunique"), rows=("ok", "size"), ok=("ok", "sum")).reindex(probes)
tally["failed"] = tally["rows"] - tally["ok"]
tally["duplicates"] = samples[samples["duplicate"]].groupby("probe").size().reindex(probes).fillna(0).astype(int)
display(tally)
errors = rows[~rows["ok"]].groupby(["probe", "error"]).size().rename("rows")
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
export = notebooks.FigureWriter(figures_dir, "series", figure_formats)
figures = export.files  # what the headline JSON lists


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
PAIRS = [("echo-warm", "echo-cold", "connection set-up"), ("tcp-echo", "echo-warm", "RPC stack"),
         ("ping", "tcp-echo", "TCP echo over ICMP"), ("ping", "echo-warm", "warm gRPC over ICMP"),
         ("ping", "echo-cold", "cold gRPC over ICMP (2016)")]


def split(frame, present):
    rtt = frame.loc[frame["ok"] & ~frame["duplicate"] & (frame["probe"] == "ping"), "rtt_ms"].median()
    table = []
    for a, b, meaning in PAIRS:
        if a in present and b in present:
            c = compare_groups(frame, "rtt_ms", "probe", a, b)
            table.append({"B − A": f"{b} − {a}", "meaning": meaning, "median_diff_ms": c.median_diff,
                          "ci_lo_ms": c.median_diff_ci[0], "ci_hi_ms": c.median_diff_ci[1], "in_rtts": c.median_diff / rtt,
                          "p99_diff_ms": c.p99_diff, "mannwhitney_p": c.mannwhitney_p})
    return rtt, pd.DataFrame(table).set_index("B − A")


ping_rtt, differences = split(samples, probes)
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
        other, other_samples, other_probes = open_series(compare_run_dir, "series-lan")
    except LabkitError as exc:  # e.g. the default sample where labkit is installed without data/samples/
        if compare_run_dir:
            raise
        display(Markdown(f"No comparison run: {exc}"))
    if other is not None and other.run_id == run.run_id:  # the run itself, or a copy of it
        other = None
        display(Markdown("The comparison run is this run: nothing to compare."))
comparison_table = None
if other is not None:
    other_summary = summarize_with_ci(other_samples, by="probe").reindex(other_probes)
    other_rtt, other_differences = split(other_samples, other_probes)
    shared = [p for p in probes if p in other_probes]
    labels = {run.run_id: run.manifest["config"]["name"], other.run_id: other.manifest["config"]["name"]}
    if len(set(labels.values())) < 2:
        labels = {run.run_id: run.run_id, other.run_id: other.run_id}
    this_label, other_label = labels[run.run_id], labels[other.run_id]
    medians = pd.DataFrame({
        f"{this_label} median (ms)": summary.loc[shared, "50%"],
        f"{this_label} × ping": summary.loc[shared, "50%"] / ping_rtt,
        f"{other_label} median (ms)": other_summary.loc[shared, "50%"],
        f"{other_label} × ping": other_summary.loc[shared, "50%"] / other_rtt,
    })
    display(Markdown(f"Medians per probe, `{run.run_id}` against `{other.run_id}`:"))
    display(medians)
    comparison_table = pd.concat({this_label: differences[["median_diff_ms", "ci_lo_ms", "ci_hi_ms", "in_rtts"]],
                                  other_label: other_differences[["median_diff_ms", "ci_lo_ms", "ci_hi_ms", "in_rtts"]]},
                                 axis=1)
    display(Markdown("The split on both runs:"))
    display(comparison_table)
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
def short(name):
    return {"echo-cold − echo-warm": "cold_minus_warm", "echo-warm − tcp-echo": "warm_minus_tcp",
            "tcp-echo − ping": "tcp_minus_ping", "echo-warm − ping": "warm_minus_ping",
            "echo-cold − ping": "cold_minus_ping"}[name]


headline: dict = {"ticks": ticks, "interval_s": config["interval_s"], "ping_rtt_ms": round(float(ping_rtt), 3)}
for probe in probes:
    headline[f"count.{probe}"] = int(summary.at[probe, "count"])
    headline[f"lost.{probe}"] = int(summary.at[probe, "lost"])
    headline[f"median_ms.{probe}"] = round(float(summary.at[probe, "50%"]), 3)
    headline[f"p99_ms.{probe}"] = round(float(summary.at[probe, "p99"]), 3)
for name, row in differences.iterrows():
    headline[f"{short(name)}_ms"] = round(float(row["median_diff_ms"]), 3)
    headline[f"{short(name)}_rtts"] = round(float(row["in_rtts"]), 3)
if "echo-cold − echo-warm" in differences.index:
    headline["cold_minus_warm_ci_lo_ms"] = round(float(differences.at["echo-cold − echo-warm", "ci_lo_ms"]), 3)
    headline["cold_minus_warm_ci_hi_ms"] = round(float(differences.at["echo-cold − echo-warm", "ci_hi_ms"]), 3)
if other is not None:
    headline["compare.run_id"] = other.run_id
    headline["compare.ping_rtt_ms"] = round(float(other_rtt), 3)
    for probe in shared:
        headline[f"compare.median_ms.{probe}"] = round(float(other_summary.at[probe, "50%"]), 3)
    for name, row in other_differences.iterrows():
        headline[f"compare.{short(name)}_ms"] = round(float(row["median_diff_ms"]), 3)

result = {
    "notebook": "series",
    "run_id": run.run_id,
    "run_path": str(run.path),
    "experiment": run.manifest["experiment"],
    "settings": {"window": window, "compare_run_dir": compare_run_dir},
    "probes": probes,
    "headline": headline,
    "tally": tally.to_dict(orient="index"),
    "summary": summary.to_dict(orient="index"),
    "differences": differences.to_dict(orient="index"),
    "compare": None if other is None else {
        "run_id": other.run_id, "run_path": str(other.path), "probes": other_probes,
        "summary": other_summary.to_dict(orient="index"), "differences": other_differences.to_dict(orient="index"),
    },
    "figures": figures,
}
notebooks.write_headline(headline_file, result)
display(Markdown(f"Figures in `{figures_dir}`; headline numbers in `{headline_file}`."))
pd.Series(headline, name="value").to_frame()
