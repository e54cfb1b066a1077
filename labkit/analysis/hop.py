"""The hop experiment's rules: the published table's layout, the cost of a hop with intervals over repeats, CDFs, CPU.

A ``labkit hop`` run has one row per cell: a transport (``via``) and a repeat.
**The repeats are the independent units**: requests within one cell share a
warm process, a connection and a moment of the machine, so every interval
here is over repeats (whole cells), never requests: with fewer than ten
repeats a side, Welch's or Student's t on their means, as
:func:`labkit.analysis.inference.method_for` says (a bootstrap over five
repeats is about their range). These functions are what the hop notebook
shows and ``labkit hop`` prints, tested in ``tests/test_analysis_hop.py``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from labkit.parsers.ghz import parse_ghz_json
from labkit.parsers.goload import parse_goload_csv
from labkit.parsers.vegeta import parse_vegeta_csv
from labkit.parsers.wrk import SCRIPT_PERCENTILES, parse_wrk

#: The published runs (ljupcho.github.io, "The cost of a grpc call", 2025; research brief, experiment 4): wrk,
#: 2 threads, 10 connections, 10 s, on one laptop. avg and max latency in ms, req/s as wrk printed them; total
#: requests, MiB read (wrk's "MB" is binary) and the seconds they took where the post's text shows them
#: (its HTTP/2 and gRPC runs); NaN where it does not.
PUBLISHED = pd.DataFrame({
    "via": ["direct", "grpc", "http2", "nats"],
    "method": ["direct HTTP", "gRPC", "HTTP/2", "NATS"],
    "avg_ms": [0.99, 1.34, 2.73, 6.14],
    "max_ms": [9.49, 36.12, 55.29, 29.30],
    "rps": [10073, 7562, 4436, 1634],  # as the brief rounds them (wrk printed 4436.43 for HTTP/2)
    "requests": [np.nan, 76397, 44421, np.nan],
    "seconds": [np.nan, 10.10, 10.01, np.nan],
    "mib_read": [np.nan, 26.67, 15.50, np.nan],
    "transfer_mib_per_s": [np.nan, np.nan, 1.55, np.nan],
}).set_index("via")

#: The transports in the published order, fastest first (by avg latency and by req/s alike).
PUBLISHED_ORDER = ["direct", "grpc", "http2", "nats"]
ROLES = ("front", "back", "nats")
#: The closed-loop tools, by how directly their latencies are each request's own: labkit-go, vegeta and ghz time
#: and keep every request (labkit-go keeps its connections busy; vegeta's closed loop leaves fewer requests in flight
#: than it has workers); wrk corrects its histogram for coordinated omission (synthetic samples), so its latencies
#: are the published view, and a cost is measured on the first of these a run has.
MEASURING_TOOLS = ("labkit-go", "vegeta", "ghz", "wrk")
#: Little's law for a closed loop of N requests in flight: req/s × mean latency = N, to within this band. Below it,
#: the tool's own time between an answer and its next request left fewer than N in flight on average (vegeta's ten
#: workers: 0.72-0.93 in the sample, 0.75 against labkit-go back on loopback alone, with or without keeping bodies);
#: above it, the latencies hold more than the requests' own time (wrk's synthetic samples): nothing else adds to it.
LITTLE_BAND = (0.95, 1.05)


def bytes_per_response(published: pd.DataFrame = PUBLISHED) -> pd.Series:
    """Bytes wrk read per request in the published runs that show both counts (MiB read × 2^20 / requests)."""
    shown = published.dropna(subset=["requests", "mib_read"])
    return shown["mib_read"] * 2**20 / shown["requests"]


def label(via: str, rate=None, tool: str | None = None) -> str:
    """A series' name: the transport, the open-loop rate when there is one, and the closed-loop tool when a run has
    several."""
    if rate is not None and not pd.isna(rate):
        return f"{via} @{int(rate)}/s"
    return f"{via} ({tool})" if tool else via


def closed_tools(samples: pd.DataFrame) -> list[str]:
    """The closed-loop tools of a run's cells, in :data:`MEASURING_TOOLS` order."""
    present = set(samples.loc[samples["rate"].isna(), "tool"])
    return [tool for tool in MEASURING_TOOLS if tool in present]


def measuring_tool(samples: pd.DataFrame) -> str | None:
    """The closed-loop tool a run's costs are measured on: the first of :data:`MEASURING_TOOLS` it has."""
    tools = closed_tools(samples)
    return tools[0] if tools else None


def published_tool(samples: pd.DataFrame) -> str | None:
    """The closed-loop tool whose cells stand beside the published runs: wrk, the post's tool, where the run has it
    (its whole-response byte counts and corrected latencies are what the post printed), else :func:`measuring_tool`."""
    return "wrk" if "wrk" in closed_tools(samples) else measuring_tool(samples)


def closed_cells(samples: pd.DataFrame, tool: str | None = None) -> pd.DataFrame:
    """A run's closed-loop cells of ``tool`` (default :func:`measuring_tool`)."""
    tool = tool or measuring_tool(samples)
    return samples[samples["rate"].isna() & (samples["tool"] == tool)]


