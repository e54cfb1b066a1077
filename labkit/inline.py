"""How labkit's objects show in a notebook: a run as a short HTML summary, summaries as styled tables, figures at a
size a person can read.

- :func:`run_html` is :meth:`labkit.results.Run._repr_html_`: experiment, hosts, cells, rows and status in a few lines,
  so a cell that ends with ``run`` says what it made.
- :func:`styled_summary` is ``run.summary(styled=True)``: the table the command prints, as a pandas Styler (numbers
  rounded, empty columns dropped, a caption with its n); for an idle-step run the step table of ``labkit sweep``:
  one row per condition, one column per size, each cell the median RTT as a multiple of the ping RTT, the steps
  (1.5 round trips or more) shaded.
- :func:`readable_figures` sets matplotlib's inline resolution, which the inline backend leaves at 72 dpi (a
  7-inch figure 504 pixels wide, its labels too small to read).

Only pandas and the standard library here; nothing is imported until a function runs.
"""

from __future__ import annotations

import html
from typing import Any

#: The roles of hosts in an experiment's config, in the order they are shown.
HOST_ROLES = ("client", "server", "load_host", "front", "back", "nats_host")
#: Inline resolution: a 7-inch figure is 770 pixels wide, the width of a JupyterLab notebook column.
INLINE_DPI = 110
#: A round-trip multiple from which a step table cell is shaded: half a round trip above one.
STEP_MULTIPLE = 1.5


def host_roles(config: dict[str, Any]) -> list[tuple[str, str]]:
    """(role, host) for each host role the config names, e.g. [("client", "a"), ("server", "b")]."""
    return [(role.replace("_host", ""), str(config[role])) for role in HOST_ROLES if config.get(role)]


def run_facts(run) -> dict[str, Any]:
    """What :func:`run_html` shows: experiment, status, hosts, cells complete and skipped, rows, times, resumes."""
    manifest, counts = run.manifest, run.row_counts()
    config = manifest.get("config") or {}
    roles = host_roles(config)
    hosts = ", ".join(f"{role} {name}" for role, name in roles) or ", ".join(manifest.get("hosts") or {}) or "none (imported)"
    return {
        "experiment": manifest.get("experiment"),
        "status": manifest.get("status"),
        "hosts": hosts,
        "cells": counts["cells_complete"],
        "cells_skipped": counts["cells_skipped"],
        "rows": counts.get("parquet_rows", counts["journal_rows"]),
        "started_utc": manifest.get("started_utc"),
        "ended_utc": manifest.get("ended_utc"),
        "resumed": len(manifest.get("resumed_utc") or []),
    }


def run_html(run) -> str:
    """A short HTML summary of a run (its ``_repr_html_``)."""
    e, facts = html.escape, run_facts(run)
    colour = {"complete": "#1a7f37", "interrupted": "#9a6700", "failed": "#cf222e"}.get(str(facts["status"]), "#57606a")
    cells = f"{facts['cells']} complete" + (f", {facts['cells_skipped']} skipped" if facts["cells_skipped"] else "")
    resumed = f" (resumed {facts['resumed']}×)" if facts["resumed"] else ""
    rows = [("experiment", f"<code>{e(str(facts['experiment']))}</code>"), ("hosts", e(facts["hosts"])),
            ("cells", e(cells)), ("rows", f"{facts['rows']}"),
            ("status", f'<b style="color:{colour}">{e(str(facts["status"]))}</b>{e(resumed)}'),
            ("time (UTC)", e(f"{facts['started_utc']} – {facts['ended_utc'] or '…'}")),
            ("directory", f"<code>{e(str(run.path))}</code>")]
    body = "".join(f'<tr><th style="text-align:left">{k}</th><td style="text-align:left">{v}</td></tr>' for k, v in rows)
    return f"<div><b>labkit run {e(run.run_id)}</b><table>{body}</table></div>"


