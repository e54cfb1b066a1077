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
# # Ping vs gRPC echo: the 2016 table, reproduced and then corrected
#
# In November 2016 Benjamin Bengfort ran `ping` and a Go gRPC echo client side by
# side for an hour, at 1 Hz, from a laptop at home to a university server, and
# published a table of the two latency distributions after trimming outliers
# (research brief, experiment 2). The raw logs are in `data/external/orca-2016/`;
# `labkit import` turns such logs into a run. By default it reads the shipped sample
# `data/samples/orca-2016/`, those logs imported; it reads any run whose probes
# include `ping` (an `import-ping` run has no echo: the echo parts are then skipped).
#
# The published claims this notebook tests on the run it opened:
#
# - **The table.** Per probe, pandas' `describe()` (count, mean, std, min, the
#   quartiles, max; ms) after a trim of |z| ≥ 3 in two passes over ping and echo
#   pooled. Published: ping count 3567, mean 13.037, std 1.877, min 10.616,
#   25% 12.169, 50% 12.747, 75% 13.422, max 42.806; echo count 3538,
#   mean 29.431, std 2.908, min 23.806, 25% 27.366, 50% 28.989, 75% 31.016,
#   max 49.039.
# - **The gap.** The echo's median above ping's, read as what a gRPC call costs.
# - **Its known flaws** (research brief): every echo dialled a new connection, so
#   it timed a handshake plus the RPC; the notebook's pattern dropped the samples
#   Go wrote in seconds; the whiskers were drawn at 1.5×IQR, not at the 5th and
#   95th percentiles the write-up states.
#
# How:
#
# 1. the original reading (a strict, milliseconds-only line pattern) and its
#    trim (|z| < 3 over the probes **pooled**, two passes), set cell by cell
#    against the published table (a cell is reproduced when it is within the
#    table's last digit, a thousandth of a millisecond; a count when it is equal);
# 2. every sample parsed (labkit's importers read every Go duration unit and
#    count every line), the same pooled trim;
# 3. the trim done **within each probe**, and with more passes;
# 4. every sample untrimmed, with 95 % bootstrap intervals, and the gap between
#    the probes' medians with a block-bootstrap interval;
# 5. the box plot the write-up described (whiskers at the 5th and 95th
#    percentiles, points beyond drawn one by one) next to the one it actually
#    drew (whiskers at 1.5×IQR), a violin plot and an ECDF of every sample.
#
# What the run shows is printed below each section, computed from the run
# (`labkit.analysis.ping_vs_echo`); `docs/reproductions/ping_vs_echo.md` is what
# it prints for the shipped sample.

# %% tags=["parameters"]
run_dir = ""  # a run (path, id or unique part of one); empty: the shipped sample data/samples/orca-2016
threshold = 3.0  # trim samples whose |z| is at or above this (the original: 3)
passes = 2  # trimming passes, z recomputed on the survivors each time (the original: 2)
scope = "per-group"  # scope of the last variant: per-group or pooled (the original trimmed pooled)
formats = "png,svg,pdf"  # figure formats, comma-separated
output_dir = ""  # where figures go; empty: the figures/ directory of the run
headline_path = ""  # the headline JSON file; empty: ping_vs_echo.json in output_dir
compare_with = ""  # another run to compare this one with (this run minus it): an id, a path, runs joined with commas
run_it_yourself = False  # True: first make a run of your own on the local testbed (root), see below

# %% [markdown]
# ## Run it yourself
#
# Everything below reads one run: by default the 2016 logs, imported. Those
# cannot be recorded again, but their kind of run can: with
# `run_it_yourself = True` in the parameters, this cell brings up the local
# testbed with a round trip of about 12 ms (the 2016 path's), pings host `b`
# from host `a` 300 times, five a second, imports the log as `labkit import ping`
# would, takes the testbed down, and the notebook reads that run instead (the
# ping half of the comparison; a live ping vs gRPC echo is `labkit series` and
# the `series` notebook). It needs root. The cell shows the code it runs.