def with_series(samples: pd.DataFrame) -> pd.DataFrame:
    """The rows with a ``series`` label (transport, rate for open-loop cells, tool when the closed loop had several)
    and CPU µs per ok request by role."""
    several = len(closed_tools(samples)) > 1
    frame = samples.assign(series=[label(v, r, t if several else None)
                                   for v, r, t in zip(samples["via"], samples["rate"], samples["tool"])])
    for role in ROLES:
        frame[f"{role}_cpu_us_per_request"] = frame[f"{role}_cpu_s"] / frame["ok"].where(frame["ok"] > 0) * 1e6
    return frame


def series_order(frame: pd.DataFrame) -> list[str]:
    """Series in the published order of their transport (then any other, e.g. http2-tls), rates ascending."""
    rank = {via: i for i, via in enumerate([*PUBLISHED_ORDER, "http2-tls"])}
    tools = {tool: i for i, tool in enumerate(MEASURING_TOOLS)}
    keys = frame.drop_duplicates("series").assign(
        _rank=lambda f: f["via"].map(rank), _rate=lambda f: f["rate"].fillna(-1), _tool=lambda f: f["tool"].map(tools))
    return keys.sort_values(["_rank", "_rate", "_tool"])["series"].tolist()


def littles_law(samples: pd.DataFrame) -> pd.DataFrame:
    """Each closed-loop cell's Little's-law ratio: req/s × mean latency ÷ requests in flight (``connections``), 1 for
    latencies that are the requests' own, above 1 where synthetic samples were added (wrk's correction for
    coordinated omission); ``outside`` flags a cell beyond :data:`LITTLE_BAND`. Cells in run order."""
    closed = with_series(samples[samples["rate"].isna() & (samples["ok"] > 0)])
    ratio = closed["rps"] * closed["latency_mean_ms"] / 1e3 / closed["connections"]
    table = closed.assign(ratio=ratio, outside=(ratio < LITTLE_BAND[0]) | (ratio > LITTLE_BAND[1]))
    return table[["order", "series", "via", "tool", "repeat", "rps", "latency_mean_ms", "connections", "ratio",
                  "outside"]].sort_values("order").reset_index(drop=True)


def littles_law_by_tool(law: pd.DataFrame) -> pd.DataFrame:
    """Per tool, over its cells of :func:`littles_law`: the cells, the least and greatest ratio, and the cells
    outside :data:`LITTLE_BAND`."""
    grouped = law.groupby("tool", sort=False)["ratio"]
    table = pd.DataFrame({"cells": grouped.size(), "lowest": grouped.min(), "highest": grouped.max(),
                          "outside": law.groupby("tool", sort=False)["outside"].sum()})
    return table.reindex([tool for tool in MEASURING_TOOLS if tool in table.index])


def littles_law_lines(law: pd.DataFrame) -> list[str]:
    """One sentence per closed-loop tool of :func:`littles_law`: its cells, their ratios' range, and which cells lie
    outside :data:`LITTLE_BAND` (by series, with how many)."""
    lines = []
    for tool, row in littles_law_by_tool(law).iterrows():
        cells = law[law["tool"] == tool]
        outside = cells[cells["outside"]]
        where = ", ".join(f"{series} {count}" for series, count in outside["series"].value_counts(sort=False).items())
        line = (f"Little's law on {tool}'s closed loop: {int(row['cells'])} cells, req/s × mean latency ÷ requests "
                f"in flight {row['lowest']:.3f} to {row['highest']:.3f}; "
                + (f"{int(row['outside'])} outside {LITTLE_BAND[0]}–{LITTLE_BAND[1]} ({where})"
                   if len(outside) else f"all within {LITTLE_BAND[0]}–{LITTLE_BAND[1]}"))
        below, above = outside[outside["ratio"] < LITTLE_BAND[0]], outside[outside["ratio"] > LITTLE_BAND[1]]
        if len(below):
            in_flight = below["ratio"] * below["connections"]
            line += (f"; below it, {in_flight.min():.1f} to {in_flight.max():.1f} of {int(below['connections'].max())} "
                     "requests were in flight on average: the tool's own time between an answer and its next request")
        if len(above):
            line += "; above it, the latencies hold more than the requests' own time (synthetic samples)"
        lines.append(line + ".")
    return lines


def load_cpu_share(samples: pd.DataFrame, cpus: int | None) -> pd.DataFrame:
    """Per series: the load tool's CPU seconds per second of load (mean over repeats) and, with ``cpus`` (the load
    host's cores), the share of them it took, the rest being what the services and the link had."""
    frame = with_series(samples)
    load_cpu_s = frame["load_cpu_s"] if "load_cpu_s" in frame else pd.Series(np.nan, frame.index)  # runs before it
    per_second = load_cpu_s / frame["tool_duration_s"]
    grouped = frame.assign(_per_second=per_second).groupby("series", sort=False)["_per_second"]
    table = pd.DataFrame({"load_cpu_per_s": grouped.mean(), "repeats": grouped.count()})
    table["share_of_cpus"] = table["load_cpu_per_s"] / cpus if cpus else np.nan
    return table.reindex(series_order(frame))


