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
# # Chunked upload: gRPC client streaming against one HTTP/2 POST
#
# The original experiment (cirocosta's gupload; research brief, experiment 3)
# uploaded a 143 MB file over loopback with a client-streaming
# `Upload(stream Chunk)` RPC, in chunks of 16 B to 2 MiB, with and without TLS,
# and against a plain HTTP/2 POST of the same bytes. It found that tiny chunks
# are CPU-bound (about 200 % CPU per process), that about 1 KiB was already
# decent, that 32 KiB had a large variance, that TLS shifted only the variance,
# and that raw HTTP/2 beat gRPC.
#
# **Its flaw**: the gRPC timer stopped when the client had handed its last
# chunk to the stream, *before* the server's `UploadStatus` came back, while the
# HTTP/2 timer stopped at the response. The gRPC time therefore left out the
# last chunks still in the client's buffers and flow-control window and one
# round trip for the acknowledgement, so the two transports were not timed to
# the same point, and the comparison favoured gRPC by an amount that depends on
# the chunk size and the buffering. `labkit upload` stops **both** timers when
# the server's acknowledgement (the byte count and SHA-256 it checked) has
# arrived, on one warm connection per cell, with both transports served by the
# same `labkit echo serve` process.
#
# This notebook reads a `labkit upload` run, and its `--runs` group when it
# has one. By default it reads the shipped sample `data/samples/upload-loopback/`,
# recorded with the published design in the published stack (grpc-go client
# and server on one host over loopback, chunks of 2^4 … 2^21 B, gRPC and
# HTTP/2, TLS off and on) with a smaller file; `data/samples/README.md` gives
# its command, and `docs/reproductions/upload.md` what this notebook says of
# it beside the original's findings. For the run it opened it shows
#
# 1. MB/s against chunk size per transport and TLS mode, with an interval
#    that holds at the cell's number of uploads;
# 2. the CPU the client and the server spend per MB against chunk size, and
#    what the chunks became: HTTP/2 frames, writes and system calls per MB;
# 3. the spread of the uploads of one cell per chunk size, and the first
#    upload of a cell (its warm-up) against the later ones;
# 4. TLS on against off, and gRPC against HTTP/2, within the run and over the
#    runs, each with its interval and a verdict corrected for its family;
# 5. each of the original's findings tested on this run, in sentences
#    printed from its numbers (the last section).

# %% tags=["parameters"]
run_dir = ""  # a run (path, id or unique part of one); empty: the shipped sample data/samples/upload-loopback
drop_first_upload = True  # the first upload of every cell is its warm-up: reported apart (see Variance), not in the cells
confidence = 0.95  # of the intervals
formats = "png,svg,pdf"  # figure formats, comma-separated
output_dir = ""  # where figures go; empty: the figures/ directory of the run
headline_path = ""  # the headline JSON file; empty: upload.json in output_dir
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

run_dir = notebooks.run_it_yourself("upload", run_it_yourself, run_dir)

# %%
import pandas as pd
from IPython.display import Markdown, display

from labkit import notebooks, plots
from labkit.analysis import statistics_named, upload, upload_report

nb = notebooks.setup("upload", run_dir, sample="upload-loopback", experiment="upload", formats=formats, output_dir=output_dir,
                     headline_path=headline_path)
run, export = nb.run, nb.export
manifest, config = run.manifest, run.manifest.get("config", {})
samples, conditions = upload.label_uploads(run.samples())
file_bytes = int(samples["file_bytes"].iloc[0])
display(Markdown(
    f"Run `{run.run_id}`: {len(samples)} uploads of a {file_bytes / 2**20:g} MiB file "
    f"({manifest.get('file', {}).get('source', 'file')}), {config.get('repeats')} per cell, "
    f"chunk sizes {', '.join(str(s) for s in config.get('chunk_sizes', []))} B, TLS {config.get('tls')}, "
    f"transports {', '.join(config.get('transports', []))}."
))

# %% [markdown]
# ## The link and the uploads
#
# The run pinged the server's data address before and after the uploads. A
# **condition** is a transport with or without TLS (`grpc+TLS`: the client
# verified the server against the run's throwaway CA). Failed uploads (a wrong
# byte count or checksum, a transport error) are rows with `ok` false: they
# are counted here and left out of every figure.

