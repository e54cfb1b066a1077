"""What the upload notebook reports: its tables per condition and chunk size, each cell's detail, and what a run says
of the original's findings.

:mod:`labkit.analysis.upload` labels the uploads and computes the summaries
and comparisons; this module arranges them the way the notebook shows and
keeps them (a condition × chunk-size grid of medians with their intervals,
the CPU table, one ping RTT as a share of an upload, the per-cell records of
the headline JSON). :func:`claims` tests each of the original's findings
(research brief, experiment 3) on each run's numbers, :func:`findings` and
:func:`beyond_the_original` turn a run and its group into the sentences the
notebook says (:meth:`labkit.notebooks.Notebook.say`), tested in
``tests/test_analysis_upload.py`` and ``tests/test_analysis_upload_loopback.py``.
"""

from __future__ import annotations

import pandas as pd

from labkit.analysis import upload
from labkit.units import format_size

_CELL = ["condition", "chunk_bytes"]
#: The chunk size the original called already decent (about 1 KiB).
DECENT_CHUNK_BYTES = 1024


def location_grid(summary: pd.DataFrame, conditions: list[str]) -> pd.DataFrame:
    """A :func:`labkit.analysis.upload.cell_summary` table as ``value [lo, hi]`` text (each cell's location and its
    interval, as the small-sample rule gives them): conditions as rows, chunk sizes as columns."""
    text = [f"{m:.1f} [{lo:.1f}, {hi:.1f}]" for m, lo, hi in zip(summary["value"], summary["lo"], summary["hi"])]
    return summary.assign(cell=text).pivot(index="condition", columns="chunk_bytes", values="cell").reindex(conditions)


def cpu_table(uploads: pd.DataFrame, cpu: dict[str, pd.DataFrame], utilisation: pd.DataFrame,
              conditions: list[str]) -> pd.DataFrame:
    """Per condition and chunk size: median CPU ms per MB (client, server), client µs per chunk, and each side's CPU use.

    ``uploads`` carry :func:`labkit.analysis.upload.with_cpu_costs`' columns and ``chunks``;
    ``cpu[side]`` is the :func:`labkit.analysis.upload.cell_summary` of
    ``<side>_cpu_s_per_mb``; ``utilisation`` the medians of ``client_cpu_util``
    and ``server_cpu_util`` per condition and chunk size.
    """
    per_chunk_us = (uploads["client_cpu_s"] / uploads["chunks"] * 1e6).groupby([uploads["condition"], uploads["chunk_bytes"]])
    return pd.DataFrame({
        "client ms CPU / MB": cpu["client"].set_index(_CELL)["50%"] * 1e3,
        "server ms CPU / MB": cpu["server"].set_index(_CELL)["50%"] * 1e3,
        "client µs CPU / chunk": per_chunk_us.median(),
        "client util": utilisation["client_cpu_util"],
        "server util": utilisation["server_cpu_util"],
    }).reindex(conditions, level=0)


def rtt_share(uploads: pd.DataFrame, ping_ms: float, conditions: list[str]) -> pd.DataFrame:
    """One ping RTT as a share of the median upload time, conditions as rows and chunk sizes as columns.

    The least the original's gRPC timer, stopped before the acknowledgement came back, was short by on this link.
    """
    seconds = uploads.groupby(_CELL)["seconds"].median().unstack("chunk_bytes").reindex(conditions)
    return (ping_ms / 1e3) / seconds


def cell_details(throughput: pd.DataFrame, cpu: dict[str, pd.DataFrame], utilisation: pd.DataFrame,
                 spread: pd.DataFrame, rtt_shares: pd.DataFrame, conditions: list[str]) -> list[dict]:
    """One record per condition and chunk size for the headline JSON's ``cells``: uploads, MB/s summary, CPU, spread, RTT share.

    ``throughput`` and ``cpu[side]`` are :func:`labkit.analysis.upload.cell_summary`
    tables, ``utilisation`` the per-cell medians of CPU use, ``spread``
    :func:`labkit.analysis.upload.spread` and ``rtt_shares`` :func:`rtt_share`.
    Conditions in the order given, chunk sizes ascending.
    """
    by_cell = throughput.set_index(_CELL)
    cpu_cells = {side: table.set_index(_CELL) for side, table in cpu.items()}
    chunk_sizes = sorted(int(s) for s in throughput["chunk_bytes"].unique())
    return [{"condition": c, "chunk_bytes": s, "uploads": int(by_cell.loc[(c, s), "count"]),
             "mb_per_s": by_cell.loc[(c, s), ["statistic", "value", "lo", "hi", "method", "50%", "mean", "std", "min",
                                              "max"]].to_dict(),
             "client_cpu_s_per_mb": cpu_cells["client"].loc[(c, s), "50%"],
             "server_cpu_s_per_mb": cpu_cells["server"].loc[(c, s), "50%"],
             "client_cpu_util": utilisation.loc[(c, s), "client_cpu_util"],
             "server_cpu_util": utilisation.loc[(c, s), "server_cpu_util"],
             "cv": spread.loc[(c, s), "cv"], "rtt_share_of_upload": rtt_shares.at[c, s]}
            for c in conditions for s in chunk_sizes if (c, s) in by_cell.index]


