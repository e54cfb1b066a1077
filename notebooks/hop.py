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
# # The cost of one call: a relay hop over gRPC, HTTP/2 and NATS, against going direct
#
# The original (Apostolov, "The cost of a grpc call", 2025; research brief,
# experiment 4) ran wrk (2 threads, 10 connections, 10 s) on one laptop
# against a front API that answered each request by calling a back API over
# HTTP/2 multiplexing, over gRPC, or over NATS request-reply, and against the
# back API directly. `labkit hop` rebuilds it with Go services on both sides
# (`labkit-go front` and `labkit-go back`, one long-lived client per
# transport), nats-server between them, and a load host, repeating each
# transport in a shuffled order. The load comes from closed loops of as many
# connections as the run's config gives, their cells shuffled together, from
# the tools the run names: wrk, the published tool, whose latencies are
# corrected for coordinated omission (synthetic samples added);
# `labkit-go load`, which sends each connection's next request as soon as its
# last is answered and times and keeps every one; vegeta, which times and
# keeps every request too. How many requests each actually kept in flight is
# the first table.
#
# The published claims it tests: every hop costs latency and req/s against
# going direct, and the transports order direct < gRPC < HTTP/2 < NATS in
# average latency. This notebook reads a `labkit hop`
# run (by default the shipped sample `data/samples/hop-small/`) and shows
#
# 1. each closed-loop cell against Little's law, and the published table
#    beside this run's wrk cells in the same layout;
# 2. the cost of the hop (via − direct) per transport and per load tool,
#    with intervals over **repeats**, the independent units (requests within
#    one cell share a process, a connection and a moment of the machine, so
#    they are not): at capacity (the closed loops) and, where the run has
#    open-loop cells, at light load;
# 3. latency CDFs per transport;
# 4. the CPU each process spends per request, and the load tool's share of
#    the machine;
# 5. what the data says about the published ordering, per load tool, and
#    with what n.
#
# Each load tool is its own family for Holm's correction: their latencies are
# not one measurement, so no family spans the tools, and a finding says
# whether the tools agree or names the tool.

# %% tags=["parameters"]
run_dir = ""  # a run (path, id or unique part of one); empty: the shipped sample data/samples/hop-small
n_resamples = 2000  # bootstrap resamples of the repeats, from ten repeats a side (below, intervals are Student's t)
confidence = 0.95  # of the intervals
formats = "png,svg,pdf"  # figure formats, comma-separated
output_dir = ""  # where figures go; empty: the figures/ directory of the run
headline_path = ""  # the headline JSON file; empty: hop.json in output_dir
halfwidth_ms = 0.05  # the half-width of a cost's interval the "how much data" table asks the repeats for
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

run_dir = notebooks.run_it_yourself("hop", run_it_yourself, run_dir)

# %%
from IPython.display import Markdown, display

from labkit import notebooks, plots
from labkit.analysis import hop

nb = notebooks.setup("hop", run_dir, sample="hop-small", experiment="hop", formats=formats, output_dir=output_dir,
                     headline_path=headline_path)
run, export = nb.run, nb.export
manifest, config = run.manifest, run.manifest.get("config", {})
samples = hop.with_series(run.samples())
order = hop.series_order(samples)
display(Markdown(
    f"Run `{run.run_id}`: {len(samples)} cells, {config.get('repeats')} repeats of "
    f"{', '.join(config.get('via', []))}, {config.get('duration_s'):g} s each, load on `{config.get('load_host')}`, "
    f"front on `{config.get('front')}`, back on `{config.get('back')}`, nats-server on "
    f"`{config.get('nats_host') or config.get('back')}`; tools: "
    + ", ".join(f"{name} ({t.get('version')})" for name, t in manifest.get("tools", {}).items()) + "."
))
display(notebooks.ping_baselines(manifest))
display(samples[["order", "series", "repeat", "requests", "errors", "rps", "latency_mean_ms", "latency_p99_ms",
                 "latency_max_ms", "front_cpu_s", "back_cpu_s", "nats_cpu_s", "error"]].sort_values("order")
        .set_index("order"))
errors, requests = int(samples["errors"].sum()), int(samples["requests"].sum())

# %% [markdown]
# ## Little's law, cell by cell
#
# A closed loop keeps a fixed number of requests in flight (here the
# connections), so its req/s × mean latency ÷ requests in flight is 1 when the
# latencies are the requests' own and the tool sends each next request at
# once; it is less where the tool itself takes time between an answer and its
# next request (fewer requests in flight on average), and nothing but made-up
# latencies can push it above 1. wrk corrects its latency histogram for
# coordinated omission: where a request took longer than wrk's usual
# interval, it adds the requests it would have sent meanwhile, with made-up
# latencies, which can push its mean above what Little's law allows. Each
# tool's ratios, and its cells outside the band 0.95–1.05:

