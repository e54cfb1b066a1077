"""The upload experiment's rules: conditions, CPU per MB, spread, and TLS and transport compared chunk size by chunk size.

A ``labkit upload`` run (gupload's experiment, research brief experiment 3)
has one row per upload of one file: transport (gRPC streaming or an HTTP/2
POST), TLS, chunk size, MB/s and the CPU seconds of client and server. These
functions are what the upload notebook shows, tested in
``tests/test_analysis_upload.py``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from labkit.analysis.inference import statistics_named
from labkit.analysis.summary import summarize_with_location

#: The conditions of an upload run in reading order: transport, then TLS.
CONDITIONS = ("grpc", "grpc+TLS", "http2", "http2+TLS")
_CELL = ["condition", "chunk_bytes"]


def label_uploads(samples: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The uploads with a ``condition`` (``grpc``, ``http2+TLS``...), and the conditions present, in :data:`CONDITIONS` order.

    When the run has several gRPC stacks the condition names its stack too
    (``grpc+TLS go→go``), stack after stack.
    """
    from labkit.analysis.idle import stack_labels

    condition = samples["transport"] + np.where(samples["tls"], "+TLS", "")
    stacks = stack_labels(samples)
    if stacks.nunique() > 1:
        samples = samples.assign(condition=condition + " " + stacks)
        present = set(samples["condition"])
        return samples, [f"{c} {s}" for s in dict.fromkeys(stacks) for c in CONDITIONS if f"{c} {s}" in present]
    samples = samples.assign(condition=condition)
    return samples, [c for c in CONDITIONS if c in set(samples["condition"])]


def with_cpu_costs(uploads: pd.DataFrame, file_bytes: int) -> pd.DataFrame:
    """Client and server CPU seconds per MB (10^6 B) of the file, and CPU over wall time (1.0: one core busy throughout)."""
    mb = file_bytes / 1e6
    return uploads.assign(
        client_cpu_s_per_mb=uploads["client_cpu_s"] / mb, server_cpu_s_per_mb=uploads["server_cpu_s"] / mb,
        client_cpu_util=uploads["client_cpu_s"] / uploads["seconds"], server_cpu_util=uploads["server_cpu_s"] / uploads["seconds"],
    )


#: What an upload's wire and system calls cost, per MB of file: the columns :func:`with_wire_costs` adds from the
#: counts labkit-go's agent and server record (null for a Python side).
WIRE_COUNTS = {"client_data_frames": "client DATA frames / MB", "client_writes": "client writes / MB",
               "client_rw_syscalls": "client read+write syscalls / MB",
               "server_rw_syscalls": "server read+write syscalls / MB"}


def with_wire_costs(uploads: pd.DataFrame, file_bytes: int) -> pd.DataFrame:
    """Each of :data:`WIRE_COUNTS` per MB (10^6 B) of the file (``<count>_per_mb``; NaN where not counted, and none
    for a run recorded before labkit counted them), and chunks per MB: the mechanism behind CPU per MB."""
    mb = file_bytes / 1e6
    added = {f"{count}_per_mb": (pd.to_numeric(uploads[count], errors="coerce") / mb if count in uploads else np.nan)
             for count in WIRE_COUNTS}
    return uploads.assign(chunks_per_mb=uploads["chunks"] / mb, **added)


def wire_table(uploads: pd.DataFrame, conditions: list[str]) -> pd.DataFrame:
    """Per condition and chunk size (rows): the medians of chunks per MB and of every :data:`WIRE_COUNTS` per MB, from
    :func:`with_wire_costs` uploads; the counts a run did not record are left out."""
    columns = {"chunks / MB": "chunks_per_mb",
               **{label: f"{count}_per_mb" for count, label in WIRE_COUNTS.items()}}
    kept = {label: column for label, column in columns.items() if uploads[column].notna().any()}
    table = uploads.groupby(_CELL)[list(kept.values())].median().rename(columns={v: k for k, v in kept.items()})
    return table.reindex(conditions, level=0)