# %%
display(notebooks.ping_baselines(manifest))
ping_ms = float(run.ping_baseline(config.get("client"), config.get("server"))["rtt_avg_ms"])
failed = samples[~samples["ok"]]
uploads = upload.with_cpu_costs(upload.kept_uploads(samples, drop_first_upload), file_bytes)
chunk_sizes = sorted(int(s) for s in uploads["chunk_bytes"].unique())
smallest, largest = chunk_sizes[0], chunk_sizes[-1]

display(samples.groupby(["condition", "chunk_bytes"]).agg(uploads=("ok", "size"), ok=("ok", "sum")).unstack("chunk_bytes"))
display(Markdown(f"Ping RTT before the uploads: **{ping_ms:.2f} ms**. "
                 + (f"**{len(failed)} failed uploads** (kept in the run, left out below)." if len(failed)
                    else "Every upload was acknowledged with the right byte count and checksum.")
                 + (" The first upload of every cell is its warm-up: left out of the cells, set against the later ones"
                    " under *Variance* (`drop_first_upload`)." if drop_first_upload else "")))
if len(failed):
    display(failed[["condition", "chunk_bytes", "seq", "error"]])

# %% [markdown]
# ## Throughput against chunk size
#
# MB/s is the file's size over the time from the first byte to the server's
# acknowledgement (decimal MB). Each cell's location and its interval follow
# labkit's small-sample rule (`labkit.analysis.inference.method_for`): below
# ten uploads a cell, the mean of its uploads with a Student's t interval;
# from ten, the median with a percentile bootstrap interval. A bootstrap over
# a handful of uploads gives little more than their range, which holds a
# median only 75–94 % of the time with 3–5 values, not 95 %.

# %%
throughput = upload.cell_summary(uploads, "mb_per_s", confidence)
statistic = statistics_named(throughput["statistic"])
display(Markdown(f"MB/s per condition (rows) and chunk size (columns): the {statistic} of each cell's uploads "
                 f"[{confidence:.0%} interval]:"))
display(upload_report.location_grid(throughput, conditions))


def chunk_axis(ax):
    plots.size_ticks(ax, chunk_sizes)


with plots.theme():
    fig, ax = plots.figure(height=3.6)
    plots.lines_with_ci(throughput, "chunk_bytes", "value", "lo", "hi", by="condition", order=conditions,
                        logx=True, ax=ax, xlabel="chunk size", ylabel=f"MB/s ({statistic}, {confidence:.0%} CI)",
                        n="count", n_unit="uploads")
    chunk_axis(ax)
    ax.set_ylim(bottom=0)
    ax.set_title(f"{file_bytes / 2**20:g} MiB upload, ping RTT {ping_ms:.1f} ms", loc="left", fontsize="small")
export(fig, "throughput")

# %% [markdown]
# ## CPU per MB, and how busy each process was
#
# Each upload records the CPU time of the whole client process over the timed
# window, and the server's own over the request. A cost paid per chunk shows
# as CPU per MB that halves each time the chunk size doubles; a cost paid per
# byte, as CPU per MB that stays the same. The utilisation (CPU seconds over
# wall seconds, 1.0 = one core busy all through the upload) says whether a
# process could have gone faster: one that keeps a core busy (labkit's test:
# nine tenths of a core or more) is CPU-bound, one well below it waits for
# something else. A Go process can use more than one core (the original reported about
# 200 % per process); a Python one does its per-message work on one. On the
# local testbed the hosts are namespaces of one machine and share its cores.

# %%
cpu = {side: upload.cell_summary(uploads, f"{side}_cpu_s_per_mb", confidence) for side in ("client", "server")}
utilisation = uploads.groupby(["condition", "chunk_bytes"])[["client_cpu_util", "server_cpu_util"]].median()
display(Markdown("Medians per condition and chunk size:"))
display(upload_report.cpu_table(uploads, cpu, utilisation, conditions))