# %%
law = hop.littles_law(samples)
display(hop.littles_law_by_tool(law))
nb.say(hop.littles_law_lines(law), section="littles_law")

# %% [markdown]
# ## The published table, and this run's in its layout
#
# wrk prints the average and maximum latency of one run, its req/s, the
# requests it completed and the bytes it read per second (in MiB: wrk's units
# are binary). Here avg is the mean over repeats of each repeat's mean, max the
# largest of any repeat, and req/s, total requests and transfer/s are means
# per repeat. The post shows its HTTP/2 and gRPC runs in full; of the direct
# and NATS runs only the latencies and req/s are known (NaN below). This
# run's columns are its wrk cells (wrk's corrected view, as published), or
# the cells of its first per-request tool where it has no wrk cells. Then the
# bytes read per request beside the published runs' (whole HTTP/1.1
# responses, which wrk counts), and the requests that failed.

# %%
layout = hop.published_layout(samples)
display(layout)
labkit_bytes, _, _ = hop.bytes_per_request(samples)
nb.say(hop.bytes_lines(samples), section="published_table")

# %% [markdown]
# ## The cost of the hop: via − direct
#
# For each transport, the mean over repeats of its cells' mean latency minus
# the same for `direct` (the load on the back itself), and the same for req/s.
# Costs compare cells of one tool, at the requests in flight that tool kept
# (the table above). The table and the figure are the cells whose latencies
# are each request's own (labkit-go's, else vegeta's, where the run has them:
# the tool is named below); the sentences after them give every closed-loop
# tool's cost, each tool its own family. The interval is over each side's
# repeats: with fewer than ten a side, Welch's t on their means
# (`labkit.analysis.inference.method_for`: a percentile bootstrap of five
# repeats is little more than their range, and covers a difference of means
# about 87 % of the time, not 95 %). `verdict`: whether the cost is called
# after Holm's correction over the tool's transports (with `mde`, the
# smallest cost it could have called, where not). Last, the published costs
# (the post's average via each transport minus direct's) against this run's
# intervals on the published tool's cells.

# %%
cost = hop.hop_cost(samples, "latency_mean_ms", n_resamples=n_resamples, confidence=confidence)
cost_rps = hop.hop_cost(samples, "rps", n_resamples=n_resamples, confidence=confidence)
display(Markdown(f"Measured on the **{hop.measuring_tool(samples)}** cells."),
        cost.join(cost_rps[["cost", "lo", "hi", "verdict"]], rsuffix="_rps"))
with plots.theme():
    fig, axes = plots.figure(1, 2, height=3.4)
    for ax, table, what in ((axes[0], cost, "mean latency via − direct (ms, "), (axes[1], cost_rps, "req/s via − direct (")):
        plots.bars_with_ci(table.assign(repeats=hop.cost_repeats(table)).reset_index(), "via", "cost", "lo", "hi",
                           ax=ax, ylabel=f"{what}{confidence:.0%} CI)", n="repeats", n_unit="repeats a side")
    for ax in axes:
        ax.axhline(0, color="0.4", linewidth=0.8)
export(fig, "cost")
costs = hop.costs_by_tool(samples, "latency_mean_ms", n_resamples=n_resamples, confidence=confidence)
costs_rps = hop.costs_by_tool(samples, "rps", n_resamples=n_resamples, confidence=confidence)
nb.say([*hop.cost_findings(costs, confidence=confidence), *hop.cost_findings(costs_rps, "rps", confidence=confidence),
        *hop.published_cost_findings(costs, confidence=confidence)], section="cost")

# %% [markdown]
# ## At light load: the open loop
#
# A closed loop measures the hop at capacity: its connections always have a
# request in flight. At a fixed request rate well below the closed loops'
# req/s (vegeta's open loop, `labkit hop --rate`), requests do not wait on
# one another for a connection. Each rate's cost per transport, as above
# (mean latency via − direct at that rate, Welch's t over the repeats, their
# number in `n_via` and `n_direct`), with Holm's correction over every rate
# and transport together.

# %%
light = hop.light_load_cost(samples, n_resamples=n_resamples, confidence=confidence)
display(light if len(light) else Markdown("This run has no open-loop cells (`labkit hop --rate`)."))
if len(light):
    nb.say(hop.light_load_findings(light, confidence=confidence), section="light_load")

# %% [markdown]
# ## How much data does this need?
#
# Telling two transports' costs apart needs each cost's interval narrower than
# about half their difference. For each transport: the repeats it has (the
# fewer of its own and direct's), how wide the interval of its cost is now,
# and how many repeats would narrow it to ±`halfwidth_ms` (a parameter; the
# interval of a mean narrows as 1/√n). The repeats are the units: more
# requests per repeat do not narrow it, more repeats do
# (`labkit hop --repeats N`).