def cell_summary(uploads: pd.DataFrame, value: str, confidence: float = 0.95) -> pd.DataFrame:
    """Per condition and chunk size (columns, not index): the summary of ``value`` (count, mean, quartiles...) and
    its location with an interval as :func:`labkit.analysis.inference.method_for` puts it (``statistic``,
    ``value``, ``lo``, ``hi``, ``method``: with fewer than ten uploads a cell, their mean and Student's t
    interval; from ten, their median with a bootstrap in blocks, as a cell's uploads follow one another on one
    connection)."""
    in_order = uploads.sort_values(["seq"], kind="stable")
    return summarize_with_location(in_order, value, by=_CELL, ok=None, confidence=confidence,
                                   time_ordered=True).reset_index()


def spread(uploads: pd.DataFrame) -> pd.DataFrame:
    """Per condition and chunk size: uploads, mean and std of MB/s, fastest and slowest, cv and fastest/slowest."""
    table = uploads.groupby(_CELL)["mb_per_s"].agg(uploads="size", mean="mean", std="std", fastest="max", slowest="min")
    return table.assign(cv=table["std"] / table["mean"], **{"fastest / slowest": table["fastest"] / table["slowest"]})


def first_vs_later(uploads: pd.DataFrame) -> pd.DataFrame:
    """Median MB/s of each cell's first upload (``seq`` 0) against the later ones, per chunk size, with the uploads
    each median rests on (``n first``, ``n later``)."""
    marked = uploads.assign(upload=np.where(uploads["seq"] == 0, "first", "later"))
    grouped = marked.groupby(["chunk_bytes", "upload"])["mb_per_s"]
    table = grouped.median().unstack("upload")
    if "first" in table and "later" in table:
        table["later / first"] = table["later"] / table["first"]
    counts = grouped.size().unstack("upload").add_prefix("n ")
    return table.join(counts)


def condition_pairs(conditions: list[str]) -> tuple[dict[str, tuple[str, str]], dict[str, tuple[str, str]]]:
    """The pairs (A, B) worth comparing: TLS on against off per transport, and HTTP/2 against gRPC with TLS and without."""
    tls = {f"TLS on − off, {t}": (t, f"{t}+TLS") for t in ("grpc", "http2") if t in conditions and f"{t}+TLS" in conditions}
    transport = {f"http2 − grpc{s}": (f"grpc{s}", f"http2{s}") for s in ("", "+TLS")
                 if f"grpc{s}" in conditions and f"http2{s}" in conditions}
    return tls, transport


def compare_pairs(uploads: pd.DataFrame, pairs: dict[str, tuple[str, str]], confidence: float = 0.95) -> pd.DataFrame:
    """B against A in MB/s, every pair at every chunk size, as one family: one row per comparison.

    Each is :func:`labkit.analysis.inference.two_sample_difference` of the two
    cells' uploads (with fewer than ten a side, the difference of their means
    and Welch's interval and test), ``statistic`` its summary of each side
    (``A``/``B`` their values, ``B / A``), and the verdict after Holm's
    correction over every row (:func:`labkit.analysis.inference.call_table`):
    ``higher`` or ``lower`` where called, ``unclear`` with ``mde`` (the
    smallest difference the family could have called) where not, ``not
    testable`` (listed, and counted in the family) where a side has fewer than
    two uploads or none vary. ``cell`` is the difference, its interval and
    the verdict as a table shows them.
    """
    from labkit.analysis.inference import call_table, two_sample_difference

    rows, results = [], []
    for name, (a, b) in pairs.items():
        for size in sorted(int(s) for s in uploads["chunk_bytes"].unique()):
            at_size = uploads[uploads["chunk_bytes"] == size]
            xa, xb = (at_size[at_size["condition"] == c].sort_values("seq")["mb_per_s"] for c in (a, b))
            # A cell's uploads follow one another on one connection: resampled in blocks.
            result = two_sample_difference(xa, xb, confidence=confidence, time_ordered=True)
            summary = np.mean if result.statistic == "mean" else np.median
            value_a, value_b = (float(summary(x)) if len(x) else np.nan for x in (xa, xb))
            results.append(result)
            rows.append({"comparison": name, "chunk_bytes": size, "A": a, "B": b, "n": f"{result.n_a}/{result.n_b}",
                         "statistic": result.statistic, "A MB/s": value_a, "B MB/s": value_b,
                         "B / A": value_b / value_a if value_a else np.nan, "difference": result.difference,
                         "lo": result.low, "hi": result.high, "p": result.pvalue, "method": result.method})
    table = pd.DataFrame(rows)
    return call_table(table, results, "MB/s") if results else table