def summarize_hop(samples: pd.DataFrame) -> pd.DataFrame:
    """Per series, over its repeats: n, req/s, mean/p99/max latency, errors, and each process's CPU µs per request."""
    frame = with_series(samples)
    grouped = frame.groupby("series", sort=False)
    table = pd.DataFrame({
        "via": grouped["via"].first(), "rate": grouped["rate"].first(), "tool": grouped["tool"].first(),
        "repeats": grouped.size(), "rps": grouped["rps"].mean(), "latency_mean_ms": grouped["latency_mean_ms"].mean(),
        "latency_p99_ms": grouped["latency_p99_ms"].mean(), "latency_max_ms": grouped["latency_max_ms"].max(),
        "requests": grouped["requests"].sum(), "errors": grouped["errors"].sum(),
        **{f"{role}_cpu_us": grouped[f"{role}_cpu_us_per_request"].mean() for role in ROLES},
        "error": grouped["error"].agg(lambda e: "; ".join(dict.fromkeys(x for x in e if isinstance(x, str))) or None),
    })
    return table.loc[series_order(frame)].reset_index()


def bytes_per_request(samples: pd.DataFrame) -> tuple[float, int, str | None]:
    """The median bytes read per request over the cells of :func:`published_tool` (wrk counts whole HTTP/1.1
    responses, as the published runs' counts are; vegeta bodies only); how many cells, and the tool."""
    tool = published_tool(samples)
    cells = closed_cells(samples, tool)
    cells = cells[cells["requests"] > 0]
    return float((cells["bytes_read"] / cells["requests"]).median()), len(cells), tool


def published_layout(samples: pd.DataFrame) -> pd.DataFrame:
    """labkit's closed-loop rows in the published table's layout, one line per transport, beside the published one.

    labkit's avg is the mean over repeats of each repeat's mean latency, max the
    largest of any repeat, req/s and total requests the mean per repeat,
    transfer/s in MiB/s as wrk prints it. The published columns come first.
    """
    closed = closed_cells(samples, published_tool(samples))
    grouped = closed.groupby("via")
    ours = pd.DataFrame({
        "labkit avg_ms": grouped["latency_mean_ms"].mean(), "labkit max_ms": grouped["latency_max_ms"].max(),
        "labkit rps": grouped["rps"].mean(), "labkit requests": grouped["requests"].mean(),
        "labkit transfer_mib_per_s": grouped["transfer_bytes_per_s"].mean() / 2**20, "labkit repeats": grouped.size(),
    })
    published = PUBLISHED[["method", "avg_ms", "max_ms", "rps", "requests", "transfer_mib_per_s"]]
    table = published.add_prefix("published ").rename(columns={"published method": "method"}).join(ours, how="outer")
    table["method"] = table["method"].fillna(pd.Series(table.index, index=table.index))
    order = [v for v in [*PUBLISHED_ORDER, "http2-tls"] if v in table.index]
    return table.loc[order]


def hop_cost(samples: pd.DataFrame, column: str = "latency_mean_ms", *, baseline: str = "direct",
             n_resamples: int = 2000, confidence: float = 0.95, seed: int = 0, tool: str | None = None) -> pd.DataFrame:
    """The cost of the hop per transport: mean over repeats of ``column`` via it, minus the same for ``baseline``
    (``direct``: the back without the front).

    The interval and p-value are over repeats (cells), each side on its own,
    by :func:`labkit.analysis.inference.two_sample_difference` of the means:
    Welch's t below ten repeats a side, else a percentile bootstrap of the
    repeats; none with fewer than two repeats a side (``se`` and ``df`` are
    its test's standard error and degrees of freedom). ``verdict`` is
    "higher" or "lower" where the cost survives Holm's correction over the
    table's transports, else "unclear" (with ``mde``, the smallest cost the
    table could have called) or "not testable". Closed-loop cells only (the
    published setting), of ``tool`` (default :func:`measuring_tool`: each
    request's own latency where the run has it, not wrk's corrected view).
    """
    rows, results = _cost_rows(closed_cells(samples, tool), column, baseline, n_resamples, confidence, seed)
    return _cost_table(rows, results).set_index("via")


