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
# # Ping vs gRPC echo: the 2016 table, reproduced and then corrected
#
# In November 2016 Benjamin Bengfort ran `ping` and a Go gRPC echo client side by
# side for an hour, at 1 Hz, from a laptop at home to a university server, and
# published a table of the two latency distributions after trimming outliers
# (research brief, experiment 2). The raw logs are in
# `data/external/orca-2016/`; `labkit import` turned them into the run this
# notebook reads (by default the shipped sample `data/samples/orca-2016/`).
#
# This notebook
#
# 1. reproduces the published table from the raw logs, with the original
#    notebook's parsing (a strict, milliseconds-only line pattern) and its
#    trimming (|z| < 3 over ping and echo **pooled together**, two passes);
# 2. shows what changes when every sample is parsed (labkit's importers read
#    every Go duration unit and count every line);
# 3. shows the same with the trimming done **within each probe**;
# 4. draws the box plot the write-up described (whiskers at the 5th and 95th
#    percentiles, points beyond drawn one by one) next to the one it actually
#    drew (whiskers at 1.5×IQR), a violin plot and an ECDF of every sample.
#
# It runs on any run whose probes include `ping` (an `import-ping` run has no
# echo: the echo parts are then skipped).

# %% tags=["parameters"]
run_dir = ""  # a run (path, id or unique part of one); empty: the shipped sample data/samples/orca-2016
threshold = 3.0  # trim samples whose |z| is at or above this (the original: 3)
passes = 2  # trimming passes, z recomputed on the survivors each time (the original: 2)
scope = "per-group"  # scope of the last variant: per-group or pooled (the original trimmed pooled)
formats = "png,svg,pdf"  # figure formats, comma-separated
output_dir = ""  # where figures go; empty: the figures/ directory of the run
headline_path = ""  # the headline JSON file; empty: ping_vs_echo.json in output_dir

# %%
import pandas as pd
from IPython.display import Markdown, display

from labkit import notebooks, plots
from labkit.analysis import compare_groups, ping_vs_echo, summarize_with_ci
from labkit.importers import read_source

nb = notebooks.setup("ping_vs_echo", run_dir, sample="orca-2016", experiment=None, formats=formats, output_dir=output_dir,
                     headline_path=headline_path)
run, export = nb.run, nb.export
if run.manifest.get("experiment") == "series":
    raise ValueError(f"{run.path} is a `labkit series` run: its notebook is notebooks/series.py (this one reads imported logs)")
samples = run.samples()
if "ping" not in set(samples["probe"]):
    raise ValueError(f"{run.path} has no ping samples (probes: {sorted(set(samples['probe']))})")
probes = ["ping"] + sorted(set(samples["probe"]) - {"ping"})
echo = next((p for p in probes if p.startswith("echo")), None)
display(Markdown(f"Run `{run.run_id}` (experiment `{run.manifest['experiment']}`), probes: {', '.join(probes)}."))

# %% [markdown]
# ## What was imported
#
# One cell per log file. Every line is either parsed or counted as
# unrecognised; a probe with no reply is a row with `ok = False`, so a lost
# sample is counted, not dropped.

# %%
imports = run.manifest.get("imports", [])
display(pd.DataFrame(
    [{"cell": i["cell_id"], "probe": i["probe"], **i["tally"],
      "units": ", ".join(f"{k[5:]} ×{v}" for k, v in i["parser_counts"].items() if k.startswith("unit_"))}
     for i in imports]
).set_index("cell"))
rows_by_probe = samples.groupby("probe").agg(rows=("ok", "size"), samples=("ok", "sum"), duplicates=("duplicate", "sum"))
rows_by_probe["lost"] = rows_by_probe["rows"] - rows_by_probe["samples"] - rows_by_probe["duplicates"]
display(rows_by_probe.reindex(probes))

# %% [markdown]
# ## 1. The original: strict, milliseconds-only parsing and pooled trimming
#
# The 2016 notebook read each log with one regular expression per tool,
# anchored at the start of the line, that accepts a time only as digits
# followed by `ms`. Go prints a `time.Duration` in the unit that suits it, so
# the two calls that took about two seconds were logged as `1.868983839s` and
# `2.079863882s` and did not match; nor did the line in front of which the
# terminal had echoed a key press (`^[[D`). Those samples vanished without a
# count. Below, the same strict reading is applied to the raw files kept in the
# run's `raw/` directory.

# %%
# The raw log of every import the 2016 patterns apply to, read as they read it.
strict_texts = {i["cell_id"]: read_source(run.path / i["raw"])[1] for i in imports if i["kind"] in ping_vs_echo.STRICT_2016}
original = ping_vs_echo.original_samples(imports, strict_texts)
dropped = ping_vs_echo.lost_by_2016(samples, original, strict_texts)
display(Markdown(f"The strict reading kept **{len(original)}** samples; labkit's parsers found **{int(samples['ok'].sum())}**. "
                 f"Samples the original lost: **{len(dropped)}**."))