with plots.theme():
    fig, axes = plots.figure(1, 2, height=3.4, sharey=True)
    for ax, side in zip(axes, ("client", "server")):
        plots.lines_with_ci(cpu[side], "chunk_bytes", "value", "lo", "hi", by="condition", order=conditions,
                            logx=True, logy=True, ax=ax, xlabel="chunk size",
                            ylabel=f"CPU s per MB ({statistic}, {confidence:.0%} CI)", n="count", n_unit="uploads")
        chunk_axis(ax)
        ax.set_title(f"{side} process", loc="left", fontsize="small")
export(fig, "cpu")

# %% [markdown]
# ## What the chunks become: frames, writes and system calls per MB
#
# CPU per MB says what an upload cost, not why. labkit-go's agent reads the
# HTTP/2 frame headers it writes on its connection (above TLS), and both
# labkit-go ends count their read and write system calls (`/proc/self/io`),
# over each timed upload: how many DATA frames the chunks became, in how many
# writes of the socket they left, and how many system calls the server made to
# read them. A Python end counts none (grpcio's `sendmsg`/`recvmsg` are not in
# that file), and its columns are left out.

# %%
wire, wire_headline = notebooks.upload_wire_section(upload.with_wire_costs(uploads, file_bytes), conditions,
                                              (smallest, largest), export, chunk_axis)

# %% [markdown]
# ## Variance per chunk size, and the first upload of a cell
#
# The spread of a cell's uploads, as the coefficient of variation of their
# MB/s (std / mean) and the ratio of the fastest to the slowest, with the
# number of uploads each rests on (`uploads`: a spread from a handful of
# values is a rough one), of the uploads the cells keep. The table below sets
# the **first** upload of each cell, its warm-up, against the later ones
# (every acknowledged upload, whatever `drop_first_upload`). A slower first
# upload would fit windows that grow during it (TCP's congestion window, and
# gRPC's flow-control window, which grpc-go sizes from what it measures), but
# an upload run records no TCP state to show it, so this notebook does not
# say that is the cause: `labkit upload --capture` and `labkit explain`
# would.

# %%
spread = upload.spread(uploads)
display(spread.reindex(conditions, level=0))
every_upload = upload.kept_uploads(samples)
first_vs_later = upload.first_vs_later(every_upload)
display(Markdown("Median MB/s of the first upload of a cell against the later ones, all conditions pooled:"))
display(first_vs_later)

with plots.theme():
    fig, axes = plots.figure(1, 2, height=4.4)  # room below for the legends the uploads leave no corner for
    plots.lines_with_ci(spread.reset_index(), "chunk_bytes", "cv", by="condition", order=conditions, logx=True, ax=axes[0],
                        xlabel="chunk size", ylabel="CV of MB/s (std / mean)")
    axes[0].set_ylim(bottom=0)
    colors = plots.group_colors(conditions)
    for (condition, first), frame in every_upload.groupby(["condition", every_upload["seq"] == 0]):
        kind = "first" if first else "later"
        axes[1].scatter(frame["chunk_bytes"] * (0.92 if first else 1.08), frame["mb_per_s"], s=18,
                        marker="o" if first else "x", color=colors[condition], label=f"{condition}, {kind}")
    axes[1].set(xlabel="chunk size", ylabel="MB/s, every upload")
    axes[1].set_xscale("log", base=2)
    axes[1].legend(fontsize="x-small", ncol=2)
    for ax in axes:
        chunk_axis(ax)
export(fig, "spread")

# %% [markdown]
# ## Between runs
#
# The intervals above resample this run's uploads: they say how well its
# uploads pin down each cell's median, not how much another run would differ
# (fresh servers and connections, the machine's load at another time; the
# testbed's hosts share the machine's cores with whatever else runs). With
# several runs (`labkit upload --runs N`), each cell's MB/s per run (the same
# statistic as above, by the small-sample rule) and pooled, and the runs'
# mean with a 95 % Student-t interval over the runs (the runs as units).

# %%
replicates, every_run = notebooks.replicate_samples(run)
every_run = upload.label_uploads(every_run)[0]
runs_headline = notebooks.upload_runs_section(replicates, every_run, conditions, (smallest, largest), drop_first_upload)