def wire_headline(wire: pd.DataFrame, sizes: tuple[int, int]) -> dict[str, float]:
    """At the smallest and largest chunk (``sizes``), each count of a :func:`labkit.analysis.upload.wire_table` per
    MB and condition: ``wire.<count>.<condition>.<chunk>`` (``client_data_frames_per_mb``, ...)."""
    names = {label: f"{count}_per_mb" for count, label in upload.WIRE_COUNTS.items()}
    return {f"wire.{names[label]}.{condition}.{size}": round(float(value), 1)
            for (condition, size), row in wire.iterrows() if size in sizes
            for label, value in row.items() if label in names and pd.notna(value)}


# --- What a run says of the original's findings: predicates (claims) and the sentences they allow (findings) -------

#: A process kept a core busy through an upload when its CPU time over the upload's wall time was at least this
#: (1.0: one core, all the time): the test of "tiny chunks are CPU-bound".
BUSY_CORE = 0.9
#: The original's figure for tiny chunks: about 200 % CPU per process, two cores each.
PUBLISHED_CORES_PER_PROCESS = 2.0
#: "Decent" at :data:`DECENT_CHUNK_BYTES`: at least this share of the condition's fastest chunk size's MB/s.
DECENT_SHARE = 0.5
#: The chunk size the original saw a large variance at.
VARIANCE_CHUNK_BYTES = 32768
#: The level of every test and correction the sentences name.
ALPHA = 0.05


def size_text(size: int) -> str:
    """A chunk size as a sentence writes it: ``16 B``, ``2 KiB``, ``1 MiB``."""
    text = format_size(int(size))
    return text.replace("MiB", " MiB").replace("KiB", " KiB") if text[-3:] in ("MiB", "KiB") else f"{text[:-1]} B"


def sizes_text(sizes, every_size) -> str:
    """Chunk sizes as ranges of the run's consecutive chunk sizes (``every_size``): ``16 B–2 KiB, 8 KiB``."""
    order = sorted(int(s) for s in every_size)
    chosen = sorted({order.index(int(s)) for s in sizes})
    runs: list[list[int]] = []
    for i in chosen:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return ", ".join(size_text(order[r[0]]) if len(r) == 1 else f"{size_text(order[r[0]])}–{size_text(order[r[-1]])}"
                     for r in runs)


def _of_runs(held: dict, word: str = "runs") -> str:
    return f"{sum(bool(v) for v in held.values())} of {len(held)} {word}"


def number(value: float) -> str:
    """A ratio or a count as a sentence writes it: whole numbers from 10, two decimals below."""
    return f"{value:.0f}" if abs(value) >= 10 else f"{value:.2f}"


def percent(share: float) -> str:
    """A share as a percentage: whole percents, two significant digits below one percent."""
    return f"{share * 100:.0f} %" if share >= 0.01 else f"{share * 100:.2g} %"


def _range(values, fmt="{:.2f}", unit: str = "") -> str:
    """The lowest and highest of ``values`` (``fmt`` a format string or a function), once if they read the same."""
    values = [float(v) for v in values if pd.notna(v)]
    show = fmt if callable(fmt) else fmt.format
    low, high = show(min(values)), show(max(values))
    return f"{low}{unit}" if low == high else f"{low}–{high}{unit}"


def _uploads_a_cell(cells: pd.DataFrame) -> str:
    counts = cells["uploads"]
    n = f"{int(counts.min())}" if counts.min() == counts.max() else f"{int(counts.min())}–{int(counts.max())}"
    return f"{n} uploads a cell"


