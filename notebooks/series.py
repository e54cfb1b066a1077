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
# By default it reads the shipped sample `data/samples/series-wan/` (recorded on
# the local testbed, 100 ms each way) and compares it with
# `data/samples/series-lan/` (1 ms each way); it reads any series run. It shows
#
# 1. every probe's distribution, lost and failed samples counted, with bootstrap
#    confidence intervals for the median;
# 2. a box plot (whiskers at the 5th and 95th percentiles, points beyond drawn
#    one by one) and a violin plot;
# 3. each probe over the send time, with a rolling median;
# 4. what the split says: cold − warm is the cost of opening a connection,
#    warm gRPC − raw TCP is the RPC stack's cost, and each against ping;
# 5. the same numbers on a second run, side by side.
#
# The claims it tests on the run it opened: the 2016 reading of the gap as
# "gRPC overhead", against the brief's account of its flaw (each 2016 echo
# dialled a new connection, so it timed a handshake plus the RPC), and that
# account's round trips: a cold h2c unary call needs at least three (TCP
# handshake, HTTP/2 preface and SETTINGS, the call). Each verdict is taken from
# the interval printed beside it, after Holm's correction over the splits of
# the run. What the run shows is printed below each section, computed from the
# run (`labkit.analysis.probes`); `docs/reproductions/series.md` is what it
# prints for the shipped sample.
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

run_dir = notebooks.run_it_yourself("series", run_it_yourself, run_dir)

# %%
from IPython.display import Markdown, display

from labkit import notebooks, plots
from labkit.analysis import probes as series_probes
from labkit.errors import LabkitError

nb = notebooks.setup("series", run_dir, sample="series-wan", experiment="series", formats=formats, output_dir=output_dir,
                     headline_path=headline_path)