def step_table(summary):
    """The idle-step summary (:func:`labkit.analysis.tables.summarize_sweep`) as ``labkit sweep`` prints it: a row per
    pair and condition, a column per size, the median RTT as a multiple of the pair's ping RTT (ms where no ping)."""
    import pandas as pd

    from labkit.analysis.tables import SWEEP_CONDITION, condition_label

    value = "rtt_multiple" if "rtt_multiple" in summary and summary["rtt_multiple"].notna().any() else "median_ms"
    rows = []
    for key, group in summary.groupby(SWEEP_CONDITION, dropna=False, sort=False):
        src, dst, *knobs = key
        row = {"pair": f"{src}→{dst}", "condition": condition_label(*knobs)}
        row.update({int(r.payload_bytes): getattr(r, value) for r in group.itertuples()})
        rows.append(row)
    table = pd.DataFrame(rows).set_index(["pair", "condition"])
    table.columns.name = "request bytes"
    return table[sorted(table.columns)], value


def styled_summary(run, summary):
    """``run.summary(styled=True)``: the summary as a Styler with a caption giving what the numbers are and their n."""
    if run.manifest.get("experiment") == "idle-step":
        return _styled_steps(summary)
    table = summary.dropna(axis="columns", how="all")
    numbers = table.select_dtypes("number").columns
    floats = [c for c in numbers if table[c].dtype.kind == "f"]
    caption = f"{run.manifest.get('experiment')} run {run.run_id}: {len(table)} rows"
    return table.style.format("{:,.3g}", subset=floats, na_rep="–").set_caption(caption)


def _styled_steps(summary):
    table, value = step_table(summary)
    counts = summary["count"]
    n = f"n = {counts.min()}" if counts.min() == counts.max() else f"n = {counts.min()}–{counts.max()}"
    if value == "rtt_multiple":
        caption = (f"median RTT of warm calls ÷ ping RTT ({n} calls per cell); shaded: {STEP_MULTIPLE}× or more, "
                   "another round trip")
        styler = table.style.format("{:.2f}×", na_rep="–").map(
            lambda v: "background-color:#ffd8b5;font-weight:bold" if v == v and v >= STEP_MULTIPLE else "")
    else:
        caption = f"median RTT of warm calls in ms ({n} calls per cell; the run has no ping baseline)"
        styler = table.style.format("{:.1f} ms", na_rep="–")
    return styler.set_caption(caption).set_table_styles([{"selector": "caption", "props": "text-align: left"}])


def readable_figures(dpi: int = INLINE_DPI) -> None:
    """Show inline figures at ``dpi`` (PNG files written by :func:`labkit.plots.export` keep their 300 dpi)."""
    import matplotlib as mpl

    mpl.rcParams["figure.dpi"] = dpi


def comparison_html(comparison) -> str:
    """How a notebook shows :func:`labkit.compare`'s result: the two sides, what changed between them, the caveats,
    and the table of differences (called ones in bold), each with its n."""
    e = html.escape
    a, b = comparison.side_names()
    parts = [f"<div><b>labkit compare</b>: B <code>{e(b)}</code> against A <code>{e(a)}</code>"]
    changes = comparison.changes
    if changes.empty:
        parts.append("<p>Nothing recorded differs between the two sides' runs.</p>")
    else:
        parts.append("<p>What changed:</p>" + changes.to_html(index=False, escape=True, border=0))
    parts += [f'<p style="color:#9a6700">{e(line)}</p>' for line in comparison.caveats()]
    compared = comparison.compared
    if compared is not None:
        from labkit.analysis.before_after import verdict_counts

        table = compared.table[["cell", "measure", "a", "b", "n_a", "n_b", "text"]].rename(
            columns={"a": "A", "b": "B", "text": "B − A [95% interval], verdict"})
        bold = compared.table["verdict"].isin(["higher", "lower"]).to_numpy()
        styled = table.style.format(precision=3).apply(
            lambda row: ["font-weight:bold" if bold[row.name] else ""] * len(row), axis=1).hide(axis="index")
        parts.append(f"<p>{e(verdict_counts(compared.table))}; units: {compared.level}.</p>" + styled.to_html())
        for side, cells in (("A", compared.only_a), ("B", compared.only_b)):
            if cells:
                parts.append(f"<p>Only in {side} ({len(cells)}): " + "; ".join(f"<code>{e(c)}</code>" for c in cells)
                             + "</p>")
    return "".join(parts) + "</div>"