# %%
from labkit import notebooks

run_dir = notebooks.run_it_yourself("ping_vs_echo", run_it_yourself, run_dir)

# %%
import dataclasses

from IPython.display import Markdown, display

from labkit import notebooks, plots
from labkit.analysis import ping_vs_echo, summarize_with_ci
from labkit.importers import read_source

nb = notebooks.setup("ping_vs_echo", run_dir, sample="orca-2016", experiment=None, formats=formats, output_dir=output_dir,
                     headline_path=headline_path)
run, export = nb.run, nb.export
if run.manifest.get("experiment") == "series":
    raise ValueError(f"{run.path} is a `labkit series` run: its notebook is notebooks/series.py (this one reads imported logs)")
samples = run.samples()
if "ping" not in set(samples["probe"]):
    raise ValueError(f"{run.path} has no ping samples (probes: {sorted(set(samples['probe']))})")
probes = ping_vs_echo.probe_order(samples)
echo = ping_vs_echo.echo_probe(probes)
display(Markdown(f"Run `{run.run_id}` (experiment `{run.manifest['experiment']}`), probes: {', '.join(probes)}."))

# %% [markdown]
# ## What was imported
#
# One cell per log file. Every line is either parsed or counted as
# unrecognised; a probe with no reply is a row with `ok = False`, so a lost
# sample is counted, not dropped.

# %%
imports = run.manifest.get("imports", [])
tally = ping_vs_echo.sample_tally(samples, probes)
display(ping_vs_echo.imports_table(imports), tally)
nb.say(ping_vs_echo.lost_findings(tally, probes), section="What was imported")

# %% [markdown]
# ## 1. The original: strict, milliseconds-only parsing and pooled trimming
#
# The 2016 notebook read each log with one regular expression per tool,
# anchored at the start of the line, that accepts a time only as digits
# followed by `ms`. Go prints a `time.Duration` in the unit that suits it, so a
# call over a second is logged in seconds (`<seconds>s`) and does not match; nor
# does a line in front of which the terminal echoed a key press (`^[[D`). Such
# samples vanish without a count. Below, the same strict reading is applied to
# the raw files kept in the run's `raw/` directory, every sample it loses is
# listed with its reason and line, and its trimmed table is set against the
# published one.

# %%
# The raw log of every import the 2016 patterns apply to, read as they read it.
strict_texts = {i["cell_id"]: read_source(run.path / i["raw"])[1] for i in imports if i["kind"] in ping_vs_echo.STRICT_2016}
original = ping_vs_echo.original_samples(imports, strict_texts)
dropped = ping_vs_echo.lost_by_2016(samples, original, strict_texts)
display(dropped[["probe", "seq", "rtt_ms", "unit", "reason", "raw_line"]])

# %%
variants = ping_vs_echo.trim_variants(original, samples, probes, scope=scope, threshold=threshold, passes=passes)
display(Markdown(f"**Original** ({variants['original']['parsing']}; |z| < {threshold:g}, {passes} passes, pooled):"))
display(variants["original"]["table"])
if variants["original"]["trim"] is not None:
    display(variants["original"]["trim"].counts.reindex(probes))
display(Markdown("Cell by cell against the published table:"),
        ping_vs_echo.against_published(variants["original"]["table"], echo))
nb.say(ping_vs_echo.strict_reading_findings(samples, original, dropped, len(strict_texts))
       + ping_vs_echo.published_findings(variants, probes, echo, threshold=threshold, passes=passes),
       section="The original")