def _statistic_of(cells: pd.DataFrame) -> str:
    return " or ".join(f"{s}s" for s in dict.fromkeys(cells["statistic"]))


def _method_of(rows: pd.DataFrame, confidence: float) -> str:
    """How a within-run comparison table's differences were taken, for a sentence: test, interval, uploads a side."""
    said = []
    for method in dict.fromkeys(rows["method"]):
        if method in ("block bootstrap", "bootstrap"):
            said.append(f"the difference of the medians with a {'block-' if method == 'block bootstrap' else ''}"
                        f"bootstrap {percent(confidence)} interval and z-test")
        elif method == "Welch t":
            said.append(f"the difference of the means with Welch's {percent(confidence)} interval and t-test")
    sides = [int(x) for n in rows["n"] for x in str(n).split("/")]
    n = str(min(sides)) if min(sides) == max(sides) else f"{min(sides)}–{max(sides)}"
    return f"{' or '.join(said) or 'not testable'}, {n} uploads a side"


def _held_word(held: bool, partly: bool = False) -> str:
    return "holds in this run" if held else "holds only in part in this run" if partly else "does not hold in this run"


def claims(cells: pd.DataFrame, compared: pd.DataFrame) -> dict[str, dict[int, bool]]:
    """Each of the original's findings (research brief, experiment 3) as a predicate on each run's own numbers, run by
    run (``{claim: {replicate: held}}``; a claim the run's design cannot test is left out):

    - ``cpu_bound`` (tiny chunks are CPU-bound): at the smallest chunk size, in every condition, the client or the
      server kept a core busy (median CPU over wall time at least :data:`BUSY_CORE`);
    - ``decent_at_1kib`` (about 1 KiB was already decent): in every condition the location of the
      :data:`DECENT_CHUNK_BYTES` cell's MB/s is at least :data:`DECENT_SHARE` of the fastest chunk size's;
    - ``variance_at_32kib`` (32 KiB had a large variance): in some condition, the coefficient of variation of MB/s at
      :data:`VARIANCE_CHUNK_BYTES` is the largest of the run's chunk sizes;
    - ``tls_variance_only`` (TLS shifted the variance only): no TLS on − off comparison called, in the run's family;
    - ``http2_beats_grpc`` (raw HTTP/2 beat gRPC): HTTP/2 called faster than gRPC at some chunk size and slower at
      none, with TLS and without, in the run's family.

    ``cells`` is :func:`labkit.analysis.upload.run_cells`, ``compared`` :func:`labkit.analysis.upload.compare_by_run`
    (Holm's correction over each run's comparisons)."""
    held: dict[str, dict[int, bool]] = {}
    sizes = sorted(cells.index.unique("chunk_bytes"))
    at_smallest = cells.xs(sizes[0], level="chunk_bytes")
    busy = at_smallest[["client_cpu_util", "server_cpu_util"]].max(axis=1) >= BUSY_CORE
    held["cpu_bound"] = {int(r): bool(b.all()) for r, b in busy.groupby(level="replicate")}
    if DECENT_CHUNK_BYTES in sizes:
        share = _decent_shares(cells)
        held["decent_at_1kib"] = {int(r): bool((s >= DECENT_SHARE).all()) for r, s in share.groupby(level="replicate")}
    if VARIANCE_CHUNK_BYTES in sizes and len(sizes) > 1:
        rank = _variance_ranks(cells)
        held["variance_at_32kib"] = {int(r): bool((k == 1).any()) for r, k in rank.groupby(level="replicate")}
    if len(compared):
        called = compared.assign(called=compared["verdict"].isin(("higher", "lower")))
        tls = called[called["comparison"].str.startswith("TLS")]
        if len(tls):
            held["tls_variance_only"] = {int(r): not rows["called"].any() for r, rows in tls.groupby("replicate")}
        transport = called[~called["comparison"].str.startswith("TLS")]
        if len(transport):
            held["http2_beats_grpc"] = {
                int(r): bool((rows["verdict"] == "higher").any() and not (rows["verdict"] == "lower").any())
                for r, rows in transport.groupby("replicate")}
    return held