def kept_uploads(samples: pd.DataFrame, drop_first_upload: bool = False) -> pd.DataFrame:
    """The uploads a notebook reads: those acknowledged whole (``ok``), without the first of each cell when
    ``drop_first_upload``."""
    return samples[samples["ok"] & ((samples["seq"] > 0) | (not drop_first_upload))]


def upload_headline(conditions: list[str], throughput: pd.DataFrame, cpu: dict[str, pd.DataFrame],
                    utilisation: pd.DataFrame, sizes: tuple[int, int]) -> dict[str, float]:
    """Per condition at the smallest and largest chunk: MB/s with its interval, CPU s/MB per side, client CPU use.

    ``throughput`` and ``cpu[side]`` are :func:`cell_summary` tables: MB/s is
    a cell's location as the small-sample rule gives it (``mb_per_s.statistic``
    says which: the mean below ten uploads), CPU per MB the cells' medians;
    ``utilisation`` the medians of ``client_cpu_util`` per condition and chunk.
    """
    smallest, largest = sizes
    by_cell = throughput.set_index(_CELL)
    cpu_cells = {side: table.set_index(_CELL) for side, table in cpu.items()}
    headline: dict[str, float] = {"mb_per_s.statistic": statistics_named(by_cell["statistic"])}
    for condition in conditions:
        for size in (s for s in (smallest, largest) if (condition, s) in by_cell.index):
            for suffix, column in (("", "value"), ("_lo", "lo"), ("_hi", "hi")):
                headline[f"mb_per_s.{condition}.{size}{suffix}"] = round(float(by_cell.loc[(condition, size), column]), 3)
        for side in ("client", "server"):
            for size in (s for s in (smallest, largest) if (condition, s) in cpu_cells[side].index):
                headline[f"{side}_cpu_s_per_mb.{condition}.{size}"] = round(float(cpu_cells[side].loc[(condition, size), "50%"]), 5)
        if (condition, smallest) in utilisation.index:
            headline[f"client_cpu_util.{condition}.{smallest}"] = round(float(utilisation.loc[(condition, smallest), "client_cpu_util"]), 3)
    return headline


def runs_headline(runs_table: pd.DataFrame | None, sizes: tuple[int, int]) -> dict[str, float]:
    """Headline fields of a :func:`labkit.analysis.between_runs` table of MB/s by condition and chunk: the interval
    over runs at the smallest and largest chunk (``mb_per_s.<condition>.<chunk>.runs_lo`` / ``.runs_hi``); none
    without a table (a run made alone)."""
    from labkit.analysis.inference import runs_interval_fields

    return runs_interval_fields(runs_table, lambda key: f"mb_per_s.{key[0]}.{key[1]}" if key[1] in sizes else None)


def pairs_headline(compared: pd.DataFrame, pairs: dict[str, tuple[str, str]], sizes: tuple[int, int]) -> dict[str, float]:
    """At the smallest and largest chunk: TLS on − off in MB/s per transport, and HTTP/2 ÷ gRPC with TLS and
    without (of the statistic each comparison used), each with its verdict; and the family's size and calls.

    ``compared`` is :func:`compare_pairs` of ``pairs`` (name → (A, B)), as :func:`condition_pairs` gives them.
    """
    headline: dict[str, float] = {"comparisons": int(len(compared)),
                                  "comparisons.called": int(compared["verdict"].isin(("higher", "lower")).sum()),
                                  "comparisons.not_testable": int((compared["verdict"] == "not testable").sum())}
    for _, row in compared[compared["chunk_bytes"].isin(sizes)].iterrows():
        a, size = pairs[row["comparison"]][0], row["chunk_bytes"]
        if row["comparison"].startswith("TLS"):
            key = f"tls_effect.{a}.{size}"
            headline[key] = round(row["difference"], 3)
        else:
            key = f"http2_vs_grpc.{'tls' if a.endswith('+TLS') else 'plain'}.{size}"
            headline[key] = round(row["B / A"], 3)
        headline[f"{key}.verdict"] = row["verdict"]
    return headline