def light_load_cost(samples: pd.DataFrame, column: str = "latency_mean_ms", *, baseline: str = "direct",
                    n_resamples: int = 2000, confidence: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """The hop's cost at each open-loop rate (vegeta sending at a fixed rate whatever the answers do): as
    :func:`hop_cost`, one row per rate and transport, the rows of every rate one family for Holm's correction. Rates
    well below the closed loops' req/s give the cost of the hop itself, without the queue a saturating closed loop
    builds; the closed loop gives the capacity. Empty for a run without open-loop cells."""
    open_loop = samples[samples["rate"].notna()]
    rows, results = [], []
    for rate in sorted(set(open_loop["rate"])):
        found, tested = _cost_rows(open_loop[open_loop["rate"] == rate], column, baseline, n_resamples, confidence, seed)
        rows += [{"rate": int(rate), **row} for row in found]
        results += tested
    return _cost_table(rows, results, first=["rate"]).set_index(["rate", "via"])


_COST_COLUMNS = ["via", "cost", "lo", "hi", "p", "method", "se", "df", "n_via", "n_direct", "via_mean", "direct_mean"]


def _cost_rows(cells: pd.DataFrame, column: str, baseline: str, n_resamples: int, confidence: float,
               seed: int) -> tuple[list[dict], list]:
    """Each transport's row of a cost table over ``cells`` (one load), and its test."""
    from labkit.analysis.inference import two_sample_difference

    cells = cells[cells[column].notna()]
    direct = cells.loc[cells["via"] == baseline, column].to_numpy(dtype=float)
    rows, results = [], []
    for via in [v for v in [*PUBLISHED_ORDER, "http2-tls"] if v != baseline and v in set(cells["via"])]:
        values = cells.loc[cells["via"] == via, column].to_numpy(dtype=float)
        result = two_sample_difference(direct, values, np.mean, confidence=confidence, seed=seed,
                                       n_resamples=n_resamples)
        results.append(result)
        rows.append({"via": via, "cost": values.mean() - direct.mean() if direct.size else np.nan, "lo": result.low,
                     "hi": result.high, "p": result.pvalue, "method": result.method, "se": result.se, "df": result.df,
                     "n_via": values.size, "n_direct": direct.size, "via_mean": values.mean(),
                     "direct_mean": direct.mean() if direct.size else np.nan})
    return rows, results


def _cost_table(rows: list[dict], results: list, first: list[str] = ()) -> pd.DataFrame:
    """The cost rows with Holm's verdicts over all of them (one family)."""
    from labkit.analysis.inference import call_table

    columns = [*first, *_COST_COLUMNS]
    table = pd.DataFrame(rows, columns=columns)
    return (call_table(table, results) if results else table).reindex(columns=[*columns, "p_holm", "verdict", "mde"])


def cost_repeats(cost: pd.DataFrame) -> pd.Series:
    """The repeats each hop cost of :func:`hop_cost` rests on: the fewer of its transport's and direct's (a
    difference is no better known than its thinner side)."""
    return cost[["n_via", "n_direct"]].min(axis=1).astype(int).rename("repeats")


def repeats_needed(cost: pd.DataFrame, halfwidth: float) -> pd.DataFrame:
    """How much data the hop costs of :func:`hop_cost` have and need, one row per transport: ``repeats`` (the fewer of
    its and direct's), ``cost ± now`` (the half-width of its interval) and ``repeats for ±<halfwidth>``, the current
    count scaled by the squared ratio of the two half-widths (an interval of means narrows as 1/√n)."""
    from labkit.analysis.inference import _samples_for_halfwidth

    have = cost_repeats(cost)
    now = (cost["hi"] - cost["lo"]) / 2
    needed = [_samples_for_halfwidth(int(n), float(h), halfwidth) for n, h in zip(have, now)]
    return pd.DataFrame({"repeats": have, "cost ± now": now, f"repeats for ±{halfwidth:g}": needed}, index=cost.index)


def cpu_per_request(samples: pd.DataFrame, *, n_resamples: int = 2000, confidence: float = 0.95,
                    seed: int = 0) -> pd.DataFrame:
    """Per series and process (front, back, nats): CPU µs per successful request, mean over repeats with an interval
    (:func:`labkit.analysis.inference.location_interval`: Student's t below ten repeats)."""
    from labkit.analysis.inference import location_interval

    frame = with_series(samples)
    rows = []
    for series in series_order(frame):
        cells = frame[frame["series"] == series]
        for role in ROLES:
            values = cells[f"{role}_cpu_us_per_request"].dropna().to_numpy(dtype=float)
            if not values.size:
                continue
            found = location_interval(values, np.mean, confidence=confidence, seed=seed, n_resamples=n_resamples)
            rows.append({"series": series, "process": role, "cpu_us": values.mean(), "lo": found.low,
                         "hi": found.high, "n": values.size})
    return pd.DataFrame(rows, columns=["series", "process", "cpu_us", "lo", "hi", "n"])


def cdf_from_requests(latency_ms, percents=None) -> pd.DataFrame:
    """The latency CDF of per-request latencies (labkit-go's, vegeta's, ghz's) at the percentiles wrk's script prints.

    Nearest rank, as wrk's own percentile() over its histogram: the smallest
    latency with at least p % of the requests at or below it.
    """
    values = np.sort(np.asarray(latency_ms, dtype=float))
    percents = np.asarray(SCRIPT_PERCENTILES if percents is None else percents, dtype=float)
    if not values.size:
        return pd.DataFrame({"percent": percents, "latency_ms": np.nan})
    ranks = np.maximum(1, np.ceil(percents / 100 * values.size).astype(int))
    return pd.DataFrame({"percent": percents, "latency_ms": values[ranks - 1]})


def cell_cdf(tool: str, text: str) -> pd.DataFrame:
    """One cell's latency CDF from its raw output: wrk's script percentiles, or labkit-go's/vegeta's/ghz's ok
    requests."""
    if tool == "wrk":
        return parse_wrk(text).rows
    if tool == "labkit-go":
        rows = parse_goload_csv(text).rows
    elif tool == "vegeta":
        rows = parse_vegeta_csv(text).rows
    else:
        rows = parse_ghz_json(text).rows
    return cdf_from_requests(rows.loc[rows["ok"], "latency_ms"])


def transport_cdf(cdfs: pd.DataFrame) -> pd.DataFrame:
    """Per series, the CDF averaged over its repeats quantile by quantile (each repeat weighs the same), with the
    lowest and highest repeat at each percentile; ``cdfs`` has ``series``, ``repeat``, ``percent``, ``latency_ms``."""
    grouped = cdfs.groupby(["series", "percent"])["latency_ms"]
    return pd.DataFrame({"latency_ms": grouped.mean(), "lowest": grouped.min(), "highest": grouped.max(),
                         "repeats": grouped.count()}).reset_index()


ORDERING_COLUMNS = ["earlier", "later", "difference_ms", "lo", "hi", "p", "method", "n_earlier", "n_later", "p_holm",
                    "verdict", "finding", "mde_ms"]


def ordering_findings(samples: pd.DataFrame, *, n_resamples: int = 2000, confidence: float = 0.95,
                      seed: int = 0, tool: str | None = None) -> pd.DataFrame:
    """For each neighbouring pair of the published order (direct < gRPC < HTTP/2 < NATS in latency): what this run says.

    ``difference`` is the later transport's mean latency minus the earlier's
    (mean over repeats), with its interval over repeats (:func:`hop_cost`:
    Welch's t below ten repeats a side). The pairs are one family, corrected
    with Holm's method: ``finding`` is "same order" where the difference is
    called above 0, "reversed" where called below, "unclear" where not called
    (``mde_ms``: the smallest difference the family could have called at 80 %
    power), "not testable" where a side has fewer than 2 repeats. Closed-loop
    cells of ``tool`` (default :func:`measuring_tool`), as :func:`hop_cost`.
    """
    from labkit.analysis.inference import Difference, call_table

    closed = closed_cells(samples, tool)
    present = [v for v in PUBLISHED_ORDER if v in set(closed["via"])]
    rows, results = [], []
    for earlier, later in zip(present, present[1:]):
        pair = closed[closed["via"].isin([earlier, later])]
        cost = hop_cost(pair, baseline=earlier, n_resamples=n_resamples, confidence=confidence, seed=seed).loc[later]
        results.append(Difference(cost["cost"], cost["lo"], cost["hi"], cost["p"], int(cost["n_direct"]),
                                  int(cost["n_via"]), cost["method"], "mean", cost["se"], cost["df"]))
        rows.append({"earlier": earlier, "later": later, "difference_ms": cost["cost"], "lo": cost["lo"],
                     "hi": cost["hi"], "p": cost["p"], "method": cost["method"], "n_earlier": int(cost["n_direct"]),
                     "n_later": int(cost["n_via"])})
    columns = ORDERING_COLUMNS
    table = pd.DataFrame(rows, columns=columns[:-4])
    if results:
        finding = {"higher": "same order", "lower": "reversed", "unclear": "unclear", "not testable": "not testable"}
        table = call_table(table, results).rename(columns={"mde": "mde_ms"})
        table["finding"] = table["verdict"].map(finding)
    return table.reindex(columns=columns)


#: A transport as a sentence names it (the post's names).
NAMES = {"direct": "direct", "grpc": "gRPC", "http2": "HTTP/2", "http2-tls": "HTTP/2 over TLS", "nats": "NATS"}


def costs_by_tool(samples: pd.DataFrame, column: str = "latency_mean_ms", *, n_resamples: int = 2000,
                  confidence: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """:func:`hop_cost` on each closed-loop tool's cells apart (index ``tool``, ``via``; tools in
    :data:`MEASURING_TOOLS` order). Each tool's transports are one family for Holm's correction and no family spans
    the tools: their latencies are not one measurement (wrk's hold synthetic samples, vegeta's closed loop keeps
    fewer requests in flight), so each tool says its own, and a finding says whether they agree."""
    tables = {tool: hop_cost(samples, column, n_resamples=n_resamples, confidence=confidence, seed=seed, tool=tool)
              for tool in closed_tools(samples)}
    if not tables:
        return pd.DataFrame(columns=[*_COST_COLUMNS[1:], "p_holm", "verdict", "mde"],
                            index=pd.MultiIndex.from_tuples([], names=["tool", "via"]))
    return pd.concat(tables, names=["tool"])


def ordering_by_tool(samples: pd.DataFrame, *, n_resamples: int = 2000, confidence: float = 0.95,
                     seed: int = 0) -> pd.DataFrame:
    """:func:`ordering_findings` on each closed-loop tool's cells apart, with a ``tool`` column first: each tool's
    pairs are one family for Holm's correction, none spans the tools."""
    tables = [ordering_findings(samples, n_resamples=n_resamples, confidence=confidence, seed=seed, tool=tool)
              .assign(tool=tool) for tool in closed_tools(samples)]
    columns = ["tool", *ORDERING_COLUMNS]
    return pd.concat(tables, ignore_index=True)[columns] if tables else pd.DataFrame(columns=columns)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _over(by_tool: pd.DataFrame, noun: str) -> str:
    """What one tool's Holm family is over: "the 3 pairs" for a run of one tool, "each tool's 3 pairs" for more."""
    tools = by_tool.index.get_level_values("tool") if "tool" in by_tool.index.names else by_tool["tool"]
    sizes = pd.Series(list(tools)).value_counts(sort=False)
    counted = _count(int(sizes.iat[0]), noun) if sizes.nunique() == 1 else f"{noun}s"
    return f"the {counted}" if len(sizes) == 1 else f"each tool's {counted}"


def _p(p: float) -> str:
    return f"{p:.3f}" if p >= 0.001 else f"{p:.0e}"


def _detail(name: str, row, *, difference: str, mde: str, unit: str, digits: int, confidence: float,
            with_n: bool, n: tuple[str, str]) -> str:
    """One comparison as a sentence gives it: its difference, the interval it was tested with and its Holm-adjusted
    p-value (the verdict's), the repeats where the sentence does not say them once, and for an unclear one the
    smallest difference its family could have called."""
    counts = f"n = {int(row[n[0]])} and {int(row[n[1]])} repeats"
    parts = [f"{name} {row[difference]:+.{digits}f} {unit}".strip()]
    if not np.isfinite(row["lo"]):
        return ", ".join([*parts, f"no interval ({counts})" if with_n else "no interval"])
    parts += [f"{confidence * 100:g} % interval [{row['lo']:+.{digits}f}, {row['hi']:+.{digits}f}]",
              f"Holm-adjusted p {_p(row['p_holm'])}"]
    if with_n:
        parts.append(counts)
    if row["verdict"] == "unclear" and np.isfinite(row[mde]):
        parts.append(f"only {abs(row[mde]):.{digits}f} {unit} or more could have been called")
    return ", ".join(parts)


def _family(rows: pd.DataFrame, n: tuple[str, str], what: str) -> tuple[str, bool]:
    """The clause naming the family and the method, and the repeats once when every row has the same (else each
    detail gives its own: the returned flag)."""
    methods = ", ".join(dict.fromkeys(str(m) for m in rows["method"].dropna() if m != "none"))
    counts = set(rows[n[0]].astype(int)) | set(rows[n[1]].astype(int))
    once = len(counts) == 1
    repeats = f"{_count(counts.pop(), 'repeat')} a side" if once else ""
    if (rows["verdict"] == "not testable").all():  # nothing was tested, nor corrected
        return repeats or "no test", not once
    return f"Holm's correction over {what}; {', '.join(filter(None, [methods, repeats]))}", not once


def _grouped(rows: pd.DataFrame, labels: list[str], *, topic: str, who: str, phrases: dict[str, str], of: str,
             family: str, detail) -> str:
    """What comparisons made apart (one per load tool, or per transport) say together: where they reach one verdict,
    that they agree ("on every load tool, 3 of 3"), else that they disagree, and which reached which."""
    verdicts = list(rows["verdict"])
    groups: dict[str, list[int]] = {}
    for i, verdict in enumerate(verdicts):
        groups.setdefault(verdict, []).append(i)
    if len(verdicts) == 1:
        return f"{who} {phrases[verdicts[0]]} on {labels[0]}, this run's only {of}: {detail('', rows.iloc[0])} ({family})."
    details = [detail(label, row) for label, (_, row) in zip(labels, rows.iterrows())]
    if len(groups) == 1:
        return f"{who} {phrases[verdicts[0]]} on every {of}, {len(verdicts)} of {len(verdicts)}: {'; '.join(details)} ({family})."
    parts = [f"{who} {phrases[verdict]} on {len(members)} of {len(verdicts)}: " + "; ".join(details[i] for i in members)
             for verdict, members in groups.items()]
    return f"The {of}s disagree on {topic}. {'. '.join(parts)} ({family})."


def cost_findings(by_tool: pd.DataFrame, column: str = "latency_mean_ms", *, confidence: float = 0.95) -> list[str]:
    """One sentence per transport of :func:`costs_by_tool`: whether the hop costs ``column`` (mean latency, or req/s)
    against going direct on every closed-loop tool, or which tools call what; each tool's figure with the interval it
    was tested with and its Holm-adjusted p-value (the correction over that tool's transports)."""
    if by_tool.empty:
        return []
    latency = column != "rps"
    unit, digits = ("ms", 2) if latency else ("req/s", 0)
    measure = "latency" if latency else "req/s"
    lines = []
    for via in [v for v in [*PUBLISHED_ORDER, "http2-tls"] if v in set(by_tool.index.get_level_values("via"))]:
        rows = by_tool.xs(via, level="via")
        family, with_n = _family(rows, ("n_via", "n_direct"), _over(by_tool, "transport"))
        if len(rows) > 1:
            family = family.replace(";", ", no family spanning the tools;", 1)
        phrases = {"higher": "costs latency against going direct, as published," if latency
                   else "adds req/s against going direct, the reverse of the published runs,",
                   "lower": "saves latency against going direct, the reverse of the published runs," if latency
                   else "costs req/s against going direct, as published,",
                   "unclear": "is not told apart from going direct",
                   "not testable": "cannot be tested against going direct (fewer than two repeats on a side)"}
        lines.append(_grouped(
            rows, list(rows.index), topic=f"the hop via {NAMES.get(via, via)} in {measure}",
            who=f"The hop via {NAMES.get(via, via)}", phrases=phrases, of="load tool", family=family,
            detail=lambda name, row: _detail(name, row, difference="cost", mde="mde", unit=unit, digits=digits,
                                             confidence=confidence, with_n=with_n, n=("n_via", "n_direct"))))
    return lines


def published_cost_findings(by_tool: pd.DataFrame, *, confidence: float = 0.95,
                            published: pd.DataFrame = PUBLISHED) -> list[str]:
    """Whether the published runs' costs (their avg latency via each transport minus direct's) lie within this run's
    interval for the published tool's cells (wrk, where the run has it: the post's tool and view), transport by
    transport; nothing where the run has no closed-loop cells or no transport the post ran."""
    tools = list(dict.fromkeys(by_tool.index.get_level_values("tool")))
    if not tools:
        return []
    tool = "wrk" if "wrk" in tools else tools[0]
    rows = by_tool.xs(tool, level="tool")
    rows = rows[rows.index.isin(published.index) & (rows.index != "direct") & np.isfinite(rows["lo"].astype(float))]
    if rows.empty:
        return []
    costs = published["avg_ms"] - published.at["direct", "avg_ms"]
    inside = [via for via, row in rows.iterrows() if row["lo"] <= costs[via] <= row["hi"]]
    each = "; ".join(f"{NAMES[via]} published {costs[via]:+.2f} ms, this run {row['cost']:+.2f} ms "
                     f"[{row['lo']:+.2f}, {row['hi']:+.2f}]" for via, row in rows.iterrows())
    return [f"The published costs (the post's avg latency via each transport minus direct's, wrk on one laptop) lie "
            f"within this run's {confidence * 100:g} % interval on {tool}'s cells for {len(inside)} of {len(rows)} "
            f"transports: {each}."]


def ordering_lines(by_tool: pd.DataFrame, *, confidence: float = 0.95) -> list[str]:
    """What a run says of the published order (direct < gRPC < HTTP/2 < NATS in mean latency), from
    :func:`ordering_by_tool`: one sentence per neighbouring pair, saying whether the closed-loop tools agree or which
    tool calls what (each tool's pairs one Holm family), then on how many tools the whole order is called."""
    if by_tool.empty:
        return []
    lines = []
    what = _over(by_tool, "pair")
    for (earlier, later), rows in by_tool.groupby(["earlier", "later"], sort=False):
        rows = rows.set_index("tool")
        family, with_n = _family(rows, ("n_later", "n_earlier"), what)
        if len(rows) > 1:
            family = family.replace(";", ", no family spanning the tools;", 1)
        first, then = NAMES.get(earlier, earlier), NAMES.get(later, later)
        phrases = {"higher": f"is called slower than {first}, as published,",
                   "lower": f"is called faster than {first}, the reverse of the published order,",
                   "unclear": f"is not told apart from {first}",
                   "not testable": f"cannot be tested against {first} (fewer than two repeats on a side)"}
        lines.append(_grouped(
            rows, list(rows.index), topic=f"{then} against {first}", who=then, phrases=phrases,
            of="load tool", family=family,
            detail=lambda name, row: _detail(name, row, difference="difference_ms", mde="mde_ms", unit="ms", digits=2,
                                             confidence=confidence, with_n=with_n, n=("n_later", "n_earlier"))))
    complete = {tool: rows for tool, rows in by_tool.groupby("tool", sort=False)
                if list(rows["later"]) == PUBLISHED_ORDER[1:]}
    if complete:
        held = [tool for tool, rows in complete.items() if (rows["finding"] == "same order").all()]
        order = " < ".join(NAMES[via] for via in PUBLISHED_ORDER)
        lines.append(f"The whole published order, {order}, is called pair by pair on {len(held)} of "
                     f"{_count(len(complete), 'load tool')}" + (f" ({', '.join(held)})." if held else "."))
    return lines


def light_load_findings(light: pd.DataFrame, *, confidence: float = 0.95) -> list[str]:
    """One sentence per open-loop rate of :func:`light_load_cost`: whether the hop costs latency via every transport
    at that rate, or which transports show what; each cost with the interval it was tested with and its
    Holm-adjusted p-value (one family over every rate and transport)."""
    if light.empty:
        return []
    family, with_n = _family(light, ("n_via", "n_direct"), f"the {len(light)} costs of every rate and transport")
    phrases = {"higher": "costs latency against going direct", "lower": "saves latency against going direct",
               "unclear": "is not told apart from going direct",
               "not testable": "cannot be tested against going direct (fewer than two repeats on a side)"}
    lines = []
    for rate, rows in light.groupby(level="rate"):
        rows = rows.droplevel("rate")
        lines.append(_grouped(
            rows, [NAMES.get(via, via) for via in rows.index], topic=f"the hop at {rate} req/s (open loop)",
            who=f"At {rate} req/s (open loop), the hop", phrases=phrases, of="transport", family=family,
            detail=lambda name, row: _detail(name, row, difference="cost", mde="mde", unit="ms", digits=2,
                                             confidence=confidence, with_n=with_n, n=("n_via", "n_direct"))))
    return lines


def bytes_lines(samples: pd.DataFrame, published: pd.DataFrame = PUBLISHED) -> list[str]:
    """The bytes read per request beside the published runs' (wrk's whole responses; another tool's counts are said
    to be bodies only), and the requests that failed, of how many."""
    value, n_cells, tool = bytes_per_request(samples)
    requests, errors = int(samples["requests"].sum()), int(samples["errors"].sum())
    lines = []
    if tool is not None and np.isfinite(value):
        shown = bytes_per_response(published)
        theirs = " and ".join(f"{b:.0f} B ({NAMES[via]})" for via, b in shown.items())
        lines.append(f"{tool} read {value:.0f} B per request (median over its {n_cells} cells), the published runs "
                     f"{theirs}" + (": whole HTTP/1.1 responses on both sides." if tool == "wrk" else
                                    f": {tool} counts response bodies only, so the two do not compare."))
    lines.append(f"{errors:,} of the run's {requests:,} requests failed, over its {len(samples)} cells.")
    return lines


def headline(samples: pd.DataFrame, cost: pd.DataFrame, cpu: pd.DataFrame, findings: pd.DataFrame,
             law: pd.DataFrame, *, requests: int, errors: int, bytes_per_request: float,
             light: pd.DataFrame | None = None, ordering: pd.DataFrame | None = None) -> dict:
    """The hop notebook's headline numbers (``hop.json``): counts; per series ``rps.``, ``mean_ms.``, ``p99_ms.``,
    ``max_ms.``; per transport ``cost_ms.`` with ``_lo``/``_hi`` (:func:`hop_cost`); ``cpu_us.<series>.<process>``
    (:func:`cpu_per_request`); ``order.<later>_vs_<earlier>`` with ``.mde_ms`` where unclear
    (:func:`ordering_findings`); ``little.<tool>.lowest``/``.highest``/``.outside`` (:func:`littles_law_by_tool`),
    ``measured_on``, the tool of the costs, ``light_cost_ms.<rate>.<via>`` with ``_lo``/``_hi``
    (:func:`light_load_cost`), and with ``ordering`` (:func:`ordering_by_tool`) each tool's
    ``order.<tool>.<later>_vs_<earlier>``."""
    found: dict = {"cells": int(len(samples)), "requests": requests, "errors": errors,
                   "bytes_per_request": round(bytes_per_request, 1), "measured_on": measuring_tool(samples)}
    for series, row in summarize_hop(samples).set_index("series").iterrows():
        for key, column in (("rps", "rps"), ("mean_ms", "latency_mean_ms"), ("p99_ms", "latency_p99_ms"),
                            ("max_ms", "latency_max_ms")):
            found[f"{key}.{series}"] = round(float(row[column]), 3)
    for via, row in cost.iterrows():
        found.update({f"cost_ms.{via}{suffix}": round(float(row[key]), 4)
                      for key, suffix in (("cost", ""), ("lo", "_lo"), ("hi", "_hi"))})
    for (rate, via), row in (light if light is not None else pd.DataFrame()).iterrows():
        found.update({f"light_cost_ms.{rate}.{via}{suffix}": round(float(row[key]), 4)
                      for key, suffix in (("cost", ""), ("lo", "_lo"), ("hi", "_hi"))})
    for _, row in cpu.iterrows():
        found[f"cpu_us.{row['series']}.{row['process']}"] = round(float(row["cpu_us"]), 2)
    for _, row in findings.iterrows():
        found[f"order.{row['later']}_vs_{row['earlier']}"] = row["finding"]
        if row["finding"] == "unclear":
            found[f"order.{row['later']}_vs_{row['earlier']}.mde_ms"] = round(float(row["mde_ms"]), 4)
    for _, row in (ordering if ordering is not None else pd.DataFrame()).iterrows():
        found[f"order.{row['tool']}.{row['later']}_vs_{row['earlier']}"] = row["finding"]
    for tool, row in littles_law_by_tool(law).iterrows():
        found.update({f"little.{tool}.lowest": round(float(row["lowest"]), 4),
                      f"little.{tool}.highest": round(float(row["highest"]), 4),
                      f"little.{tool}.outside": int(row["outside"])})
    return found