# %% [markdown]
# ## 2. Every sample parsed, the same pooled trimming
#
# labkit's importer reads every Go duration unit, keeps the line with the
# echoed key press, and marks ping's lost probes `ok = False` (they are never
# trimmed and never counted as samples). The trimming is unchanged. What can
# change, and why:
#
# - **Parsing.** Samples the strict pattern lost come back; when they are the
#   slowest calls, they are also the ones a trim reacts to most.
# - **Pooled z-scores.** The original scored ping and echo *together*. When the
#   two probes' distributions sit apart, the pooled mean lies between them and
#   the pooled σ measures the gap between them as much as either probe's spread:
#   |z| ≥ 3 can then only cut the slow end, and how much it cuts depends on the
#   mix of the two.
# - **A few extreme samples.** A sample of seconds among milliseconds inflates
#   the first pass's σ and raises its cut-off, so that pass removes fewer; with
#   only two passes, samples the original trimmed can survive. A trim whose
#   result moves with a handful of points is a choice to state, not a neutral
#   cleaning step.
#
# The table of cut-offs gives each pass's mean, σ and cut-offs.

# %%
corrected = variants["corrected_pooled"]
display(corrected["table"], corrected["trim"].counts.reindex(probes))
seconds = ping_vs_echo.seconds_valued(samples)
display(Markdown("Samples over one second and the trimming pass that removed each (NaN: kept):"),
        ping_vs_echo.fate_of_slow_samples(samples, variants, over_ms=1000))
display(ping_vs_echo.cutoffs_side_by_side(variants, ["original", "corrected_pooled"]))
nb.say(ping_vs_echo.pooled_trim_findings(variants, probes, threshold=threshold, passes=passes),
       section="Every sample parsed")

# %% [markdown]
# ## 3. Trimming within each probe
#
# Scoring each probe against its own mean and σ removes what is unusual *for
# that probe*. Then the same trim with more passes (2, 3, 5 and 10): a trim
# that converged keeps the same samples from some pass on; one that keeps
# cutting has a result that is a choice of the number of passes.

# %%
last_key = list(variants)[-1]
last = variants[last_key]
display(Markdown(f"**{last_key}** (labkit parsing; |z| < {threshold:g}, {passes} passes, {last['scope']}):"))
display(last["table"], last["trim"].counts.reindex(probes))
display(Markdown("The three variants side by side (count, median, max):"), ping_vs_echo.variants_side_by_side(variants))
by_passes = ping_vs_echo.kept_by_passes(samples, probes, scope=last["scope"], threshold=threshold)
display(Markdown(f"Samples kept after {', '.join(map(str, by_passes.index))} passes ({last['scope']}, |z| < {threshold:g}):"),
        by_passes)
nb.say(ping_vs_echo.own_trim_findings(variants, probes, threshold=threshold, passes=passes, by_passes=by_passes),
       section="Trimming within each probe")

# %% [markdown]
# ## Every sample, untrimmed, with bootstrap confidence intervals
#
# Trimming is not needed to describe these distributions: the median and the
# high percentiles already resist outliers, and nothing is hidden. The table's
# intervals are 95 % percentile-bootstrap intervals (seeded, 2000 resamples)
# that take the samples as independent; an hour of samples of one path drifts,
# so they are too narrow, and the gap between the probes' medians is resampled
# in blocks of consecutive samples instead (labkit.analysis.block_bootstrap),
# then set against the published medians' gap.

# %%
untrimmed = summarize_with_ci(samples, by="probe").reindex(probes)
display(untrimmed[ping_vs_echo.UNTRIMMED_COLUMNS])
comparison = ping_vs_echo.median_gap(samples, echo) if echo is not None else None

# %% [markdown]
# ## What the echo measured, and what the original got wrong
#
# - **A new connection per echo.** The 2016 client dialled the server for
#   every call, so each sample is a TCP handshake (and HTTP/2 connection
#   set-up) plus the RPC: at least one extra round trip, so not all of the
#   echo-minus-ping gap is gRPC or Go overhead; how it divides, such logs cannot
#   say. labkit's importer labels these samples `echo-cold`; labkit's own echo
#   client separates calls on a new connection (`cold = True`) from calls on an
#   open one. Below: whether this run's gap holds such a round trip (its
#   interval's low end against ping's median).
# - **Samples dropped silently.** The strict pattern loses every call logged in
#   seconds (a call over a second) and lines with terminal noise; nothing said
#   so (section 1 lists them).
# - **Whiskers.** The write-up says the whiskers are at the 5th and 95th
#   percentiles, but the figure was seaborn's default box plot, whose whiskers
#   reach the furthest point within 1.5×IQR. The left panel below is drawn that
#   way, from the original's data; the right one as stated, from every sample.

