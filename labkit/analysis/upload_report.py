"""What the upload notebook reports: its tables per condition and chunk size, its summary sentences, and each cell's detail.

:mod:`labkit.analysis.upload` labels the uploads and computes the summaries
and comparisons; this module arranges them the way the notebook shows and
keeps them (a condition × chunk-size grid of medians with their intervals,
the CPU table, one ping RTT as a share of an upload, the sentences under
"What this shows", and the per-cell records of the headline JSON).
"""

from __future__ import annotations

import pandas as pd

from labkit.analysis import upload
from labkit.units import format_size

_CELL = ["condition", "chunk_bytes"]
#: The chunk size the summary names between the smallest and the largest: the original found about 1 KiB already decent.
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


def summary_lines(uploads: pd.DataFrame, conditions: list[str], compared: pd.DataFrame) -> list[str]:
    """The bullets of "what this shows": per condition, MB/s and CPU from the smallest chunk to the largest; comparisons at both ends.

    ``uploads`` carry :func:`labkit.analysis.upload.with_cpu_costs`' columns;
    ``compared`` is :func:`labkit.analysis.upload.compare_pairs`, of which the
    rows at the smallest and the largest chunk size are described, each with
    its verdict after the family's correction.
    """
    from labkit.analysis.inference import verdict_text

    medians = uploads.groupby(_CELL)[["mb_per_s", "client_cpu_util", "server_cpu_util", "client_cpu_s_per_mb"]].median()
    smallest, largest = int(uploads["chunk_bytes"].min()), int(uploads["chunk_bytes"].max())
    small, large = format_size(smallest), format_size(largest)
    lines = []
    for condition in conditions:
        low, high = medians.loc[(condition, smallest)], medians.loc[(condition, largest)]
        decent = medians["mb_per_s"].get((condition, DECENT_CHUNK_BYTES), float("nan"))
        lines.append(
            f"- **{condition}**: median {low['mb_per_s']:.1f} MB/s at {small}, {decent:.1f} at "
            f"{format_size(DECENT_CHUNK_BYTES)}, {high['mb_per_s']:.1f} at {large}; client CPU "
            f"{low['client_cpu_s_per_mb'] * 1e3:.0f} ms/MB at {small} against {high['client_cpu_s_per_mb'] * 1e3:.1f} "
            f"ms/MB at {large}; client + server CPU {low['client_cpu_util'] + low['server_cpu_util']:.0%} of the wall "
            f"time at {small}."
        )
    ends = compared[compared["chunk_bytes"].isin((smallest, largest))].sort_values(["comparison", "chunk_bytes"])
    for _, r in ends.iterrows():
        lines.append(f"- {r['comparison']} at {format_size(r['chunk_bytes'])}: {r['difference']:+.1f} MB/s "
                     f"[{r['lo']:+.1f}, {r['hi']:+.1f}] ({r['statistic']}s of {r['n']} uploads), B / A = "
                     f"{r['B / A']:.2f}: {verdict_text(r['verdict'], r['mde'], 'MB/s')}.")
    return lines


def _sizes(sizes) -> str:
    """Chunk sizes as a sentence names them: ``16KiB``, ``256KiB–1MiB``."""
    sizes = sorted(sizes)
    return format_size(sizes[0]) if len(sizes) == 1 else f"{format_size(sizes[0])}–{format_size(sizes[-1])}"


def chunk_size_line(ranges: pd.DataFrame, low: int, high: tuple[int, ...]) -> str:
    """The bullet on chunk sizes from :func:`labkit.analysis.upload.chunk_ranges`: each condition's later uploads at
    ``low`` against ``high``, and in which the two ranges were apart in every run."""
    apart = [c for c, row in ranges.iterrows() if row["apart"]]
    shown = "; ".join(f"{c} {row['low min']:.0f}–{row['low max']:.0f} against {row['high min']:.0f}–"
                      f"{row['high max']:.0f}" for c, row in ranges.iterrows())
    runs = int(ranges["runs"].max()) if len(ranges) else 0
    return (f"- **{format_size(low)} against {_sizes(high)} chunks**: the later uploads of a cell (its first apart), "
            f"slowest–fastest MB/s over the {runs} run{'s' if runs != 1 else ''}, at {format_size(low)} against "
            f"{_sizes(high)}: {shown}. The two ranges are apart in every run for {', '.join(apart) or 'no condition'}"
            + (f", and overlap for {', '.join(c for c in ranges.index if c not in apart)}." if len(apart) < len(ranges)
               else "."))