def _decent_shares(cells: pd.DataFrame) -> pd.Series:
    """Per run and condition: the location of the :data:`DECENT_CHUNK_BYTES` cell's MB/s over the fastest cell's."""
    location = cells["mb_per_s"]
    best = location.groupby(level=["replicate", "condition"]).max()
    return location.xs(DECENT_CHUNK_BYTES, level="chunk_bytes") / best


def _variance_ranks(cells: pd.DataFrame) -> pd.Series:
    """Per run and condition: the rank of :data:`VARIANCE_CHUNK_BYTES`' coefficient of variation among the run's
    chunk sizes (1: the largest)."""
    rank = cells["cv"].groupby(level=["replicate", "condition"]).rank(ascending=False, method="min")
    return rank.xs(VARIANCE_CHUNK_BYTES, level="chunk_bytes")


def _verdict_sizes(rows: pd.DataFrame, verdict: str) -> list[int]:
    return sorted(int(s) for s in rows.loc[rows["verdict"] == verdict, "chunk_bytes"])


def _called_at(rows: pd.DataFrame, label: str, sizes) -> str:
    """Where one comparison's rows were called lower and higher (B slower, B faster), for a sentence."""
    lower, higher = _verdict_sizes(rows, "lower"), _verdict_sizes(rows, "higher")
    if not (lower or higher):
        return f"at none of the {len(rows)} chunk sizes {label}"
    said = [f"{word} {label} at {len(at)} of {len(rows)} chunk sizes ({sizes_text(at, sizes)})"
            for word, at in (("slower", lower), ("faster", higher)) if at]
    return " and ".join(said)


def _counted_sizes(counts: dict[int, int], runs: int, sizes) -> str:
    """``{size: runs}`` as "in 3 of 3 runs at 16 B–1 KiB, in 2 at 2 KiB", most runs first; "" if none."""
    said = []
    for k in range(runs, 0, -1):
        at = [s for s, c in counts.items() if c == k]
        if at:
            said.append(f"in {k}{f' of {runs} runs' if not said else ''} at {sizes_text(at, sizes)}")
    return ", ".join(said)