# %% [markdown]
# ## TLS on against off, and gRPC against HTTP/2
#
# Each comparison is chunk size by chunk size, B − A in MB/s, by the same
# small-sample rule as the cells: from ten uploads a side, the difference of
# the medians with a bootstrap interval, in blocks (a cell's uploads follow
# one another on one connection); below ten, the difference of the means with
# Welch's interval and t-test (a Mann–Whitney test on five uploads a side
# cannot give a p-value below 0.008: never enough for a family of twenty).
# Every comparison of both tables is **one family**, corrected with Holm's
# method: a difference is called higher or lower only where its corrected
# p-value stays below 0.05. An unclear one shows its MDE, the smallest
# difference the family could have called with 80 % probability, so that
# "unclear" does not read as "no difference"; a comparison without two
# uploads a side would be listed as not testable and still counted.
#
# Those intervals hold this run's uploads. With `--runs`, the same
# comparisons are then made over the runs: each run's B − A (its cells'
# later uploads summarised by the same rule) is one value, and the runs are
# the units (Student's t over the runs): what moves from one run to the next
# is inside that interval. A t-test over a handful of runs has few degrees of
# freedom (two with three runs), and Holm's family-wise bound over a family
# of dozens of comparisons would then call only differences tens of times
# their standard error; so that table is corrected with Benjamini–Hochberg's
# method, which holds the false discovery rate (the expected share of false
# calls among the differences called) at 5 %, not the chance of any false
# call. Its heading names it, and the findings below say how many of its
# calls Holm's correction would keep.

# %%
tls_pairs, transport_pairs = upload.condition_pairs(conditions)
pairs = {**tls_pairs, **transport_pairs}
# Each run of the group is compared on its own, as this one: the findings below say in how many runs a verdict holds.
this = [replicate.run_id for replicate in replicates].index(run.run_id) + 1  # this run's number in its group
compared_by_run = upload.compare_by_run(every_run[every_run["ok"]], pairs, drop_first_upload, confidence)
compared = compared_by_run[compared_by_run["replicate"] == this]
compared = compared.drop(columns="replicate").reset_index(drop=True)
for title, names in (("TLS on − off", tls_pairs), ("HTTP/2 − gRPC", transport_pairs)):
    frame = compared[compared["comparison"].isin(list(names))] if len(compared) else compared
    if frame.empty:
        continue
    display(Markdown(f"**{title}**, difference of the {statistics_named(frame['statistic'])}s in MB/s "
                     f"[{confidence:.0%} interval] and its verdict after Holm's correction over all {len(compared)} "
                     "comparisons:"))
    display(frame.pivot(index="comparison", columns="chunk_bytes", values="cell"))
    display(frame.pivot(index="comparison", columns="chunk_bytes", values="B / A").style.format("{:.2f}×"))
over_runs, over_runs_headline = notebooks.upload_pairs_over_runs_section(every_run[every_run["ok"]], pairs, confidence)

# %% [markdown]
# ## The timer's end point
#
# Both transports here stop at the server's acknowledgement. What the
# original's gRPC timer left out is at least the acknowledgement's round trip
# (one ping RTT here) plus the delivery of whatever was still queued behind
# the last chunk; how much that matters depends on how long an upload takes.
# The table gives one ping RTT as a share of the median upload time: the least
# the original's gRPC figure was too fast by, had it run on this link. Where
# the RTT is small against an upload, as over loopback, what that timer missed
# is mostly the queued tail, up to a flow-control window of data.

# %%
rtt_share = upload_report.rtt_share(uploads, ping_ms, conditions)
display(Markdown(f"One ping RTT ({ping_ms:.2f} ms) as a share of the median upload time:"))
display(rtt_share.style.format("{:.1%}"))