def tls_line(compared: pd.DataFrame, in_runs: pd.DataFrame, from_size: int) -> str:
    """The TLS bullet: how many TLS comparisons this run's family called (and the MDEs of the unclear ones from
    ``from_size``), and in how many run × size cells from ``from_size`` the later uploads with TLS were slower
    (:func:`labkit.analysis.upload.pairs_in_runs`)."""
    tls = compared[compared["comparison"].str.startswith("TLS")]
    called = tls[tls["verdict"].isin(("higher", "lower"))]
    unclear = tls[(tls["verdict"] == "unclear") & (tls["chunk_bytes"] >= from_size)]
    slower = "; ".join(f"{name.split(', ')[-1]}: slower in {row['B below']} of {row['cells']}"
                       for name, row in in_runs.iterrows() if name.startswith("TLS"))
    return (f"- **TLS**: of its {len(tls)} comparisons in this run, {len(called)} "
            f"{'is' if len(called) == 1 else 'are'} called after Holm's correction over the {len(compared)} comparisons"
            + (f"; from {format_size(from_size)} on, only a difference of "
               f"{unclear['mde'].min():.0f}–{unclear['mde'].max():.0f} MB/s or more could have been called (their "
               "MDEs)" if len(unclear) else "")
            + f". Over the runs, the later uploads with TLS against without, run × chunk size from "
            f"{format_size(from_size)}: {slower}.")


def transport_line(compared: pd.DataFrame, in_runs: pd.DataFrame, from_size: int) -> str:
    """The HTTP/2 against gRPC bullet: the chunk sizes at which this run's family called HTTP/2 faster or slower
    (with the ratio), and in how many run × size cells from ``from_size`` gRPC's later uploads were faster than
    HTTP/2's (:func:`labkit.analysis.upload.pairs_in_runs`)."""
    transport = compared[~compared["comparison"].str.startswith("TLS")]
    faster, slower = (transport[transport["verdict"] == v] for v in ("higher", "lower"))
    large_called = transport[(transport["chunk_bytes"] >= from_size) & transport["verdict"].isin(("higher", "lower"))]

    def where(rows) -> str:
        return ", ".join(f"{format_size(r['chunk_bytes'])} against {r['A']} ({r['B / A']:.1f}×)" for _, r in rows.iterrows())

    grpc_faster = " and ".join(f"{row['B below']} of {row['cells']} ({name})" for name, row in in_runs.iterrows()
                               if not name.startswith("TLS"))
    return (f"- **HTTP/2 against gRPC**, both timed to the server's acknowledgement: HTTP/2 called faster in this run "
            f"at {where(faster) or 'no chunk size'}" + (f", slower at {where(slower)}" if len(slower) else "")
            + f" (HTTP/2 ÷ gRPC). From {format_size(from_size)} on, gRPC's later uploads were faster "
            f"than HTTP/2's in {grpc_faster} run × chunk-size cells"
            + (", though no comparison there is called within one run." if large_called.empty else "."))


def over_the_runs_lines(every_run: pd.DataFrame, conditions: list[str], chunk_sizes, compared: pd.DataFrame,
                        tls_pairs: dict, transport_pairs: dict) -> list[str]:
    """The three bullets that read a run with the other runs of its group (``every_run``: their successful uploads,
    labelled): chunk sizes above :data:`DECENT_CHUNK_BYTES` against each other, TLS, and HTTP/2 against gRPC; none
    with fewer than two such sizes."""
    above = sorted(size for size in chunk_sizes if size > DECENT_CHUNK_BYTES)
    if len(above) < 2:
        return []
    larger = tuple(above[1:])
    return [
        chunk_size_line(upload.chunk_ranges(every_run, conditions, above[0], larger), above[0], larger),
        tls_line(compared, upload.pairs_in_runs(every_run, tls_pairs, tuple(above)), above[0]),
        transport_line(compared, upload.pairs_in_runs(every_run, transport_pairs, larger), above[1]),
    ]


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


