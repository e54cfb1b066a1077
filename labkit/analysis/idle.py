"""The idle-step experiment's rules: conditions, request framing, the kernel's restart after idle, step fits.

A ``labkit sweep`` run (experiment ``idle-step``) times calls of growing size
on a connection left idle between calls, under conditions that change one
knob at a time. These functions turn its samples into what the idle-step
notebook shows; each is a rule someone could get wrong, so each is tested.

- :func:`label_conditions`: the condition each call ran under, as ``ss``
  saw it (the congestion control in use, the sysctl in force), and a
  readable order of the conditions.
- :func:`request_framing`: the bytes gRPC and HTTP/2 add to a request, from
  the ``bytes_acked`` the client recorded around each call.
- :func:`restart_window` and :func:`predict_round_trips`: Linux's cwnd
  restart after idle (``tcp_cwnd_restart()``) applied to each call's recorded
  TCP state, and the round trips slow start then needs for the request.
- :func:`fit_steps`: the slow-start step model and the change point, per
  condition whose latency steps.
- :func:`compare_to_reference`: every condition against the reference,
  size by size, as one family.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from labkit.analysis.fits import Fit, fit_slow_start, locate_change_point, locate_change_points, slow_start_rounds

#: The knobs of a condition as :func:`label_conditions` names them in its ``knobs`` table.
KNOBS = ["pair", "stack", "cc", "ssai", "gap", "bg", "ka"]


def stack_labels(frame: pd.DataFrame) -> pd.Series:
    """Each row's gRPC stack as ``client→server`` and its options (``python→python`` where the run did not record one)."""
    client = frame["client_impl"].fillna("tool") if "client_impl" in frame else pd.Series("python", index=frame.index)
    server = frame["server_impl"].fillna("python") if "server_impl" in frame else pd.Series("python", index=frame.index)
    options = pd.Series("", index=frame.index)
    if "grpc_options" in frame:
        options = frame["grpc_options"].fillna("").replace("none", "")
    return (client + "→" + server + (" " + options).where(options != "", "")).astype(str)


def _mode(values: pd.Series):
    """The most common non-missing value, or None."""
    values = values.dropna()
    return values.mode().iat[0] if len(values) else None