display(dropped[["probe", "seq", "rtt_ms", "unit", "reason", "raw_line"]])

# %%
variants = ping_vs_echo.trim_variants(original, samples, probes, scope=scope, threshold=threshold, passes=passes)
display(Markdown(f"**Original** ({variants['original']['parsing']}; |z| < {threshold:g}, {passes} passes, pooled):"))
display(variants["original"]["table"])
if variants["original"]["trim"] is not None:
    display(variants["original"]["trim"].counts.reindex(probes))

# %% [markdown]
# The write-up published, for comparison: ping count 3567, mean 13.037,
# std 1.877, min 10.616, 25% 12.169, 50% 12.747, 75% 13.422, max 42.806; echo
# count 3538, mean 29.431, std 2.908, min 23.806, 25% 27.366, 50% 28.989,
# 75% 31.016, max 49.039. On the 2016 logs the table above matches it.

# %% [markdown]
# ## 2. Every sample parsed, the same pooled trimming
#
# labkit's importer reads every Go duration unit, keeps the line with the
# echoed key press, and marks ping's lost probes `ok = False` (they are never
# trimmed and never counted as samples). The trimming is unchanged.

# %%
corrected = variants["corrected_pooled"]
display(corrected["table"])
display(corrected["trim"].counts.reindex(probes))

seconds = samples[samples["ok"] & samples["unit"].notna() & ~samples["unit"].isin(["ms", "µs", "ns"])]
extreme = samples[samples["ok"] & (samples["rtt_ms"] > 1000)]
fate = pd.DataFrame({
    name: v["trim"].removed["trim_pass"].reindex(extreme.index) if v["trim"] is not None else None
    for name, v in variants.items() if name != "original"
})
display(Markdown("Samples over one second and the trimming pass that removed each (NaN: kept):"))
display(pd.concat([extreme[["probe", "seq", "rtt_ms", "unit"]], fate.add_prefix("removed in pass: ")], axis=1))

# %% [markdown]
# What changes, and why:
#
# - **Parsing.** The echo now has every call. The two calls of about 2 s come
#   back, and so does ping's reply that arrived 2 s late (ping reported seq 3119
#   as timed out, then printed its reply; the original kept that one, since it
#   is written in ms).
# - **Pooled z-scores.** The original scored ping and echo *together*. The
#   pooled sample is bimodal (about 13 ms and about 29 ms), so its mean sits
#   between the two modes and its σ measures the gap between them as much as
#   either probe's spread. |z| ≥ 3 can then only cut the top of the echo
#   distribution and the far tail of ping; how much it cuts depends on the mix.
# - **Two passes, spent partly on a few extreme samples.** With the 2 s samples
#   in, the first pass's σ is inflated by them and its cut-off is higher, so it
#   removes fewer samples than the original's first pass; with only two passes,
#   samples the original trimmed survive (the table below gives each pass's
#   cut-off). The trimmed table moves (counts, max) although the samples the
#   original dropped were only three: a trimming rule whose result depends on a
#   handful of points is a choice to state, not a neutral cleaning step.

# %%
if len(original):
    display(pd.concat({name: variants[name]["trim"].cutoffs.droplevel("scope")[["n", "center", "scale", "high", "removed"]]
                       for name in ("original", "corrected_pooled")}).rename(
        columns={"center": "mean", "scale": "σ", "high": "kept below (ms)"}))

# %% [markdown]
# ## 3. Trimming within each probe
#
# Scoring each probe against its own mean and σ removes what is unusual *for
# that probe*: ping's ceiling falls to a few ms above its median, echo's is
# set by echo's own spread.

# %%
last_key = list(variants)[-1]
last = variants[last_key]
display(Markdown(f"**{last_key}** (labkit parsing; |z| < {threshold:g}, {passes} passes, {last['scope']}):"))
display(last["table"])
display(last["trim"].counts.reindex(probes))
side_by_side = pd.concat({name: v["table"].loc[["count", "50%", "max"]] for name, v in variants.items()}, axis=1)
display(Markdown("The three variants side by side (count, median, max):"))
display(side_by_side)

# %% [markdown]
# ## Every sample, untrimmed, with bootstrap confidence intervals
#
# Trimming is not needed to describe these distributions: the median and the
# high percentiles already resist outliers, and nothing is hidden. Intervals
# are 95 % percentile-bootstrap intervals (seeded, 2000 resamples).

# %%
untrimmed = summarize_with_ci(samples, by="probe").reindex(probes)
display(untrimmed[["count", "lost", "p5", "50%", "50%_lo", "50%_hi", "p95", "p99", "p99_lo", "p99_hi", "max"]])
comparison = compare_groups(samples, "rtt_ms", "probe", "ping", echo) if echo is not None else None
if comparison is not None:
    low, high = comparison.median_diff_ci
    display(Markdown(
        f"Median {echo} − median ping: **{comparison.median_diff:.2f} ms** (95 % CI {low:.2f} to {high:.2f}); "
        f"Mann–Whitney U p = {comparison.mannwhitney_p:.2g}"
        + (" (below the smallest float: the two distributions barely overlap)." if comparison.mannwhitney_p == 0 else ".")
    ))