def later_uploads(uploads: pd.DataFrame) -> pd.DataFrame:
    """The uploads after the first of each cell (``seq`` > 0): the first one is the cell's warm-up, on a connection
    that has carried only a 1-byte upload, and is set against the later ones apart (:func:`first_against_later`)."""
    return uploads[uploads["seq"] > 0]


def run_cells(every_run: pd.DataFrame, drop_first_upload: bool = False) -> pd.DataFrame:
    """Per run (``every_run``'s ``replicate``), condition and chunk size, from each run's uploads the notebook keeps
    (:func:`kept_uploads`): ``uploads``; ``mb_per_s``, the cell's location by the small-sample rule
    (:func:`labkit.analysis.inference.method_for`: the mean below ten uploads, else the median; ``statistic`` says
    which); ``cv`` of MB/s (std / mean); the medians of the client's and the server's CPU use (CPU over wall time,
    ``client_cpu_util``, ``server_cpu_util``), of the client's CPU seconds per MB (``client_cpu_s_per_mb``), of the
    upload's ``seconds`` and of each wire count per MB (:func:`with_wire_costs`; NaN where not counted); and the run's
    ping RTT (``ping_ms``, when ``every_run`` has it). The cells of every run, in one table: what the findings of
    :mod:`labkit.analysis.upload_report` read, run by run."""
    from labkit.analysis.inference import SMALL_SAMPLE

    kept = kept_uploads(every_run, drop_first_upload)
    kept = with_wire_costs(with_cpu_costs(kept, kept["file_bytes"]), kept["file_bytes"])
    wire = [f"{count}_per_mb" for count in WIRE_COUNTS]
    grouped = kept.groupby(["replicate", *_CELL])
    cells = grouped[["client_cpu_util", "server_cpu_util", "client_cpu_s_per_mb", "seconds", *wire]].median()
    mb = grouped["mb_per_s"].agg(["size", "mean", "median", "std"])
    small = mb["size"] < SMALL_SAMPLE
    cells = cells.assign(uploads=mb["size"], statistic=np.where(small, "mean", "median"),
                         mb_per_s=np.where(small, mb["mean"], mb["median"]), cv=mb["std"] / mb["mean"])
    if "ping_ms" in kept:
        cells["ping_ms"] = grouped["ping_ms"].first()
    return cells


def compare_by_run(every_run: pd.DataFrame, pairs: dict[str, tuple[str, str]], drop_first_upload: bool = False,
                   confidence: float = 0.95) -> pd.DataFrame:
    """:func:`compare_pairs` in each run of ``every_run`` (its ``replicate``) on its own, of the uploads the notebook
    keeps (:func:`kept_uploads`): one table, a ``replicate`` column naming the run; each run is its own family
    (Holm's correction over that run's comparisons)."""
    parts = [compare_pairs(kept_uploads(part, drop_first_upload), pairs, confidence).assign(replicate=replicate)
             for replicate, part in every_run.groupby("replicate")]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def first_against_later(every_run: pd.DataFrame) -> pd.DataFrame:
    """Per run (``replicate``), condition and chunk size, of its acknowledged uploads: the MB/s of the cell's first
    upload (``seq`` 0, its warm-up), the median of its later ones and how many (``later``, ``n later``), and whether
    the first was slower than that median (``slower``). Cells without a first or a later upload are left out."""
    ok = every_run[every_run["ok"]]
    keys = ["replicate", *_CELL]
    first = ok[ok["seq"] == 0].groupby(keys)["mb_per_s"].first().rename("first")
    later = later_uploads(ok).groupby(keys)["mb_per_s"].agg(["median", "size"])
    table = pd.concat([first, later.rename(columns={"median": "later", "size": "n later"})], axis=1, join="inner")
    return table.assign(slower=table["first"] < table["later"])