# %%
if comparison is not None:
    cold = bool(samples.loc[samples["probe"] == echo, "cold"].fillna(False).astype(bool).all())
    nb.say(ping_vs_echo.gap_findings(comparison, echo, float(untrimmed.at["ping", "50%"]), cold=cold),
           section="What the echo measured")

# %%
fig, (left, right) = plots.figure(1, 2, height=3.4, sharey=True)
if all((variants["original"]["kept"]["probe"] == p).any() for p in probes):
    plots.box(variants["original"]["kept"], by="probe", order=probes, whiskers="iqr", ax=left, ylabel="RTT (ms)")
    left.set_title("2016: strict parsing,\npooled trim", loc="left", fontsize="small")
else:
    left.text(0.5, 0.5, "the strict 2016 reading found no samples\nof some probe in this run", ha="center", transform=left.transAxes)
    left.set_axis_off()
plots.box(last["kept"], by="probe", order=probes, whiskers=(5, 95), ax=right, ylabel="RTT (ms)")
right.set_title(f"labkit: every sample parsed,\nthen a {last['scope']} trim (n = {len(last['kept'])})", loc="left",
                fontsize="small")
export(fig, "box")

fig, ax = plots.figure()
plots.violin(last["kept"], by="probe", order=probes, ax=ax)
ax.set_ylabel("RTT (ms)")
ax.set_title(f"every sample parsed, then a {last['scope']} trim (|z| < {threshold:g}, {passes} passes, "
             f"n = {len(last['kept'])});\nquartiles inside", fontsize="small")
export(fig, "violin")

fig, ax = plots.figure()
plots.ecdf(samples, by="probe", order=probes, ax=ax)
plots.readable_log_axis(ax, "x", "RTT (ms), log scale")
ax.set_title(f"every sample, untrimmed (n = {int(samples['ok'].sum())}; the slowest are the top right)", fontsize="small",
             loc="left")
export(fig, "ecdf")

# %% [markdown]
# ## How much data does this need?
#
# Per probe: the samples, the half-width of the median's interval now (in
# blocks, in the order they were taken), the samples that would put it within
# a tenth of a millisecond either side (`halfwidth` below), and whether there
# are the 299 a p99 needs.

# %%
from labkit.analysis import data_needs

display(data_needs(ping_vs_echo.answered_in_time_order(samples), "rtt_ms", "probe", halfwidth=0.1))

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
# Written to a small JSON file (`ping_vs_echo.json`) that `labkit report`
# prints and the tests check; `sentences` in it holds what the sections above
# said of the run.

# %%
held = ping_vs_echo.claims(variants, echo, dropped=dropped, by_passes=by_passes, comparison=comparison,
                           ping_median=float(untrimmed.at["ping", "50%"]))
headline = ping_vs_echo.headline(probes, variants, tally=tally, original=original, dropped=dropped, seconds=seconds,
                                 comparison=comparison, held=held)
nb.finish(
    headline, settings={"threshold": threshold, "passes": passes, "scope": scope, "original_scope": "pooled"}, probes=probes,
    variants=ping_vs_echo.variants_detail(variants),
    dropped_by_original=dropped[["probe", "seq", "rtt_ms", "unit", "reason"]].to_dict(orient="records"),
    seconds_valued=seconds[["probe", "seq", "rtt_ms", "unit"]].to_dict(orient="records"),
    untrimmed=untrimmed.to_dict(orient="index"),
    comparison=dataclasses.asdict(comparison) if comparison is not None else None,
    published=ping_vs_echo.against_published(variants["original"]["table"], echo).to_dict(orient="records"),
)