# %% [markdown]
# ## What this shows, against the original
#
# Each of the original's findings (research brief, experiment 3) is tested on
# this run, and on every run of its `--runs` group, by a predicate on their
# numbers (`labkit.analysis.upload_report.claims`); the sentences below are
# printed from those numbers, with their n, method and correction, and say
# where a finding holds and where it does not:
#
# - *tiny chunks are CPU-bound, at about 200 % CPU per process*: at the
#   smallest chunk size, in every condition, the client or the server kept a
#   core busy (its median CPU over wall time at least nine tenths of a core);
# - *about 1 KiB was already decent*: in every condition the 1 KiB cell's MB/s
#   is at least half the fastest chunk size's (the cells' locations by the
#   small-sample rule);
# - *32 KiB had a large variance*: in some condition, the coefficient of
#   variation of MB/s at 32 KiB is the largest of the chunk sizes;
# - *TLS shifted the variance only*: no TLS on − off comparison is called in
#   the run's family (Holm's correction); a family that calls none has not
#   shown that there is none, and the sentence gives its MDEs;
# - *raw HTTP/2 beat gRPC*: HTTP/2 is called faster than gRPC at some chunk
#   size and slower at none, with TLS and without, in the run's family.
#
# Within a run each verdict is the run's own family's (Holm's correction over
# its comparisons); over a group, how many runs each holds in, and the
# comparisons with the runs as units (Benjamini–Hochberg's correction, as
# above). Then what labkit measures that the original did not: the first
# upload of a cell against its later ones (a two-sided sign test at each chunk
# size over every run and condition, Holm's correction over the chunk sizes),
# what the chunks became beside where HTTP/2 was called slower or faster, and
# what the original's timer left out.

# %%
by_run = upload.run_cells(every_run[every_run["ok"]], drop_first_upload)
nb.say(upload_report.findings(by_run, compared_by_run, over_runs, this, confidence), section="the original's findings")
nb.say(upload_report.beyond_the_original(by_run, compared_by_run, upload.first_against_later(every_run), this, ping_ms),
       section="beyond the original")

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
explain_numbers = notebooks.explain_section(nb, by=("cell",))

# %% [markdown]
# ## How much data does this need?
#
# Per condition and chunk size: the uploads, the half-width of their median
# MB/s's interval now, and the uploads that would put it within ±5 % of this
# run's overall median (uploads of one cell follow each other on one
# connection, so they are resampled in blocks). A spread or a variance from a
# handful of uploads is a rough one.

# %%
from labkit.analysis import data_needs

halfwidth = round(0.05 * float(uploads["mb_per_s"].median()), 2)
display(data_needs(uploads.sort_values("t_start_utc_ns"), "mb_per_s", ["condition", "chunk_bytes"], halfwidth=halfwidth))

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
# Written to `upload.json`, which `labkit report` prints and the tests check:
# `mb_per_s.<condition>.<chunk>` MB/s (the cell's location by the
# small-sample rule, `mb_per_s.statistic` says which, with `_lo`/`_hi` its
# interval, and `.runs_lo`/`.runs_hi` the interval over runs) at the
# smallest and largest chunk, `client_cpu_s_per_mb` and `server_cpu_s_per_mb`
# (medians) at the same two sizes, `client_cpu_util` at the smallest,
# `tls_effect.<transport>.<chunk>` (TLS on − off, MB/s) and
# `http2_vs_grpc.<tls>.<chunk>` (HTTP/2 ÷ gRPC), each with its `.verdict`,
# and `comparisons` with how many were called; `claim.<name>` whether each
# of the original's findings holds in this run, and `runs.claim.<name>` in
# how many runs of its group. The JSON's `cells` hold every condition and
# chunk size, its `comparisons` every comparison, its `sentences` what the
# notebook said.

# %%
headline: dict = {
    "file_bytes": file_bytes, "uploads": int(len(samples)), "failed": int(len(failed)), "repeats": config.get("repeats"),
    "ping_rtt_ms": round(ping_ms, 3), "smallest_chunk_bytes": smallest, "largest_chunk_bytes": largest,
    **upload.upload_headline(conditions, throughput, cpu, utilisation, (smallest, largest)), **runs_headline,
    **upload.pairs_headline(compared, pairs, (smallest, largest)), **over_runs_headline, **wire_headline,
    **upload_report.claims_headline(upload_report.claims(by_run, compared_by_run), this), **explain_numbers,
}

nb.finish(
    headline,
    settings={"drop_first_upload": drop_first_upload, "confidence": confidence},
    cells=upload_report.cell_details(throughput, cpu, utilisation, spread, rtt_share, conditions),
    first_vs_later={str(k): v for k, v in first_vs_later.to_dict(orient="index").items()},
    comparisons=compared.to_dict(orient="records"),
)