def findings(cells: pd.DataFrame, compared: pd.DataFrame, over_runs: pd.DataFrame | None, this: int,
             confidence: float = 0.95) -> list[str]:
    """The sentences the notebook says of the original's findings, each only where its predicate (:func:`claims`)
    holds or fails on this run's numbers (run ``this`` of ``cells``' and ``compared``'s replicates), with those
    numbers, their n, the method, and the correction a verdict was called after; for a group of runs, in how many
    runs each holds, and the comparisons over the runs (``over_runs``, :func:`labkit.analysis.upload.pairs_over_runs`,
    or None for a run made alone) with their correction."""
    held = claims(cells, compared)
    runs = sorted(int(r) for r in cells.index.unique("replicate"))
    group = len(runs) > 1
    mine = cells.xs(this, level="replicate")
    conditions = list(dict.fromkeys(mine.index.get_level_values("condition")))
    sizes = sorted(int(s) for s in mine.index.unique("chunk_bytes"))
    smallest, largest = sizes[0], sizes[-1]
    n_cell = _uploads_a_cell(mine)
    lines = []

    # Tiny chunks are CPU-bound.
    at = mine.xs(smallest, level="chunk_bytes")
    busy = [c for c in conditions if max(at.loc[c, "client_cpu_util"], at.loc[c, "server_cpu_util"]) >= BUSY_CORE]
    most = float(at[["client_cpu_util", "server_cpu_util"]].max().max())
    uses = ", ".join(f"{c} {at.loc[c, 'client_cpu_util']:.2f} and {at.loc[c, 'server_cpu_util']:.2f}" for c in conditions)
    lines.append(
        f"**Tiny chunks are CPU-bound** (the original: about {percent(PUBLISHED_CORES_PER_PROCESS)} CPU per process) "
        f"{_held_word(held['cpu_bound'][this], bool(busy))}: at {size_text(smallest)} the client or the server kept at "
        f"least {BUSY_CORE} of a core busy in "
        + (", ".join(busy) if 0 < len(busy) < len(conditions) else "every condition" if busy else "no condition")
        + f" (client and server CPU over wall time, medians of {n_cell}: {uses} of a core); no process used more than "
        f"{most:.2f} of a core, {'short of' if most < 0.9 * PUBLISHED_CORES_PER_PROCESS else 'about'} the original's "
        f"{percent(PUBLISHED_CORES_PER_PROCESS)}.")
    ratio = (mine["client_cpu_s_per_mb"].xs(smallest, level="chunk_bytes")
             / mine["client_cpu_s_per_mb"].xs(largest, level="chunk_bytes"))
    lines.append(f"The client's CPU per MB at {size_text(smallest)} over its CPU per MB at {size_text(largest)} in "
                 f"this run (medians of {n_cell}): " + ", ".join(f"{c} {number(ratio[c])}×" for c in conditions) + ".")
    if group:
        every_ratio = (cells["client_cpu_s_per_mb"].xs(smallest, level="chunk_bytes")
                       / cells["client_cpu_s_per_mb"].xs(largest, level="chunk_bytes"))
        lines.append(
            f"Over the {len(runs)} runs of this group, tiny chunks are CPU-bound (a process at {BUSY_CORE} of a core "
            f"or more at {size_text(smallest)} in every condition) in {_of_runs(held['cpu_bound'])}; the client's CPU "
            f"per MB at {size_text(smallest)} over its CPU per MB at {size_text(largest)}, run by run: "
            + ", ".join(f"{c} {_range(every_ratio.xs(c, level='condition'), number, '×')}" for c in conditions) + ".")

    # About 1 KiB was already decent.
    if "decent_at_1kib" in held:
        share = _decent_shares(cells)
        fastest = mine["mb_per_s"].groupby(level="condition").idxmax()
        ok = [c for c in conditions if share[(this, c)] >= DECENT_SHARE]
        parts = ", ".join(f"{c} {percent(share[(this, c)])} (of {mine.loc[fastest[c], 'mb_per_s']:.1f} MB/s at "
                          f"{size_text(fastest[c][1])})" for c in conditions)
        lines.append(
            f"**About {size_text(DECENT_CHUNK_BYTES)} was already decent** (the original) "
            f"{_held_word(held['decent_at_1kib'][this], bool(ok))}: at {size_text(DECENT_CHUNK_BYTES)} each condition "
            f"reached this share of its fastest chunk size's MB/s ({_statistic_of(mine)} of {n_cell}): {parts}; half "
            f"or more in {', '.join(ok) if 0 < len(ok) < len(conditions) else 'every condition' if ok else 'no condition'}.")
        if group:
            lines.append(
                f"Over the {len(runs)} runs, {size_text(DECENT_CHUNK_BYTES)} reached half or more of the fastest chunk "
                "size's MB/s " + ", ".join(
                    f"over {c} in {int((share.xs(c, level='condition') >= DECENT_SHARE).sum())} of {len(runs)} runs "
                    f"({_range(share.xs(c, level='condition') * 100, '{:.0f}', ' %')})" for c in conditions) + ".")

    # 32 KiB had a large variance.
    if "variance_at_32kib" in held:
        rank = _variance_ranks(cells)
        top = mine["cv"].groupby(level="condition").idxmax()
        largest_at = [c for c in conditions if rank[(this, c)] == 1]
        lines.append(
            f"**{size_text(VARIANCE_CHUNK_BYTES)} had a large variance** (the original) "
            f"{_held_word(held['variance_at_32kib'][this])}: {size_text(VARIANCE_CHUNK_BYTES)}'s coefficient of "
            f"variation of MB/s (std / mean of {n_cell}) was the largest of the {len(sizes)} chunk sizes in "
            f"{', '.join(largest_at) or 'no condition'}; its rank, 1 the largest: "
            + ", ".join(f"{c} {int(rank[(this, c)])}" for c in conditions)
            + "; the largest: " + ", ".join(f"{c} {mine.loc[top[c], 'cv']:.2f} at {size_text(top[c][1])}"
                                            for c in conditions) + ".")
        if group:
            lines.append(f"Over the {len(runs)} runs, {size_text(VARIANCE_CHUNK_BYTES)}'s coefficient of variation was "
                         f"the largest of the chunk sizes in {int((rank == 1).sum())} of {len(rank)} run × condition "
                         f"cells (its rank {_range(rank, '{:.0f}')} of {len(sizes)}).")
    elif VARIANCE_CHUNK_BYTES not in sizes:
        lines.append(f"**{size_text(VARIANCE_CHUNK_BYTES)} had a large variance** (the original): not tested, this run "
                     f"has no {size_text(VARIANCE_CHUNK_BYTES)} chunks.")

    within = compared[compared["replicate"] == this] if len(compared) else compared
    family = (f"Holm's correction over the {len(within)} comparisons of this run" if len(within) else "")
    # TLS shifted the variance only.
    if "tls_variance_only" in held:
        tls = within[within["comparison"].str.startswith("TLS")]
        parts = [_called_at(rows, f"over {rows['A'].iloc[0]}", sizes) for _, rows in tls.groupby("comparison", sort=False)]
        cv = mine["cv"].unstack("condition")
        wider = ", ".join(f"{a} {int((cv[b] > cv[a]).sum())} of {len(cv)}"
                          for a, b in tls.groupby("comparison", sort=False)[["A", "B"]].first().itertuples(index=False))
        unclear = tls.loc[tls["verdict"] == "unclear", "mde"]
        verdict = "is not contradicted in this run" if held["tls_variance_only"][this] else _held_word(False)
        mde = (f"; the smallest differences it could have called, its MDEs, {_range(unclear, number, ' MB/s')}"
               if held["tls_variance_only"][this] and unclear.notna().any() else "")
        lines.append(
            f"**TLS shifted the variance only** (the original) {verdict}: TLS on "
            f"against off was called {'; '.join(parts)} ({_method_of(tls, confidence)}; {family}{mde}). The coefficient "
            f"of variation of MB/s was larger with TLS than without at this many chunk sizes (not a test): {wider}.")
        if group:
            every = compared[compared["comparison"].str.startswith("TLS")]
            per = ", ".join(
                f"over {rows['A'].iloc[0]} in {rows.groupby('replicate')['verdict'].agg(lambda v: v.isin(('higher', 'lower')).any()).sum()} "
                f"of {len(runs)} runs" for _, rows in every.groupby("comparison", sort=False))
            lines.append(f"Each of the {len(runs)} runs on its own (Holm's correction over its own comparisons): TLS "
                         f"on against off was called at some chunk size {per}; the original's claim holds in "
                         f"{_of_runs(held['tls_variance_only'])}.")

    # Raw HTTP/2 beat gRPC.
    if "http2_beats_grpc" in held:
        transport = within[~within["comparison"].str.startswith("TLS")]
        parts, faster_any, slower_any = [], False, False
        for name, rows in transport.groupby("comparison", sort=False):
            higher, lower = _verdict_sizes(rows, "higher"), _verdict_sizes(rows, "lower")
            faster_any, slower_any = faster_any or bool(higher), slower_any or bool(lower)
            ratio = rows.set_index("chunk_bytes")["B / A"]
            said = [f"faster at {sizes_text(higher, sizes)} (HTTP/2 ÷ gRPC {_range(ratio[higher], number, '×')})"
                    if higher else "faster at no chunk size"]
            if lower:
                said.append(f"slower at {sizes_text(lower, sizes)} ({_range(ratio[lower], number, '×')})")
            parts.append(f"{'with' if rows['A'].iloc[0].endswith('+TLS') else 'without'} TLS {' and '.join(said)}")
        lines.append(
            f"**Raw HTTP/2 beat gRPC** (the original), both timed to the server's acknowledgement, "
            f"{_held_word(held['http2_beats_grpc'][this], faster_any and slower_any)}: HTTP/2 was called "
            f"{'; '.join(parts)}, neither at the other sizes ({_method_of(transport, confidence)}; {family}).")
        if group:
            every = compared[~compared["comparison"].str.startswith("TLS")]
            per = []
            for name, rows in every.groupby("comparison", sort=False):
                said = []
                for verdict, word in (("higher", "faster"), ("lower", "slower")):
                    counts = rows[rows["verdict"] == verdict].groupby("chunk_bytes").size().to_dict()
                    said.append(f"{word} {_counted_sizes(counts, len(runs), sizes) or 'in no run at any size'}")
                per.append(f"{'with' if rows['A'].iloc[0].endswith('+TLS') else 'without'} TLS, HTTP/2 called "
                           + ", and ".join(said))
            lines.append(f"Each of the {len(runs)} runs on its own (Holm's correction over its own comparisons): "
                         + "; ".join(per) + f"; the original's claim holds in {_of_runs(held['http2_beats_grpc'])}.")

    if over_runs is not None and len(over_runs):
        lines.extend(_over_runs_lines(over_runs, sizes, confidence))
    return lines