def wire_line(wire: pd.DataFrame, size: int) -> str:
    """The bullet on what the chunks became at chunk ``size`` (a :func:`labkit.analysis.upload.wire_table`): per
    condition, DATA frames per MB, the client's writes per MB and frames per write, and the server's read and write
    system calls per MB; the line saying none were counted for a run without them."""
    needed = ["client DATA frames / MB", "client writes / MB", "server read+write syscalls / MB"]
    if not set(needed) <= set(wire.columns):
        return ("- **What the chunks became**: not counted in this run (frames and system calls are counted by "
                "labkit-go's ends; a Python end counts none).")
    at = wire.xs(size, level="chunk_bytes")
    parts = [f"{condition} {row[needed[0]]:,.0f} DATA frames in {row[needed[1]]:,.0f} writes "
             f"({row[needed[0]] / row[needed[1]]:,.1f} frames a write), server {row[needed[2]]:,.0f} calls"
             for condition, row in at.iterrows()]
    return (f"- **What the chunks became** at {format_size(size)}, per MB (medians of the later uploads): "
            + "; ".join(parts) + ".")


def small_chunk_mechanism(wire: pd.DataFrame, size: int) -> dict[str, float | bool]:
    """What the notebook says of the chunks at ``size``, from a :func:`labkit.analysis.upload.wire_table`:
    ``frame_per_chunk`` (every condition sent a DATA frame per chunk or more), ``grpc_frames_per_write`` and
    ``http2_frames_per_write`` (the fewest frames a client write carried among each transport's conditions, and the
    most), and ``server_calls_http2_over_grpc`` (the fewest read/write calls per MB of an HTTP/2 server over the most
    of a gRPC one)."""
    at = wire.xs(size, level="chunk_bytes")
    frames, writes = at["client DATA frames / MB"], at["client writes / MB"]
    server = at["server read+write syscalls / MB"]
    grpc, http2 = at.index.str.startswith("grpc"), at.index.str.startswith("http2")
    per_write = frames / writes
    return {
        "frame_per_chunk": bool((frames >= 0.99 * at["chunks / MB"]).all()),
        "grpc_frames_per_write": float(per_write[grpc].min()),
        "http2_frames_per_write": float(per_write[http2].max()),
        "server_calls_http2_over_grpc": float(server[http2].min() / server[grpc].max()),
    }


def runs_verdict_lines(over_runs: pd.DataFrame) -> list[str]:
    """One bullet per comparison of :func:`labkit.analysis.upload.pairs_over_runs`: the chunk sizes where it was called
    higher and lower over the runs (B − A), and those left unclear with the range of their MDEs."""
    if over_runs is None or over_runs.empty:
        return []
    runs = int(over_runs["runs"].max())
    lines = []
    for name, rows in over_runs.groupby("comparison", sort=False):
        said = []
        for verdict, word in (("higher", "B faster"), ("lower", "B slower")):
            sizes = rows.loc[rows["verdict"] == verdict, "chunk_bytes"]
            if len(sizes):
                said.append(f"{word} at {', '.join(format_size(int(x)) for x in sizes)}")
        unclear = rows[rows["verdict"] == "unclear"]
        if len(unclear):
            said.append(f"unclear at {len(unclear)} size{'s' if len(unclear) != 1 else ''} (MDE "
                        f"{unclear['mde'].min():.3g}–{unclear['mde'].max():.3g} MB/s)")
        untestable = int((rows["verdict"] == "not testable").sum())
        if untestable:
            said.append(f"not testable at {untestable}")
        a, b = rows["A"].iloc[0], rows["B"].iloc[0]
        lines.append(f"- **{name}** (A = {a}, B = {b}) over the {runs} runs, after "
                     f"{over_runs['correction'].iloc[0]} over {len(over_runs)}: " + "; ".join(said) + ".")
    return lines