# %%
display(hop.repeats_needed(cost, halfwidth=halfwidth_ms))

# %% [markdown]
# ## Latency CDFs per transport
#
# wrk keeps no per-request record; labkit's wrk script prints each run's
# latency percentiles at every 0.1 % from wrk's own microsecond histogram
# (labkit-go, vegeta and ghz keep every request, read the same way). The line
# is each percentile averaged over the repeats; the band spans the fastest and
# the slowest repeat at that percentile. wrk times a failed request (a 502)
# like any other. A series is drawn where the run keeps its cells' raw
# output: a run may leave out the per-request CSVs (tens of MB).

# %%
curves = notebooks.hop_cdfs(run, samples)
if curves is not None:
    kept = [series for series in order if series in set(curves["series"])]  # the series whose requests were kept
    with plots.theme():
        fig, ax = plots.figure(height=3.8)
        plots.quantile_curves(curves, "series", order=kept, low="lowest", high="highest", ax=ax)
    export(fig, "cdf")
    display(curves[curves["percent"].isin([50.0, 90.0, 99.0, 99.9])].pivot(index="series", columns="percent",
                                                                             values="latency_ms").reindex(kept))

# %% [markdown]
# ## CPU per request, by process
#
# Each process's CPU seconds over a cell (user + system, all threads, read from
# `/proc/<pid>/stat` on its host before and after) over the cell's successful
# requests. A direct cell still counts the idle front's CPU, and every cell the
# idle nats-server's, so the processes off a transport's path show what they
# spend while they wait. Then the load tool's own CPU per second of load, and
# the share of the load host's cores it took: what was left for the services.

# %%
cpu = hop.cpu_per_request(samples, n_resamples=n_resamples, confidence=confidence)
display(cpu.set_index(["series", "process"]))
with plots.theme():
    fig, ax = plots.figure(height=3.8)
    plots.bars_with_ci(cpu, "series", "cpu_us", "lo", "hi", by="process", order=order, groups=list(hop.ROLES), ax=ax,
                       ylabel=f"CPU µs per request\n({confidence:.0%} CI over repeats)", n="n", n_unit="repeats")
export(fig, "cpu")
display(hop.load_cpu_share(samples, manifest["hosts"].get(config.get("load_host"), {}).get("cpus_online")))

# %% [markdown]
# ## The published ordering
#
# The post found direct < gRPC < HTTP/2 < NATS in average latency (and the
# reverse in req/s). For each neighbouring pair of that order and each
# closed-loop tool, the difference of the mean latencies over repeats, with
# its interval and test (Welch's t over the repeats). Each tool's pairs are
# one family, corrected with Holm's method, and no family spans the tools:
# only a difference called after it says which of the two was faster on that
# tool, and a sentence says whether the tools agree or which tool called
# what. A pair not told apart gives its MDE, the smallest difference the
# family could have called with 80 % probability: a difference below it is
# one this run could not see, not one shown to be absent.

# %%
findings = hop.ordering_findings(samples, n_resamples=n_resamples, confidence=confidence)
ordering = hop.ordering_by_tool(samples, n_resamples=n_resamples, confidence=confidence)
display(ordering)
nb.say(hop.ordering_lines(ordering, confidence=confidence), section="ordering")

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
# Written to `hop.json`, which `labkit report` prints and the tests check:
# per series `rps.`, `mean_ms.`, `p99_ms.`, `max_ms.` (over repeats), per
# transport `cost_ms.` with `_lo`/`_hi`, `cpu_us.<series>.<process>`, and per
# pair of the published order `order.<later>_vs_<earlier>` (same order,
# reversed, unclear, with `.mde_ms`, or not testable, on the tool of the
# costs) and `order.<tool>.<later>_vs_<earlier>` per tool; per closed-loop tool
# `little.<tool>.lowest`, `.highest` and `.outside` (cells outside 0.95–1.05),
# `measured_on`, the tool of the costs, and per open-loop rate and transport
# `light_cost_ms.<rate>.<via>` with `_lo`/`_hi`.

# %%
headline = hop.headline(samples, cost, cpu, findings, law, requests=requests, errors=errors,
                        bytes_per_request=labkit_bytes, light=light, ordering=ordering)
nb.finish(headline, settings={"n_resamples": n_resamples, "confidence": confidence, "halfwidth_ms": halfwidth_ms},
          published=hop.PUBLISHED.reset_index().to_dict(orient="records"),
          layout=layout.reset_index().to_dict(orient="records"), findings=ordering.to_dict(orient="records"))