def claims_headline(held: dict[str, dict[int, bool]], this: int) -> dict[str, object]:
    """The headline fields of :func:`claims`: ``claim.<name>`` (held in run ``this``) and ``runs.claim.<name>`` (in how
    many of the group's runs)."""
    return {**{f"claim.{name}": runs[this] for name, runs in held.items()},
            **{f"runs.claim.{name}": int(sum(runs.values())) for name, runs in held.items()}}


def _over_runs_lines(over_runs: pd.DataFrame, sizes, confidence: float) -> list[str]:
    """The comparisons over the runs (:func:`labkit.analysis.upload.pairs_over_runs`), TLS's and the transports',
    each with the correction it was called after, and for Benjamini–Hochberg's what Holm's would call of them."""
    from labkit.analysis.inference import adjust

    runs = int(over_runs["runs"].max())
    family = len(over_runs)
    bh = over_runs["correction"].iloc[0] == upload.CORRECTIONS["fdr_bh"]
    correction = "Benjamini–Hochberg's correction" if bh else over_runs["correction"].iloc[0]
    called = int(over_runs["verdict"].isin(("higher", "lower")).sum())
    method = (f"each run's B − A one value, from the {_statistic_of(over_runs)} of its cells' later uploads; "
              f"Student's t over the {runs} runs; {correction} over the {family} comparisons")
    if bh:
        holm = int(adjust(over_runs["p"].to_list(), "holm", ALPHA)[0].sum())
        method += (f", which holds the expected share of false calls among the differences called at {percent(ALPHA)} "
                   f"but not the chance of any false call: Holm's correction, which does, would call {holm} of "
                   f"the {called} called here")
    lines = []
    for what, tls in (("TLS on against off", True), ("HTTP/2 against gRPC", False)):
        rows = over_runs[over_runs["comparison"].str.startswith("TLS") == tls]
        if rows.empty:
            continue
        parts = [_called_at(pair, f"over {pair['A'].iloc[0]}" if tls else
                            f"{'with' if pair['A'].iloc[0].endswith('+TLS') else 'without'} TLS", sizes)
                 for _, pair in rows.groupby("comparison", sort=False)]
        how = method if not lines else f"Student's t over the {runs} runs, {correction} over the same {family} comparisons"
        lines.append(f"Over the {runs} runs as units ({how}): {what} was called " + "; ".join(parts) + ".")
    return lines


