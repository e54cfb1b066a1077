"""What the upload notebook reports: its tables per condition and chunk size, its summary sentences, and each cell's detail.

:mod:`labkit.analysis.upload` labels the uploads and computes the summaries
and comparisons; this module arranges them the way the notebook shows and
keeps them (a condition × chunk-size grid of medians with their intervals,
the CPU table, one ping RTT as a share of an upload, the sentences under
"What this shows", and the per-cell records of the headline JSON).
"""

from __future__ import annotations

import pandas as pd

from labkit.analysis.summary import Comparison
from labkit.units import format_size

_CELL = ["condition", "chunk_bytes"]
#: The chunk size the summary names between the smallest and the largest: the original found about 1 KiB already decent.
DECENT_CHUNK_BYTES = 1024


def median_ci_grid(summary: pd.DataFrame, conditions: list[str]) -> pd.DataFrame:
    """A :func:`labkit.analysis.upload.cell_summary` table as ``median [lo, hi]`` text: conditions as rows, chunk sizes as columns."""
    text = [f"{m:.1f} [{lo:.1f}, {hi:.1f}]" for m, lo, hi in zip(summary["50%"], summary["50%_lo"], summary["50%_hi"])]
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


def summary_lines(uploads: pd.DataFrame, conditions: list[str], comparisons: dict[tuple[str, int], Comparison]) -> list[str]:
    """The bullets of "what this shows": per condition, MB/s and CPU from the smallest chunk to the largest; comparisons at both ends.

    ``uploads`` carry :func:`labkit.analysis.upload.with_cpu_costs`' columns;
    ``comparisons`` are :func:`labkit.analysis.upload.compare_pairs` results
    (name, chunk size) → comparison, of which those at the smallest and the
    largest chunk size are described.
    """
    medians = uploads.groupby(_CELL)[["mb_per_s", "client_cpu_util", "server_cpu_util", "client_cpu_s_per_mb"]].median()
    smallest, largest = int(uploads["chunk_bytes"].min()), int(uploads["chunk_bytes"].max())
    small, large = format_size(smallest), format_size(largest)
    lines = []
    for condition in conditions:
        low, high = medians.loc[(condition, smallest)], medians.loc[(condition, largest)]
        decent = medians["mb_per_s"].get((condition, DECENT_CHUNK_BYTES), float("nan"))
        lines.append(
            f"- **{condition}**: {low['mb_per_s']:.1f} MB/s at {small}, {decent:.1f} at {format_size(DECENT_CHUNK_BYTES)}, "
            f"{high['mb_per_s']:.1f} at {large}; client CPU {low['client_cpu_s_per_mb'] * 1e3:.0f} ms/MB at "
            f"{small} against {high['client_cpu_s_per_mb'] * 1e3:.1f} ms/MB at {large}; "
            f"client + server CPU {low['client_cpu_util'] + low['server_cpu_util']:.0%} of the wall time at {small}."
        )
    for (name, size), r in sorted(comparisons.items()):
        if size in (smallest, largest):
            lines.append(f"- {name} at {format_size(size)}: {r.median_diff:+.1f} MB/s "
                         f"[{r.median_diff_ci[0]:+.1f}, {r.median_diff_ci[1]:+.1f}], B / A = {r.median_b / r.median_a:.2f}.")
    return lines


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
             "mb_per_s": by_cell.loc[(c, s), ["50%", "50%_lo", "50%_hi", "mean", "std", "min", "max"]].to_dict(),
             "client_cpu_s_per_mb": cpu_cells["client"].loc[(c, s), "50%"],
             "server_cpu_s_per_mb": cpu_cells["server"].loc[(c, s), "50%"],
             "client_cpu_util": utilisation.loc[(c, s), "client_cpu_util"],
             "server_cpu_util": utilisation.loc[(c, s), "server_cpu_util"],
             "cv": spread.loc[(c, s), "cv"], "rtt_share_of_upload": rtt_shares.at[c, s]}
            for c in conditions for s in chunk_sizes if (c, s) in by_cell.index]
