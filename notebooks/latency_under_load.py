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
# # Why is my RPC slow under load: the queue it shares, and in which direction
#
# The commonest reason an RPC is slow in production is not on its own connection: a queue it shares with other
# traffic (bufferbloat). A `labkit latency-under-load` run sends the probes of a series (ping, a gRPC echo on a
# warm channel, a raw TCP echo on an open connection) every 100 ms through a timeline: idle, then one bulk TCP
# flow (iperf3, no rate limit) for a while, then idle again. Each cell is one condition: the link's queue
# (droptail of some bandwidth-delay products, or CoDel over the same buffer) and the load's direction (an upload
# from the client's host, or a download to it).
#
# The claims it tests are the classic account of bufferbloat: a droptail queue that a bulk flow fills adds its
# drain time (its size at the link's rate) to every packet behind it, on the load's way only, whatever the packet's
# own transport; CoDel (RFC 8289, target 5 ms) over the same buffer keeps that queue short, and the path responsive
# (round trips per minute, as the IETF responsiveness draft counts them).
#
# This notebook reads such a run (by default the shipped sample `data/samples/under-load/`, recorded on the local
# testbed: 100 Mbit/s, 25 ms each way, droptail of 5 BDP and CoDel) and shows
#
# 1. what the load added to each probe's median, its round trip and each direction apart, with 95 % intervals;
# 2. the queue the link's emulator saw meanwhile: its size as time at the link's rate, and its peak;
# 3. each cell's timeline, flent's RRUL view, and each probe's distribution per condition;
# 4. what the run says, each sentence a tested predicate on its own numbers;
# 5. every probe explained in round trips, with the direction it queued in.

# %% tags=["parameters"]
run_dir = ""  # a latency-under-load run (path, id or unique part of one); empty: the shipped data/samples/under-load
window = 9  # rolling median over this many ticks in the timelines
formats = "png,svg,pdf"  # figure formats, comma-separated
output_dir = ""  # where figures go; empty: the figures/ directory of the run
headline_path = ""  # the headline JSON file; empty: latency_under_load.json in output_dir
run_it_yourself = False  # True: first make a run of your own on the local testbed (root), see below

# %% [markdown]
# ## Run it yourself
#
# Everything below reads one run: by default the shipped sample, recorded with labkit on the local testbed. With
# `run_it_yourself = True` in the parameters, this cell first makes a run of your own the same way (it brings up a
# testbed with the sample's link, deploys labkit to its hosts, runs the experiment with the sample's settings and
# takes the testbed down again), and the notebook reads that run instead. It needs root, and takes about as long
# as the sample's recording (`data/samples/README.md` gives each one's time). The cell shows the code it runs.
# Interrupting it keeps what was measured, and running it again finishes that run.

# %%
from labkit import notebooks

run_dir = notebooks.run_it_yourself("latency_under_load", run_it_yourself, run_dir)

# %%
from IPython.display import Markdown, display

from labkit import notebooks, plots
from labkit.analysis import under_load
from labkit.analysis.oneway import share_a_clock

nb = notebooks.setup("latency_under_load", run_dir, sample="under-load", experiment="latency-under-load",
                     formats=formats, output_dir=output_dir, headline_path=headline_path)
run, export, config = nb.run, nb.export, nb.run.manifest["config"]
samples = run.samples()
shared = share_a_clock(run.manifest, config["client"], config["server"])
added = under_load.added_latency(samples, shared_clock=shared)
queues = under_load.queue_table(run.cell_events())
display(Markdown(
    f"Run `{run.run_id}`: cells of {config['duration_s']:g} s, a tick every {config['interval_s']:g} s from "
    f"`{config['client']}` to `{config['server']}`; the load from {config['load_start_s']:g} s for "
    f"{config['load_s']:g} s (its first {config['ramp_s']:g} s, while the queue fills, left out); queues: "
    f"{', '.join(config['queues'])}; loads: {', '.join(config['loads'])}; probes: {', '.join(config['probes'])}."
))

# %% [markdown]
# ## What the load added
#
# Per condition and probe: the median before the load and during it, and their difference with a 95 % interval
# from resampling each phase's probes in blocks (probes of one timeline are not independent), Holm-corrected over
# the whole table. `rtt` is the round trip; `out` and `back` its two directions, from the servers' own stamps
# (on the testbed the hosts read one clock, so each way is exact; elsewhere the `clock` column says what bounds
# it). `rpm_*`: responsiveness, round trips per minute as the IETF draft computes it (60000 over the mean of the
# round trips up to their 95th percentile).

# %%
display(added.drop(columns=["p", "method", "clock", "clock_bound_ms"]))

# %% [markdown]
# ## The queue the link held
#
# What the testbed's link emulator recorded while each load ran: the queue's limit as the time it takes to drain
# at the link's rate, the most it held (its peak, as the same time), its drops, and the load's goodput.

# %%
display(queues)

# %% [markdown]
# ## Each cell's timeline
#
# flent's RRUL view: each probe's round trip over the cell, a point per probe and the line a rolling median, the
# load shaded (its ramp lighter). Then the warm gRPC probe's two directions apart: which way did the queue delay?

# %%
load = (config["load_start_s"], config["load_start_s"] + config["load_s"])
export(plots.cell_timelines(under_load.answered_or_lost(samples), "rtt_ms", "probe", load=load, ramp_s=config["ramp_s"],
                            window=window, order=config["probes"], ylabel="RTT (ms)"), "timeline")

# %%
warm = under_load.ways_long(samples, shared, "echo-warm", config["client"], config["server"])
export(plots.cell_timelines(warm, "ms", "way", load=load, ramp_s=config["ramp_s"], window=window,
                            ylabel="one way (ms)", what="echo-warm, "), "directions")

# %% [markdown]
# ## Each probe's round trips under load, per condition
#
# The empirical CDF of every probe's round trip while the load ran (its ramp left out), one panel per condition.

# %%
export(plots.cell_cdfs(samples[samples["phase"] == "during"], order=config["probes"]), "cdfs")

# %% [markdown]
# ## What this run says
#
# Each sentence below is printed only where its predicate holds on this run's numbers
# (`labkit.analysis.under_load.claims`), with the interval its verdict was taken from, its n, and Holm's correction
# over the whole table above where a rise is called. The drain time's sentence says either way whether the classic
# account holds, wherever the emulator kept the queue.

# %%
held = under_load.claims(added, queues)
nb.say(under_load.findings(added, queues), section="what_this_run_says")

# %% [markdown]
# ## Every probe under load in round trips (`labkit explain`)
#
# Each warm probe sent while the load ran, cut into one base RTT, the server's own time, what it waited in the
# path's queues and the hosts' own remainder; and one cause for what it took beyond one round trip, with the
# direction it queued in (`out`: the request's way; `back`: the reply's). On the testbed the emulator kept every
# packet's wait in its queue, so each probe's wait is read at its own packets (`evidence` emulator); elsewhere the
# servers' stamps give each way's delay beyond its least (`one-way`). Then, per droptail condition, in how many of
# its probes the cause is queueing on the load's way.

# %%
explain_numbers = notebooks.under_load_explain_section(nb, samples)

# %% [markdown]
# ## Headline numbers
#
# Written to a small JSON file (`latency_under_load.json`) that `labkit report` prints and the tests check.

# %%
headline = {**under_load.headline(added, held), **explain_numbers}
nb.finish(headline, settings={"window": window}, added=added.to_dict(orient="records"),
          queues=queues.to_dict(orient="records"))