def beyond_the_original(cells: pd.DataFrame, compared: pd.DataFrame, first_later: pd.DataFrame, this: int,
                        ping_ms: float) -> list[str]:
    """What labkit measures that the original did not, as sentences on this run's numbers (run ``this``): the first
    upload of a cell against its later ones (``first_later``, :func:`labkit.analysis.upload.first_against_later`, over
    every run of the group: a two-sided sign test per chunk size, Holm's correction over the chunk sizes); what the
    chunks became (frames, writes and system calls per MB, where labkit-go counted them), beside where HTTP/2 was
    called slower or faster than gRPC (``compared``, :func:`labkit.analysis.upload.compare_by_run`); and one ping RTT
    (``ping_ms``) against the upload time, the least the original's gRPC timer left out."""
    from scipy.stats import binomtest

    from labkit.analysis.inference import adjust

    lines = []
    mine = cells.xs(this, level="replicate")
    conditions = list(dict.fromkeys(mine.index.get_level_values("condition")))
    sizes = sorted(int(s) for s in mine.index.unique("chunk_bytes"))
    n_cell = _uploads_a_cell(mine)

    if len(first_later):
        runs = first_later.index.unique("replicate")
        per_size = first_later.groupby(level="chunk_bytes")["slower"].agg(["sum", "size"])
        p = [binomtest(int(k), int(n), 0.5).pvalue for k, n in zip(per_size["sum"], per_size["size"])]
        rejected = adjust(p, "holm", ALPHA)[0]
        slower = [int(s) for s, r, k, n in zip(per_size.index, rejected, per_size["sum"], per_size["size"]) if r and k > n / 2]
        faster = [int(s) for s, r, k, n in zip(per_size.index, rejected, per_size["sum"], per_size["size"]) if r and k < n / 2]
        adjusted = pd.Series(adjust(p, "holm", ALPHA)[1], index=per_size.index)
        rest = per_size.drop(index=slower + faster)
        where = (f"the {len(runs)} runs × {len(conditions)} conditions" if len(runs) > 1
                 else f"this run's {len(conditions)} conditions")

        def cells_at(sizes_of) -> str:
            rows = per_size.loc[sizes_of]
            return f"{_range(rows['sum'], '{:.0f}')} of {_range(rows['size'], '{:.0f}')} cells"

        lines.append(
            f"**The first upload of a cell** (its warm-up, on a connection that had carried only a 1-byte upload) "
            f"against the median of the cell's later uploads, over {where} (two-sided sign test at each chunk size, "
            f"Holm's correction over the {len(per_size)} chunk sizes): called slower at "
            + (f"{sizes_text(slower, sizes)} (slower in {cells_at(slower)})" if slower else "no chunk size")
            + (f", faster at {sizes_text(faster, sizes)} (slower in {cells_at(faster)})" if faster else "")
            + (f"; not called at the other {len(rest)} sizes ({sizes_text(rest.index, sizes)}), where it was slower "
               f"in {cells_at(rest.index)} (adjusted p {_range(adjusted[rest.index], '{:.2g}')})." if len(rest) else "."))

    counted = mine["server_rw_syscalls_per_mb"].notna().any() and mine["client_writes_per_mb"].notna().any()
    if counted:
        at = mine.xs(sizes[0], level="chunk_bytes")
        frames = at["client_data_frames_per_mb"]
        chunks_per_mb = 1e6 / sizes[0]
        per_write = frames / at["client_writes_per_mb"]
        grpc = [c for c in conditions if c.startswith("grpc")]
        http2 = [c for c in conditions if c.startswith("http2")]
        every_frame = bool((frames >= 0.99 * chunks_per_mb).all())
        server = mine["server_rw_syscalls_per_mb"].unstack("condition")
        within = (compared[(compared["replicate"] == this) & ~compared["comparison"].str.startswith("TLS")]
                  if "comparison" in compared else pd.DataFrame(columns=["comparison", "chunk_bytes", "A", "B", "verdict"]))
        ratios = {}
        for _, row in within.iterrows():
            ratios.setdefault(row["verdict"], []).append(server.at[row["chunk_bytes"], row["B"]]
                                                         / server.at[row["chunk_bytes"], row["A"]])
        by_verdict = "; ".join(
            f"{_range(ratios[v], number, '×')} where HTTP/2 was called {word} than gRPC "
            f"({sizes_text(within.loc[within['verdict'] == v, 'chunk_bytes'], sizes)})"
            for v, word in (("lower", "slower"), ("higher", "faster")) if v in ratios)
        pairs = [(a, b) for a, b in within[["A", "B"]].drop_duplicates().itertuples(index=False)]
        at_smallest = ", ".join(f"{number(server.at[sizes[0], b] / server.at[sizes[0], a])}× "
                                f"{'with' if a.endswith('+TLS') else 'without'} TLS" for a, b in pairs)
        sent = ("every condition sent a DATA frame per chunk or more" if every_frame
                else "not every condition sent a DATA frame per chunk")
        writes = "; ".join(f"{_range(per_write[side], number)} over {name}"
                           for side, name in ((grpc, "gRPC"), (http2, "HTTP/2")) if side)
        lines.append(
            f"**What the chunks became** in this run (labkit-go's counts per MB of file, medians of {n_cell}): at "
            f"{size_text(sizes[0])} {sent}; a write of the client's socket carried DATA frames: {writes}."
            + (f" The HTTP/2 server's read and write system calls per MB over the gRPC server's, at the same TLS "
               f"mode: {at_smallest} at {size_text(sizes[0])}"
               + (f"; {by_verdict} (Holm's correction over the run's comparisons)" if by_verdict else "") + "."
               if pairs else ""))

    seconds = mine["seconds"].unstack("chunk_bytes")
    share = (ping_ms / 1e3) / seconds
    low, high = share.stack().idxmin(), share.stack().idxmax()
    lines.append(
        f"**The original's timer** stopped gRPC uploads before the server's acknowledgement: one ping RTT of this run's link "
        f"({ping_ms:.3g} ms) is {percent(share.stack().min())} ({low[0]} at {size_text(low[1])}) to "
        f"{percent(share.stack().max())} ({high[0]} at {size_text(high[1])}) of a cell's median upload time here, the least "
        "that timer left out, besides whatever was still queued behind the last chunk.")
    return lines