#: How a table's correction is named in a sentence.
CORRECTIONS = {"holm": "Holm's correction", "fdr_bh": "Benjamini–Hochberg's correction (5 % false discoveries)"}


def pairs_over_runs(every_run: pd.DataFrame, pairs: dict[str, tuple[str, str]], confidence: float = 0.95,
                    method: str = "fdr_bh") -> pd.DataFrame:
    """B − A in MB/s over the runs of a group, every pair (name → (A, B)) at every chunk size, as one family.

    In each run (``every_run``'s ``replicate``) a cell is summarised from its later uploads
    (:func:`later_uploads`: the first of a cell is its warm-up) by the small-sample rule
    (:func:`labkit.analysis.inference.rule_statistic`: the median from ten uploads, else the mean); each run's
    B − A is one value (``run 1``, ...), and the runs are the units: their mean with a Student-t interval and a
    one-sample t-test (:func:`labkit.analysis.inference.one_sample_t`), so the interval holds what moves from one run
    to the next (fresh servers, connections, the machine's load), which the uploads of one run cannot show. One
    correction over every row (:func:`labkit.analysis.inference.call_table`), the untestable (fewer than two runs,
    or runs that all agree exactly) listed and counted: by default Benjamini–Hochberg's (a false discovery rate of
    5 %), since with three runs a t-test has two degrees of freedom, and Holm's family-wise bound over the 72
    comparisons of a whole matrix would call only differences some forty times their standard error; ``method``
    ``"holm"`` for that bound. ``B / A`` is the ratio of the runs' means.
    """
    from labkit.analysis.inference import call_table, one_sample_t, rule_statistic

    later = later_uploads(every_run)
    if later.empty:
        return pd.DataFrame()
    statistic = rule_statistic(int(later.groupby(["replicate", *_CELL]).size().min()))
    by_run = later.groupby(["condition", "chunk_bytes", "replicate"])["mb_per_s"].agg(statistic)
    replicates = sorted(later["replicate"].unique())
    rows, results = [], []
    for name, (a, b) in pairs.items():
        for size in sorted(int(s) for s in later["chunk_bytes"].unique()):
            per_run = [by_run.get((b, size, r), np.nan) - by_run.get((a, size, r), np.nan) for r in replicates]
            result = one_sample_t(per_run, confidence)
            value_a = float(np.nanmean([by_run.get((a, size, r), np.nan) for r in replicates]))
            value_b = float(np.nanmean([by_run.get((b, size, r), np.nan) for r in replicates]))
            results.append(result)
            rows.append({"comparison": name, "chunk_bytes": size, "A": a, "B": b, "statistic": statistic.__name__,
                         **{f"run {i}": v for i, v in enumerate(per_run, 1)}, "A MB/s": value_a, "B MB/s": value_b,
                         "B / A": value_b / value_a if value_a else np.nan, "difference": result.difference,
                         "lo": result.low, "hi": result.high, "p": result.pvalue, "runs": result.n_a})
    table = call_table(pd.DataFrame(rows), results, "MB/s", method=method)
    return table.assign(correction=CORRECTIONS[method])


def runs_pairs_headline(over_runs: pd.DataFrame) -> dict[str, int]:
    """Headline counts of :func:`pairs_over_runs`: the comparisons, and per comparison how many chunk sizes it called
    higher, lower, and left unclear or untestable (``runs.http2_minus_grpc.higher`` ...: the comparison's name as
    :func:`~labkit.analysis.inference.key_part` writes it)."""
    from labkit.analysis.inference import key_part

    headline: dict[str, int] = {"runs.comparisons": int(len(over_runs))}
    for name, rows in over_runs.groupby("comparison", sort=False):
        for verdict in ("higher", "lower", "unclear", "not testable"):
            headline[f"runs.{key_part(name)}.{key_part(verdict)}"] = int((rows["verdict"] == verdict).sum())
    return headline