def label_conditions(samples: pd.DataFrame, host_sysctls: dict[str, dict] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The samples with ``pair``, ``ssai``, ``cc_used`` and ``condition`` columns, and the conditions' knobs in reading order.

    ``ssai`` is the cell's ``slow_start_after_idle``, or the client host's own
    sysctl (``host_sysctls[src]``, the manifest's host facts) where the sweep
    left it as it was, or -1 when unknown. ``cc_used`` is the congestion
    control ``ss`` reported for the cell's sockets (most common value), else
    the one requested. The label names the pair, and the gRPC stack
    (:func:`stack_labels`), only when the run has several. The second frame,
    indexed by condition, holds each condition's knobs (:data:`KNOBS`) and
    first ``cell``, sorted: pair, stack, CUBIC first, sysctl 1 first, longest
    gap first, knobs off first.
    """
    host_sysctls = host_sysctls or {}

    def effective_ssai(row) -> int:
        if pd.notna(row["slow_start_after_idle"]):
            return int(row["slow_start_after_idle"])
        value = host_sysctls.get(row["src"], {}).get("net.ipv4.tcp_slow_start_after_idle")
        return int(value) if value is not None else -1

    samples = samples.assign(pair=samples["src"] + "-" + samples["dst"], ssai=samples.apply(effective_ssai, axis=1),
                             stack=stack_labels(samples))
    in_use = samples.groupby("cell_id")["tcp_cc"].agg(_mode)
    samples["cc_used"] = samples["cell_id"].map(in_use).fillna(samples["cc"]).fillna("?")
    several_pairs, several_stacks = samples["pair"].nunique() > 1, samples["stack"].nunique() > 1

    def label(row) -> str:
        parts = [row["cc_used"], f"ssai={row['ssai']}", f"gap={row['gap_s']:g}s"]
        if pd.notna(row["background_gap_s"]):
            parts.append(f"bg={row['background_gap_s']:g}s")
        if pd.notna(row["keepalive_ms"]):
            parts.append(f"ka={int(row['keepalive_ms'])}ms")
        # The stack is named only when the run has several, so single-stack labels stay as they always were.
        return (f"{row['pair']} " if several_pairs else "") + (f"{row['stack']} " if several_stacks else "") + " ".join(parts)

    samples["condition"] = samples.apply(label, axis=1)
    knobs = samples.groupby("condition").agg(
        pair=("pair", "first"), stack=("stack", "first"), cc=("cc_used", "first"), ssai=("ssai", "first"),
        gap=("gap_s", "first"), bg=("background_gap_s", "first"), ka=("keepalive_ms", "first"), cell=("cell_id", "first"),
    )
    order = knobs.assign(
        _cc=knobs["cc"] != "cubic", _ssai=-knobs["ssai"], _gap=-knobs["gap"], _bg=knobs["bg"].notna(), _ka=knobs["ka"].notna(),
    ).sort_values(["pair", "stack", "_cc", "cc", "_ssai", "_gap", "_bg", "bg", "_ka", "ka"]).index
    return samples, knobs.loc[order]


def knobs_changed(knobs: pd.DataFrame, condition: str, reference: str) -> list[str]:
    """The knobs (:data:`KNOBS`) in which ``condition`` differs from ``reference`` (rows of :func:`label_conditions`' table)."""
    a, b = knobs.loc[condition], knobs.loc[reference]
    return [k for k in KNOBS if not (a[k] == b[k] or (pd.isna(a[k]) and pd.isna(b[k])))]


def recorded_mss(calls: pd.DataFrame) -> int | None:
    """The MSS ``ss`` reported for most calls, or None when no call recorded one."""
    value = _mode(calls["mss"])
    return None if value is None else int(value)


@dataclass
class Framing:
    """The bytes a request puts on the wire beyond its payload: ``overhead_bytes`` is the least over ``calls`` calls.

    Calls with more than the least also carried a control frame (an HTTP/2
    PING or its acknowledgement) in the same window; ``most_common_bytes`` is
    the usual excess.
    """

    overhead_bytes: int
    most_common_bytes: int | None
    calls: int


def request_framing(calls: pd.DataFrame) -> Framing:
    """gRPC and HTTP/2 framing per request, from ``bytes_acked_after − bytes_acked_before − payload_bytes`` of each call."""
    wire = calls["bytes_acked_after"] - calls["bytes_acked_before"]
    excess = (wire - calls["payload_bytes"]).dropna()
    if not len(excess):
        return Framing(0, None, 0)
    return Framing(int(excess.min()), int(excess.mode().iat[0]), int(len(excess)))


def restart_window(cwnd: int, idle_ms: float, rto_ms: float, initial: int) -> int:
    """Linux ``tcp_cwnd_restart()``: halve cwnd once per RTO of idle time beyond the first, never below the initial window."""
    restart = min(initial, cwnd)
    idle = idle_ms - rto_ms
    while idle > 0 and cwnd > restart:
        cwnd >>= 1
        idle -= rto_ms
    return max(cwnd, restart)


def predict_round_trips(calls: pd.DataFrame, initial_window: int, overhead_bytes: float) -> pd.DataFrame:
    """Each window-limited call's window at its first send and the round trips slow start then needs, against the observed.

    ``calls`` need ``cwnd_before``, ``lastsnd_ms_before``, ``rto_ms_before``,
    ``srtt_ms_before``, ``mss``, ``ssai``, ``cc_used``, ``payload_bytes`` and
    ``rtt_multiple`` (latency in ping RTTs). The kernel restarts the window
    at the first send after more than one RTO without sending, when the
    sysctl is 1 (``restarts``); BBR sets its window itself and is left out.
    ``in_flight`` marks calls with a send less than one smoothed RTT before
    them (that segment still takes a slot of the window), ``agrees`` those
    whose predicted round trips match the observed (latency in RTTs, rounded).
    """
    tcp = calls[calls["cc_used"] != "bbr"].dropna(subset=["cwnd_before", "lastsnd_ms_before", "rto_ms_before", "mss"]).copy()
    tcp["restarts"] = (tcp["ssai"] == 1) & (tcp["lastsnd_ms_before"] > tcp["rto_ms_before"])
    tcp["window_at_send"] = [
        restart_window(int(c), idle, rto, initial_window) if restarts else int(c)
        for c, idle, rto, restarts in zip(tcp["cwnd_before"], tcp["lastsnd_ms_before"], tcp["rto_ms_before"], tcp["restarts"])
    ]
    tcp["predicted_rounds"] = [
        int(slow_start_rounds([size + overhead_bytes], window, segment)[0])
        for size, window, segment in zip(tcp["payload_bytes"], tcp["window_at_send"], tcp["mss"])
    ]
    tcp["observed_rounds"] = tcp["rtt_multiple"].round().astype(int)
    tcp["in_flight"] = tcp["lastsnd_ms_before"] < tcp["srtt_ms_before"]
    tcp["agrees"] = tcp["predicted_rounds"] == tcp["observed_rounds"]
    return tcp


@dataclass
class StepFit:
    """One condition's step: the change point, and where it steps the slow-start fits.

    ``free`` fits the window in bytes from latency alone, ``by_iw`` the
    number of segments with the recorded ``mss``, ``model`` uses ``iw``
    segments of ``mss``; ``later`` are up to three change points over every size.
    """

    change_point: Fit
    steps: bool
    ping_ms: float
    free: Fit | None = None
    by_iw: Fit | None = None
    model: Fit | None = None
    later: list[float] = field(default_factory=list)
    mss: int | None = None
    iw: int | None = None


def fit_step(frame: pd.DataFrame, ping_ms: float, *, overhead_bytes: float, mss: int | None, iw: int | None,
             fit_max_bytes: int, robust: bool) -> StepFit:
    """The change point of one condition's calls and, when latency steps there, the slow-start fits.

    A condition steps when its change point jumps by at least half a ping RTT
    and lies below ``fit_max_bytes``; the fits use the calls up to
    ``fit_max_bytes`` (0: every size), because beyond the first step the
    kernel's lazy restart leaves a larger window than the model's ``iw``.
    ``mss`` is the condition's own recorded MSS when it has one, else the
    one given; ``iw`` 0 or None takes the fitted number of segments.
    """
    size, rtt = frame["payload_bytes"], frame["rtt_ms"]
    cp = locate_change_point(size, rtt, robust=robust)
    steps = cp.params["jump_ms"] >= 0.5 * ping_ms and (not fit_max_bytes or cp.params["last_before"] < fit_max_bytes)
    if not steps:
        return StepFit(change_point=cp, steps=False, ping_ms=ping_ms)
    fit_frame = frame[frame["payload_bytes"] <= fit_max_bytes] if fit_max_bytes else frame
    x, y = fit_frame["payload_bytes"], fit_frame["rtt_ms"]
    segment = recorded_mss(frame) or mss
    free = fit_slow_start(x, y, overhead_bytes=overhead_bytes, robust=robust)
    by_iw = fit_slow_start(x, y, mss=segment, overhead_bytes=overhead_bytes, robust=robust)
    model_iw = iw or int(by_iw.params["iw"])
    model = fit_slow_start(x, y, iw=model_iw, mss=segment, overhead_bytes=overhead_bytes, robust=robust)
    later = locate_change_points(size, rtt, n_changes=3, robust=robust)
    return StepFit(cp, True, ping_ms, free, by_iw, model, later, segment, model_iw)


def step_table(fits: dict[str, StepFit], overhead_bytes: float) -> pd.DataFrame:
    """One row per condition: whether it steps, its change point and, for those that step, the fitted windows."""
    rows = []
    for condition, f in fits.items():
        row = {"condition": condition, "steps": f.steps, "change_point_bytes": f.change_point.params["location_bytes"],
               "jump_rtt": f.change_point.params["jump_ms"] / f.ping_ms}
        if f.steps:
            lo, hi = f.free.intervals["threshold_bytes"]
            row.update({
                "window_bytes (free)": f.free.params["window_bytes"],
                "window from": lo + overhead_bytes, "window to": hi + overhead_bytes,
                "threshold payload (free)": f.free.params["threshold_bytes"],
                "fitted iw": f.by_iw.params["iw"], "iw × mss": f.iw * f.mss,
                "base_rtt_ms": f.model.params["base_rtt_ms"],
                "change points": ", ".join(f"{c:.0f}" for c in f.later),
            })
        rows.append(row)
    return pd.DataFrame(rows).set_index("condition") if rows else pd.DataFrame(columns=["steps"])


def compare_to_reference(calls: pd.DataFrame, conditions: list[str], reference: str | None,
                         value: str = "rtt_ms") -> pd.DataFrame:
    """Every other condition against ``reference``, size by size, as one family: one row per condition and size.

    ``difference`` is the reference's minus the condition's, what the
    reference costs more, by :func:`labkit.analysis.inference.two_sample_difference`
    (with fewer than ten calls a side, as in a sweep of 3 calls per size, the
    difference of the means with Welch's interval and test; else of the
    medians, with a percentile bootstrap and its z-test). ``verdict`` is
    "higher" or "lower" where it survives Holm's correction over every
    condition and size, "unclear" with ``mde`` (the smallest difference the
    family could have called at 80 % power) where not, and "not testable"
    (listed, and counted in the family) where a side has fewer than two
    calls. ``cell`` is ``"+d [lo, hi]"`` (ms) and the verdict, as a table
    shows them.
    """
    from labkit.analysis.inference import call_table, two_sample_difference

    rows, results = [], []
    for condition in (c for c in conditions if c != reference):
        for size in sorted(calls["payload_bytes"].unique()):
            at_size = calls[calls["payload_bytes"] == size]
            mine, theirs = (at_size[at_size["condition"] == c][value] for c in (condition, reference))
            if mine.empty and theirs.empty:
                continue
            result = two_sample_difference(mine, theirs)
            results.append(result)
            rows.append({"condition": condition, "payload_bytes": int(size), "n": f"{result.n_a}/{result.n_b}",
                         "statistic": result.statistic, "difference": result.difference, "lo": result.low,
                         "hi": result.high, "p": result.pvalue, "method": result.method})
    columns = ["condition", "payload_bytes", "n", "statistic", "difference", "lo", "hi", "p", "method", "p_holm",
               "verdict", "mde", "cell"]
    table = pd.DataFrame(rows, columns=columns[:9])
    return (call_table(table, results, "ms") if results else table).reindex(columns=columns)


def comparison_table(comparisons: pd.DataFrame) -> pd.DataFrame:
    """:func:`compare_to_reference` as a condition × size table of its ``cell`` text: ``"+d [lo, hi]"`` (ms) and the
    verdict."""
    if comparisons.empty:
        return pd.DataFrame()
    return comparisons.pivot(index="condition", columns="payload_bytes", values="cell")


def step_headline(step: StepFit, overhead_bytes: float, ping_ms: float) -> dict[str, float]:
    """The reference condition's step in the headline: the free window and its bracket, the fitted iw, the change point."""
    lo, hi = step.free.intervals["threshold_bytes"]
    return {
        "step.window_bytes": round(step.free.params["window_bytes"], 1),
        "step.window_from_bytes": round(lo + overhead_bytes, 1),
        "step.window_to_bytes": round(hi + overhead_bytes, 1),
        "step.window_minus_iw_x_mss_bytes": round(step.free.params["window_bytes"] - step.iw * step.mss, 1),
        "step.threshold_payload_bytes": round(step.free.params["threshold_bytes"], 1),
        "step.fitted_iw": step.by_iw.params["iw"],
        "step.base_rtt_ms": round(step.model.params["base_rtt_ms"], 3),
        "step.change_point_bytes": step.change_point.params["location_bytes"],
        "step.change_point_jump_rtt": round(step.change_point.params["jump_ms"] / ping_ms, 3),
    }


def restart_summary(tcp: pd.DataFrame, conditions: list[str]) -> pd.DataFrame:
    """Per condition (of :func:`predict_round_trips`' calls): the cwnd ss showed before and after, and the restarts it hid.

    A restart is hidden when ``ss`` showed a larger cwnd before the call than
    the window the call started with: the kernel restarts at the first send,
    after ``ss`` read the socket.
    """
    rows = []
    for condition in (c for c in conditions if c in set(tcp["condition"])):
        frame = tcp[tcp["condition"] == condition]
        hidden = frame[frame["restarts"] & (frame["cwnd_before"] > frame["window_at_send"])]
        rows.append({
            "condition": condition, "calls": len(frame), "restarted": int(frame["restarts"].sum()), "hidden by ss": len(hidden),
            "cwnd before": f"{int(frame['cwnd_before'].min())}–{int(frame['cwnd_before'].max())}",
            "cwnd after": f"{int(frame['cwnd_after'].min())}–{int(frame['cwnd_after'].max())}",
            "hidden: shown": f"{int(hidden['cwnd_before'].min())}–{int(hidden['cwnd_before'].max())}" if len(hidden) else "",
            "hidden: used": f"{int(hidden['window_at_send'].min())}–{int(hidden['window_at_send'].max())}" if len(hidden) else "",
        })
    return pd.DataFrame(rows).set_index("condition") if rows else pd.DataFrame()


def rounds_by_window(tcp: pd.DataFrame, conditions: list[str], initial_window: int) -> pd.DataFrame:
    """How many calls of each size took each number of round trips, per condition (of :func:`predict_round_trips`'
    calls), and the window at their first send: ``calls``, ``window_min`` / ``window_max`` (segments),
    ``at_initial_window`` (calls whose window was back at ``initial_window``, where a restart ends) and
    ``latest_seq`` (the latest of them in its cell's order: how early in a cell such calls came)."""
    order = {condition: i for i, condition in enumerate(conditions)}
    table = tcp.groupby(["condition", "payload_bytes", "observed_rounds"]).agg(
        calls=("window_at_send", "size"), window_min=("window_at_send", "min"), window_max=("window_at_send", "max"),
        at_initial_window=("window_at_send", lambda window: int((window == initial_window).sum())),
        latest_seq=("seq", "max"))
    return table.sort_index(level=0, key=lambda level: level.map(order), sort_remaining=True)


def cost_headline(comparisons: pd.DataFrame, knobs: pd.DataFrame, reference: str, largest: int) -> dict:
    """The headline's ``cost_vs.<condition>.*`` at the ``largest`` size from :func:`compare_to_reference`'s
    table, for the conditions that change one knob of the reference (the JSON's ``comparisons`` keep them all): the
    difference in ms, its interval, its verdict, and its MDE where it is unclear."""
    headline: dict = {}
    if not len(comparisons):
        return headline
    for condition, result in comparisons[comparisons["payload_bytes"] == largest].set_index("condition").iterrows():
        if len(knobs_changed(knobs, condition, reference)) != 1:
            continue
        headline.update({f"cost_vs.{condition}.ms": round(result["difference"], 2),
                         f"cost_vs.{condition}.ci_lo_ms": round(result["lo"], 2),
                         f"cost_vs.{condition}.ci_hi_ms": round(result["hi"], 2),
                         f"cost_vs.{condition}.verdict": result["verdict"]})
        if result["verdict"] == "unclear":
            headline[f"cost_vs.{condition}.mde_ms"] = round(result["mde"], 2)
    return headline


def runs_headline(runs_table: pd.DataFrame | None, largest: int) -> dict[str, float]:
    """Headline fields of a :func:`labkit.analysis.between_runs` table of RTT multiples by condition and size: each
    condition's interval over runs at the largest size (``rtt_multiple_at_largest.<condition>.runs_lo`` /
    ``.runs_hi``); none without a table (a run made alone)."""
    from labkit.analysis.inference import runs_interval_fields

    return runs_interval_fields(runs_table, lambda key: f"rtt_multiple_at_largest.{key[0]}" if key[1] == largest else None)