run, export, config = nb.run, nb.export, nb.run.manifest["config"]
this = series_probes.analyse_series(run.samples())
samples, probes = this.samples, this.probes
display(Markdown(
    f"Run `{run.run_id}`: {this.ticks} ticks of {config['interval_s']:g} s from `{config['client']}` to "
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
display(this.tally)
if len(this.failures):
    display(Markdown("Why samples failed:"), this.failures)

# %% [markdown]
# ## Summary per probe
#
# Milliseconds, over the successful samples (`lost` counts the others).
# `50%_lo` … `50%_hi` is a 95 % percentile-bootstrap interval for the median
# (seeded, 2000 resamples).

# %%
display(this.summary[series_probes.SUMMARY_COLUMNS])

# %%
fig, (left, right) = plots.figure(2, 1, height=6.4)
plots.box(samples, by="probe", order=probes, whiskers=(5, 95), ax=left, ylabel="RTT (ms)")
plots.violin(samples, by="probe", order=probes, ax=right)
right.set_ylabel("RTT (ms)")
right.set_title("KDE per probe, quartiles inside", fontsize="small", loc="right")
export(fig, "box")

# %% [markdown]
# ## Over time, tick by tick
#
# The path's round trip (ping), and each step up the split at the same tick:
# what a TCP echo adds to ping, gRPC to the TCP echo, a new channel to a warm
# one. Each part has its own panel and axis, so the largest does not flatten
# the others; each panel's title gives its n (the ticks where both of its
# probes answered: a tick where either failed has no point). A point is one
# tick, the line a rolling median. A shift only the top panel shows is the
# path; one in a lower panel is that step's own.

# %%
drawn = plots.time_panels(series_probes.per_tick_splits(samples, probes), "part", "ms", window=window,
                          titles={"ping": "ping RTT"}, xlabel=f"send time (UTC); line: rolling median of {window} ticks")
fig = drawn[0].figure
export(fig, "time")

# %% [markdown]
# ## What the warm/cold split says
#
# Each row is the difference of two probes' medians (B − A; the rows add up
# along the chain), with a 95 % interval from resampling ticks in blocks with
# both probes together: the probes share one schedule, so they are compared
# tick by tick (`pairs`: the ticks both answered), and what a tick's path
# did moves both at once instead of widening the interval. Then the same in
# round trips (ping's median):
#
# - **cold − warm**: what opening a connection costs. A new gRPC channel pays a
#   TCP handshake (one round trip), and then grpcio's client waits for the
#   server's HTTP/2 SETTINGS frame before it calls the channel ready and sends
#   the request (a second round trip): about two round trips in all, and three
#   for the cold call over ping. This is the part of the 2016 "gRPC overhead"
#   that was connection set-up (the Go client there paid its own share of it).
# - **warm − tcp-echo**: the RPC stack's own cost (HTTP/2 framing, protobuf,
#   the gRPC client and server) over a raw echo on an open connection.
# - **tcp-echo − ping**: an application's round trip over ICMP's (the two
#   user-space hops and the kernel's TCP path).
# - **warm − ping** and **cold − ping**: the whole gap, on a warm channel and
#   as the 2016 client measured it; the chain's parts are shares of the latter.
#
# Each split's verdict: its p-value (a z-test on the resamples) corrected with
# Holm's method over the splits of this run, called at 0.05.

# %%
display(Markdown(f"Round trip (ping median): **{this.ping_rtt:.2f} ms**."), this.differences)

# %%
nb.say(series_probes.split_findings(this), section="What the warm/cold split says")

# %% [markdown]
# ## Between runs
#
# The intervals above resample this run's ticks: they say how well its ticks
# pin down its medians and splits, not how much another run on the same link
# would differ (fresh servers and connections, the machine's load, the path at
# another time). With several runs (`labkit series --runs N`), each probe's
# median and each split per run, pooled or averaged, with a 95 % Student-t
# interval over the runs (the runs as units), and in how many runs each split
# is called. More runs narrow it, longer ones do not.

# %%
runs_headline = notebooks.series_runs_section(nb, this, probes)

# %% [markdown]
# ## A second run: the same probes on another link
#
# On a long path the round trip dominates and the constant costs (the RPC
# stack, the TCP echo's user-space hops) are a small fraction; on a LAN the
# same constant costs are a large part of what a call takes. What is tested:
# cold − warm scales with the round trip (plus the CPU time of setting up a
# channel), so its interval lies above one round trip of each run's own ping;
# warm − tcp-echo does not, so its intervals in ms on the two runs overlap. The
# figure draws every probe in multiples of its own run's ping median.
#
# Resolution: Linux ping prints `time=` with three significant digits, so a
# ping over 100 ms would be known to 1 ms only; labkit's series sends one
# ping per tick and reads its RTT in µs from the summary line instead.

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
    that = series_probes.analyse_series(other.samples())
    this_label, other_label = series_probes.run_labels(config["name"], run.run_id, other.manifest["config"]["name"],
                                                       other.run_id)
    runs = {this_label: this, other_label: that}
    display(Markdown(f"Medians per probe, `{run.run_id}` against `{other.run_id}`:"), series_probes.medians_side_by_side(runs))
    display(Markdown("The split on both runs:"), series_probes.splits_side_by_side(runs))
    nb.say(series_probes.compare_findings(runs), section="A second run")

    fig, axes = plots.figure(1, 2, height=3.4)
    for ax, (label, series) in zip(axes, runs.items()):
        plots.box(series.in_round_trips(), "rtt_in_pings", by="probe", order=series_probes.shared_probes(runs), ax=ax,
                  ylabel="RTT / ping median")
        ax.set_title(f"{label} (ping {series.ping_rtt:.3g} ms)", fontsize="small", loc="left")
    export(fig, "compare")

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
explain_numbers = notebooks.explain_section(nb, by=("probe",))

# %% [markdown]
# ## How much data does this need?
#
# Per probe: the successful samples, the half-width of the median's interval
# now (block bootstrap in tick order: ticks of one path are not independent),
# the samples that would put the median within a tenth of a millisecond either
# side (`halfwidth` below), and whether there are the 299 a p99 needs.

# %%
from labkit.analysis import data_needs

ok_samples = series_probes.answered(samples).sort_values("t_utc_ns")
display(data_needs(ok_samples, "rtt_ms", "probe", halfwidth=0.1))

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
# Written to a small JSON file (`series.json`) that `labkit report` prints and
# the tests check; `sentences` in it holds what the sections above said of the
# run.

# %%
headline = {"ticks": this.ticks, "interval_s": config["interval_s"], **series_probes.series_headline(this),
            **runs_headline, **explain_numbers,
            **{f"claim.{name}": held for name, held in series_probes.split_claims(this).items()}}
if other is not None:
    headline.update({"compare.run_id": other.run_id,
                     **series_probes.series_headline(that, series_probes.shared_probes(runs), prefix="compare.")})

nb.finish(headline, settings={"window": window, "compare_run_dir": compare_run_dir}, **this.as_dict(),
          compare=None if other is None else {"run_id": other.run_id, "run_path": str(other.path), **that.as_dict(tally=False)})