# %% [markdown]
# ## What the echo measured, and what the original got wrong
#
# - **A new connection per echo.** The 2016 client dialled the server for
#   every call, so each sample is a TCP handshake (and HTTP/2 connection
#   set-up) plus the RPC: at least one extra round trip, which the
#   echo-minus-ping gap above contains (see the sentence below), so it is not
#   gRPC or Go overhead. labkit's importer labels these samples `echo-cold`;
#   labkit's own echo client separates calls on a new connection
#   (`cold = True`) from calls on an open one.
# - **Samples dropped silently.** The strict pattern lost the calls logged in
#   seconds, exactly the slowest ones, and a line with terminal noise; nothing
#   said so.
# - **Whiskers.** The write-up says the whiskers are at the 5th and 95th
#   percentiles, but the figure was seaborn's default box plot, whose whiskers
#   reach the furthest point within 1.5×IQR. The left panel below is drawn that
#   way, from the original's data; the right one as stated, from every sample.

# %%
if comparison is not None:
    ping_median = untrimmed.at["ping", "50%"]
    display(Markdown(
        f"The median gap, {comparison.median_diff:.1f} ms, is {comparison.median_diff / ping_median:.2f} times ping's "
        f"median round trip ({ping_median:.1f} ms): one round trip of it is the handshake each cold call paid."
    ))

# %%
fig, (left, right) = plots.figure(1, 2, figsize=(10, 4.2))
if all((variants["original"]["kept"]["probe"] == p).any() for p in probes):
    plots.box(variants["original"]["kept"], by="probe", order=probes, whiskers="iqr", ax=left, ylabel="RTT (ms)")
    left.set_title("2016: strict parsing, pooled trim", loc="left", fontsize="medium")
else:
    left.text(0.5, 0.5, "the strict 2016 reading found no samples\nof some probe in this run", ha="center", transform=left.transAxes)
    left.set_axis_off()
plots.box(last["kept"], by="probe", order=probes, whiskers=(5, 95), ax=right, ylabel="RTT (ms)")
right.set_title(f"labkit: every sample, {last['scope']} trim", loc="left", fontsize="medium")
export(fig, "box")

fig, ax = plots.figure()
plots.violin(last["kept"], by="probe", order=probes, ax=ax)
ax.set_ylabel("RTT (ms)")
ax.set_title(f"every sample, {last['scope']} trim (|z| < {threshold:g}, {passes} passes); quartiles inside", fontsize="small")
export(fig, "violin")

fig, ax = plots.figure()
plots.ecdf(samples, by="probe", order=probes, ax=ax)
ax.set(xscale="log", xlabel="RTT (ms), log scale")
ax.set_title("every sample, untrimmed (the 2 s calls are the top right)", fontsize="small")
export(fig, "ecdf")

# %% [markdown]
# ## Headline numbers
#
# Written to a small JSON file (`ping_vs_echo.json`) that `labkit report`
# prints and the tests check.

# %%
headline: dict = {}
for name, v in variants.items():
    for probe in (p for p in probes if p in v["table"].columns):
        headline[f"{name}.{probe}.count"] = int(v["table"].at["count", probe])
        headline[f"{name}.{probe}.median_ms"] = round(float(v["table"].at["50%", probe]), 3)
for probe in probes:
    headline[f"samples.{probe}"] = int(rows_by_probe.at[probe, "samples"])
    headline[f"lost.{probe}"] = int(rows_by_probe.at[probe, "lost"])
    headline[f"parsed_by_original.{probe}"] = int((original["probe"] == probe).sum())
    headline[f"dropped_by_original.{probe}"] = int((dropped["probe"] == probe).sum())
    headline[f"seconds_valued.{probe}"] = int((seconds["probe"] == probe).sum())
if comparison is not None:
    headline["median_diff_ms"] = round(comparison.median_diff, 3)

nb.finish(
    headline, settings={"threshold": threshold, "passes": passes, "scope": scope, "original_scope": "pooled"}, probes=probes,
    variants={name: {"parsing": v["parsing"], "scope": v["scope"], "table": v["table"].to_dict(),
                     "trim_counts": v["trim"].counts.to_dict(orient="index") if v["trim"] is not None else {}}
              for name, v in variants.items()},
    dropped_by_original=dropped[["probe", "seq", "rtt_ms", "unit", "reason"]].to_dict(orient="records"),
    seconds_valued=seconds[["probe", "seq", "rtt_ms", "unit"]].to_dict(orient="records"),
    untrimmed=untrimmed.to_dict(orient="index"),
    comparison=comparison.as_dict() if comparison is not None else None,
)
