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
- what a run shows, said from its own numbers: ``*_claims`` (predicates,
  the headline's ``claim.*``) and ``*_findings`` (the sentences the notebook
  shows with ``Notebook.say``), each saying where a published observation
  (:data:`PUBLISHED_STEP` and the others) is reproduced and where not.
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
    difference in ms, its 95 % interval (uncorrected), its verdict and the Holm-adjusted p it was taken from
    (``p_holm``, over the ``cost_vs.family`` comparisons of the whole table: an interval clear of zero can stand
    beside an unclear verdict), and its MDE where it is unclear."""
    headline: dict = {}
    if not len(comparisons):
        return headline
    for condition, result in comparisons[comparisons["payload_bytes"] == largest].set_index("condition").iterrows():
        if len(knobs_changed(knobs, condition, reference)) != 1:
            continue
        headline.update({f"cost_vs.{condition}.ms": round(result["difference"], 2),
                         f"cost_vs.{condition}.ci_lo_ms": round(result["lo"], 2),
                         f"cost_vs.{condition}.ci_hi_ms": round(result["hi"], 2),
                         f"cost_vs.{condition}.verdict": result["verdict"],
                         f"cost_vs.{condition}.p_holm": float(f"{result['p_holm']:.3g}"),
                         "cost_vs.family": int(len(comparisons))})
        if result["verdict"] == "unclear":
            headline[f"cost_vs.{condition}.mde_ms"] = round(result["mde"], 2)
    return headline


def runs_headline(runs_table: pd.DataFrame | None, largest: int) -> dict[str, float]:
    """Headline fields of a :func:`labkit.analysis.between_runs` table of RTT multiples by condition and size: each
    condition's interval over runs at the largest size (``rtt_multiple_at_largest.<condition>.runs_lo`` /
    ``.runs_hi``); none without a table (a run made alone)."""
    from labkit.analysis.inference import runs_interval_fields

    return runs_interval_fields(runs_table, lambda key: f"rtt_multiple_at_largest.{key[0]}" if key[1] == largest else None)


# --- What a run shows ---------------------------------------------------------------------------------------------
#
# Each finding the notebook states is a predicate on the run's own numbers (the ``*_claims`` functions, kept in the
# headline as ``claim.<name>``) and a sentence printed only where it holds, with those numbers, their n and the
# method (the ``*_findings`` functions, which the notebook shows with ``Notebook.say``). Where a published
# observation applies, the sentence says whether this run reproduces it.

#: The observations of the published experiment (research brief, experiment 1: grpc-go #5599 and #8436, two VMs
#: 205 ms apart) a run is held against. They are what the findings test, never a parameter of the analysis.
#: With 1 s between calls: the round trips of a request of each size (15000 B gave a mix of one and two).
PUBLISHED_STEP = {14000: (1,), 15000: (1, 2), 16000: (2,)}
#: With 1 s between calls the second report saw three round trips at around 100 KB (the sizes counted as such).
PUBLISHED_AROUND_100_KB = {"from": 90_000, "to": 110_000, "rounds": 3}
#: With 0.1 s between calls a 32000 B request took one round trip.
PUBLISHED_SHORT_GAP = {"gap": 0.1, "bytes": 32000, "rounds": 1}
#: With 1 s between calls and a 1-byte call every 0.25 s on the same channel, requests stayed at one round trip
#: (the reports' sizes went up to 32000 B).
PUBLISHED_BACKGROUND = {"gap": 1.0, "bg": 0.25, "up_to_bytes": 32000, "rounds": 1}

_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight"}


def _n(rounds: int) -> str:
    return _WORDS.get(int(rounds), str(int(rounds)))


def _trips(rounds: int) -> str:
    return f"{_n(rounds)} round trip{'s' if int(rounds) != 1 else ''}"


def _sizes(sizes) -> str:
    """``15000, 16000 and 100000 B``."""
    sizes = [str(int(s)) for s in sizes]
    return (", ".join(sizes[:-1]) + " and " + sizes[-1] if len(sizes) > 1 else "".join(sizes)) + " B"


def _ms(value: float) -> str:
    """A duration in ms to the digits it deserves: 991, 15.1, 0.18."""
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.1f}" if abs(value) >= 1 else f"{value:.2g}"


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def observed_rounds(calls: pd.DataFrame) -> pd.Series:
    """Each call's round trips: its latency in ping RTTs (``rtt_multiple``), rounded, at least one."""
    return calls["rtt_multiple"].round().clip(lower=1).astype(int)


def round_trip_counts(calls: pd.DataFrame) -> pd.Series:
    """How many calls of each condition and size took each number of round trips (:func:`observed_rounds`):
    a series indexed by ``condition``, ``payload_bytes``, ``rounds``."""
    return calls.assign(rounds=observed_rounds(calls)).groupby(["condition", "payload_bytes", "rounds"]).size()


def _took(counts: pd.Series) -> str:
    """``one round trip in 28 of 30 calls, two in 2`` from one size's counts (indexed by rounds), most first."""
    total = int(counts.sum())
    parts = [(int(r), int(n)) for r, n in counts.sort_values(ascending=False, kind="stable").items()]
    first, *rest = parts
    text = f"{_trips(first[0])} in {first[1]} of {total} calls"
    return text + "".join(f", {_n(r)} in {n}" for r, n in rest)


def find_condition(knobs: pd.DataFrame, *, cc_not: str = "bbr", ssai: int = 1, gap: float | None = 1.0,
                   bg: float | None = None, ka: float | None = None) -> str | None:
    """The first condition (in :func:`label_conditions`' order) with these knobs, ``None`` for a knob meaning off; a
    congestion control other than ``cc_not``. ``gap=None`` takes any gap."""
    def same(value, wanted) -> bool:
        return pd.isna(value) if wanted is None else pd.notna(value) and abs(float(value) - wanted) < 1e-9

    for condition, k in knobs.iterrows():
        if (k["cc"] != cc_not and k["ssai"] == ssai and (gap is None or same(k["gap"], gap))
                and same(k["bg"], bg) and same(k["ka"], ka)):
            return condition
    return None


def published_condition(knobs: pd.DataFrame) -> str | None:
    """The condition the published step was seen under: a congestion control that restarts (not BBR), the sysctl at
    1, 1 s between calls, no background call, no keepalive; None when the run has none."""
    return find_condition(knobs)


def framing_findings(framing: Framing, mss: int | None, iw: int) -> list[str]:
    """The bytes a request put on the wire beyond its payload, the MSS ``ss`` recorded, and what fits ``iw``
    segments of it."""
    if not framing.calls:
        return []
    text = (f"Each request put its payload and at least {framing.overhead_bytes} B of gRPC and HTTP/2 framing on the "
            f"wire (the least of `bytes_acked` after − before − payload over {framing.calls} calls; most common "
            f"{framing.most_common_bytes} B).")
    if mss and iw:
        text += (f" `ss` recorded an MSS of {mss} B, so {iw} segments carry {iw * mss} B and the largest payload that "
                 f"fits the initial window is {iw * mss - framing.overhead_bytes} B.")
    return [text]


def step_claims(calls: pd.DataFrame, knobs: pd.DataFrame, fits: dict[str, StepFit], reference: str | None) -> dict:
    """The predicates of :func:`step_findings`, those that apply to this run:

    - ``steps``: some condition's latency steps (:func:`fit_step`'s rule), the first of them being the reference;
    - ``step_where_published``: the reference's change point lies between 14000 and 16000 B of payload, where the
      published step was (:data:`PUBLISHED_STEP`);
    - ``window_is_iw_x_mss``: iw × MSS (recorded MSS) lies in the bracket the free fit allows the window;
    - ``published_step_sizes``: under :func:`published_condition`, each of :data:`PUBLISHED_STEP`'s sizes the run
      tested took the published round trips (the median, rounded; a mix: calls of each count).
    """
    held: dict[str, bool] = {"steps": reference is not None}
    if reference is not None:
        f = fits[reference]
        lo, hi = min(PUBLISHED_STEP), max(PUBLISHED_STEP)
        held["step_where_published"] = bool(f.change_point.params["last_before"] >= lo
                                            and f.change_point.params["first_after"] <= hi)
        low, high = f.free.intervals["threshold_bytes"]
        overhead = f.free.params["window_bytes"] - f.free.params["threshold_bytes"]
        held["window_is_iw_x_mss"] = bool(low + overhead <= f.iw * f.mss <= high + overhead)
    verdicts = _published_step_verdicts(calls, knobs)
    if verdicts:
        held["published_step_sizes"] = all(ok for _, _, ok in verdicts)
    return held


def _published_step_verdicts(calls: pd.DataFrame, knobs: pd.DataFrame) -> list[tuple[int, pd.Series, bool]]:
    """For each size of :data:`PUBLISHED_STEP` the run tested under :func:`published_condition`: the size, its
    counts by round trips, and whether it took the published round trips."""
    condition = published_condition(knobs)
    if condition is None:
        return []
    mine = calls[calls["condition"] == condition]
    verdicts = []
    for size, published in PUBLISHED_STEP.items():
        at = mine[mine["payload_bytes"] == size]
        if at.empty:
            continue
        counts = observed_rounds(at).value_counts()
        if len(published) > 1:
            ok = all(counts.get(r, 0) > 0 for r in published)
        else:
            ok = int(round(at["rtt_multiple"].median())) == published[0]
        verdicts.append((size, counts, ok))
    return verdicts


def step_findings(calls: pd.DataFrame, knobs: pd.DataFrame, fits: dict[str, StepFit], reference: str | None,
                  fit_max_bytes: int) -> list[str]:
    """Where latency steps, what the fits make of it, and whether the published step (:data:`PUBLISHED_STEP`)
    is reproduced; which conditions do not step."""
    held = step_claims(calls, knobs, fits, reference)
    lines = []
    rule = ("a change point jumping by at least half a ping RTT" +
            (f" below `fit_max_bytes` = {fit_max_bytes} B" if fit_max_bytes else ""))
    if reference is not None:
        f = fits[reference]
        cp = f.change_point.params
        n = int((calls["condition"] == reference).sum())
        sizes = calls.loc[calls["condition"] == reference, "payload_bytes"].nunique()
        bracket = f.change_point.intervals["location_bytes"]
        where = ("where the published step was (between 14000 and 16000 B)" if held["step_where_published"]
                 else "not where the published step was (between 14000 and 16000 B)")
        lines.append(
            f"**The step.** Under `{reference}` latency steps between {cp['last_before']:.0f} and "
            f"{cp['first_after']:.0f} B of payload, {where}: the change point over its {n} calls of {sizes} sizes "
            f"jumps by {cp['jump_ms']:.1f} ms, {cp['jump_ms'] / f.ping_ms:.2f} ping RTTs (its 95 % bootstrap bracket: "
            f"{bracket[0]:.0f} to {bracket[1]:.0f} B).")
        low, high = f.free.intervals["threshold_bytes"]
        overhead = f.free.params["window_bytes"] - f.free.params["threshold_bytes"]
        iw_low, iw_high = f.by_iw.intervals["iw"]
        inside = "inside" if held["window_is_iw_x_mss"] else "outside"
        lines.append(
            f"From latency alone (the step model fitted to the calls up to {fit_max_bytes or 'the largest'} B) the "
            f"window lies between {low + overhead:.0f} and {high + overhead:.0f} B on the wire, and iw × MSS = "
            f"{f.iw} × {f.mss} = {f.iw * f.mss} B is {inside} that bracket; fitted with the recorded MSS, the "
            f"initial window is {f.by_iw.params['iw']:.0f} segments (interval {iw_low:.0f} to {iw_high:.0f}).")
    verdicts = _published_step_verdicts(calls, knobs)
    if verdicts:
        condition = published_condition(knobs)
        parts = [f"{size} B took {_took(counts)}" for size, counts, _ in verdicts]
        failed = [size for size, _, ok in verdicts if not ok]
        untested = [size for size in PUBLISHED_STEP if size not in {v[0] for v in verdicts}]
        verdict = "reproduced" if not failed else f"not reproduced at {_sizes(failed)}"
        lines.append(
            "The published step (1 s between calls: 14000 B one round trip, 15000 B a mix of one and two, 16000 B "
            f"two) is {verdict} under `{condition}`: " + "; ".join(parts) +
            (f"; {_sizes(untested)} not tested in this run" if untested else "") +
            " (each call's round trips: its latency in ping RTTs, rounded; a size of one published count is judged "
            "by its median, the mix by calls of each count).")
    others = [c for c in fits if c != reference]
    if reference is not None and others:
        stepping = [c for c in others if fits[c].steps]
        jumps_above = [c for c in others if not fits[c].steps
                       and fits[c].change_point.params["jump_ms"] >= 0.5 * fits[c].ping_ms]
        if stepping:
            lines.append("Latency also steps under " + "; ".join(
                f"`{c}` (between {fits[c].change_point.params['last_before']:.0f} and "
                f"{fits[c].change_point.params['first_after']:.0f} B, "
                f"{fits[c].change_point.params['jump_ms'] / fits[c].ping_ms:.2f} ping RTTs)" for c in stepping) + ".")
        quiet = len(others) - len(stepping)
        if quiet:
            text = ("The other condition does not step" if len(others) == 1 else
                    f"{'None' if not stepping else quiet} of the {len(others)} other conditions "
                    f"{'steps' if not stepping else 'do not step'}") + f" by that rule ({rule})"
            if jumps_above:
                text += "; jumping by half a ping RTT or more only above it: " + ", ".join(
                    f"`{c}` ({fits[c].change_point.params['jump_ms'] / fits[c].ping_ms:.2f} ping RTTs between "
                    f"{fits[c].change_point.params['last_before']:.0f} and "
                    f"{fits[c].change_point.params['first_after']:.0f} B)" for c in jumps_above)
            lines.append(text + ".")
    elif reference is None and fits:
        largest = max(fits, key=lambda c: fits[c].change_point.params["jump_ms"] / fits[c].ping_ms)
        lines.append(f"No condition steps by the rule ({rule}); the largest jump is "
                     f"{fits[largest].change_point.params['jump_ms'] / fits[largest].ping_ms:.2f} ping RTTs, under "
                     f"`{largest}`.")
    return lines


def _previous_cwnd_after(frame: pd.DataFrame) -> pd.Series:
    """Each call's previous call's ``cwnd_after`` on the same connection (cell and run, in call order); NaN for the
    first."""
    keys = ["cell_id"] + (["replicate"] if "replicate" in frame else [])
    ordered = frame.sort_values("seq")
    return ordered.groupby(keys)["cwnd_after"].shift().reindex(frame.index)


def restart_findings(tcp: pd.DataFrame, conditions: list[str], initial_window: int) -> list[str]:
    """What ``ss`` showed of the restart, per condition of :func:`predict_round_trips`' calls: the restarts it hid
    (a cwnd before the call above the window the call started with), the calls that found the window restarted
    by a send just before them, and conditions under which nothing restarted."""
    lines = []
    for condition in (c for c in conditions if c in set(tcp["condition"])):
        frame = tcp[tcp["condition"] == condition]
        restarted = frame[frame["restarts"]]
        hidden = restarted[restarted["cwnd_before"] > restarted["window_at_send"]]
        if frame["ssai"].iat[0] == 1 and len(restarted):
            text = (f"Under `{condition}`, {len(restarted)} of {len(frame)} calls came after more than one RTO "
                    "without a send (`lastsnd_ms_before > rto_ms_before`), so the window restarted at their first send")
            if len(hidden):
                text += (f"; for {len(hidden)} of them `ss` showed a larger cwnd before the call (up to "
                         f"{int(hidden['cwnd_before'].max())} segments) than the window the restart rule gives at "
                         f"that send (at most {int(hidden['window_at_send'].max())}): the reset does not show in "
                         "`cwnd_before`")
            lines.append(text + ".")
        previous = _previous_cwnd_after(frame)
        just_before = frame[frame["in_flight"] & ~frame["restarts"] & (frame["cwnd_before"] <= initial_window)
                            & (previous > initial_window)]
        if frame["ssai"].iat[0] == 1 and len(just_before):
            lines.append(
                f"Under `{condition}`, {len(just_before)} of {len(frame)} calls found cwnd back at "
                f"{initial_window} segments or below although the call before had left it larger (up to "
                f"{int(previous[just_before.index].max())}) and the last send was less than one smoothed RTT before "
                f"them (median {just_before['lastsnd_ms_before'].median():.0f} ms): a send just before the call, "
                "after the idle time, had restarted the window, and was still in flight.")
        if not frame["restarts"].any() and frame["ssai"].iat[0] != 1:
            lines.append(f"Under `{condition}` (the sysctl at {frame['ssai'].iat[0]}) no call restarted; cwnd before "
                         f"the calls was {int(frame['cwnd_before'].min())}–{int(frame['cwnd_before'].max())} segments "
                         f"({len(frame)} calls).")
    return lines


def rounds_claims(tcp: pd.DataFrame, knobs: pd.DataFrame, initial_window: int, overhead_bytes: float) -> dict:
    """The predicates of :func:`rounds_findings`, those that apply:

    - ``restart_rule``: the rule predicts at least 95 % of the calls with nothing in flight;
    - ``three_rtt_around_100kb``: under :func:`published_condition`, the median at a size around 100 KB
      (:data:`PUBLISHED_AROUND_100_KB`) is three round trips, as the second report saw.
    """
    held: dict[str, bool] = {}
    quiet = tcp[~tcp["in_flight"]]
    if len(quiet):
        held["restart_rule"] = bool(quiet["agrees"].mean() >= 0.95)
    around = _around_100_kb(tcp, knobs)
    if around:
        held["three_rtt_around_100kb"] = all(_three_at(frame) for _, frame in around)
    return held


def _three_at(frame: pd.DataFrame) -> bool:
    """Whether one size's median, rounded, is the published round trips at around 100 KB."""
    return int(round(frame["rtt_multiple"].median())) == PUBLISHED_AROUND_100_KB["rounds"]


def _around_100_kb(tcp: pd.DataFrame, knobs: pd.DataFrame) -> list[tuple[int, pd.DataFrame]]:
    condition = published_condition(knobs)
    mine = tcp[tcp["condition"] == condition]
    sizes = [s for s in sorted(mine["payload_bytes"].unique())
             if PUBLISHED_AROUND_100_KB["from"] <= s <= PUBLISHED_AROUND_100_KB["to"]]
    return [(int(s), mine[mine["payload_bytes"] == s]) for s in sizes]


def _windows(frame: pd.DataFrame) -> str:
    low, high = int(frame["window_at_send"].min()), int(frame["window_at_send"].max())
    return f"{low} segment{'s' if low != 1 else ''}" if low == high else f"{low}–{high} segments"


def rounds_findings(tcp: pd.DataFrame, knobs: pd.DataFrame, reference: str | None, initial_window: int,
                    overhead_bytes: float) -> list[str]:
    """How well the restart rule predicts each call's round trips, what the window at the first send did where one
    size took different numbers of round trips, and whether the published three round trips at around 100 KB
    (:data:`PUBLISHED_AROUND_100_KB`) are reproduced."""
    if tcp.empty:
        return []
    lines = []
    quiet, busy = tcp[~tcp["in_flight"]], tcp[tcp["in_flight"]]
    misses = tcp[~tcp["agrees"]]
    text = (f"The restart rule (the window at the first send, then slow start from it) predicts the round trips of "
            f"{int(tcp['agrees'].sum())} of {len(tcp)} calls (BBR's left out): {int(quiet['agrees'].sum())} of "
            f"{len(quiet)} with nothing in flight, {int(busy['agrees'].sum())} of {len(busy)} with a send less than "
            "one smoothed RTT before the call")
    if len(misses):
        text += f"; of the {len(misses)} it misses, {int(misses['in_flight'].sum())} had such a send"
    lines.append(text + ".")
    rounds = {}
    if reference is not None and reference in set(tcp["condition"]):
        mine = tcp[tcp["condition"] == reference]
        parts = []
        for size, frame in mine.groupby("payload_bytes"):
            if frame["observed_rounds"].nunique() < 2:
                continue
            by = sorted(frame.groupby("observed_rounds"), key=lambda item: -len(item[1]))
            parts.append(f"{int(size)} B " + ", ".join(
                f"{_n(r)} in {len(f)} of {len(frame)} ({_windows(f)})" for r, f in by))
        if parts:
            lines.append(f"Where calls of one size took different numbers of round trips under `{reference}`, this "
                         "is how many took each, and the window at their first send: " + "; ".join(parts) + ".")
    for size, frame in _around_100_kb(tcp, knobs):
        condition = frame["condition"].iat[0]
        needed = int(slow_start_rounds([size + overhead_bytes], initial_window, frame["mss"].mode().iat[0])[0])
        counts = frame["observed_rounds"].value_counts()
        median = frame["rtt_multiple"].median()
        verdict = "reproduced" if _three_at(frame) else "not reproduced"
        text = (f"The published three round trips at around 100 KB are {verdict} under `{condition}`: at {size} B the "
                f"median is {median:.2f} ping RTTs ({len(frame)} calls; " +
                ", ".join(f"{_trips(r)} in {n}" for r, n in counts.sort_index().items()) +
                f"); a slow start from {initial_window} segments needs {_trips(needed)} for its "
                f"{size + overhead_bytes:.0f} B on the wire")
        fewer = frame[frame["observed_rounds"] < needed]
        if len(fewer):
            above = fewer[fewer["window_at_send"] > initial_window]
            at_iw = fewer[fewer["window_at_send"] <= initial_window]
            text += (f"; of the {len(fewer)} calls that took fewer, {len(above)} started with more than "
                     f"{initial_window} segments left by earlier calls" +
                     (f" (up to {int(above['window_at_send'].max())})" if len(above) else "") +
                     (f" and {len(at_iw)} with {initial_window} or fewer, which the rule does not predict"
                      if len(at_iw) else ""))
        lines.append(text + ".")
    for condition, frame in tcp[tcp["ssai"] == 0].groupby("condition", sort=False):
        more = frame[frame["observed_rounds"] > 1]
        if len(more):
            lines.append(
                f"Under `{condition}` (nothing restarts), {len(frame) - len(more)} of {len(frame)} calls took one round "
                f"trip; the {len(more)} that took more were of {_sizes(sorted(more['payload_bytes'].unique()))}, "
                f"none later than call {int(more['seq'].max()) + 1} of its cell, with {_windows(more)} at the first "
                f"send, and the rule predicts {int(more['agrees'].sum())} of them: a window not yet grown to the "
                "request, not a restart.")
    return lines


def _comparison(row, reference: str, family: int, unit: str = "ms") -> str:
    """One comparison of :func:`compare_to_reference` as a sentence: the difference, its n, its uncorrected 95 %
    interval by its method, and the verdict after Holm's correction over the ``family``, with the adjusted p (and
    the MDE where not called): the interval and the verdict are named as what each is."""
    statistic = "medians" if row["statistic"] == "median" else "means"
    verdict = {"higher": "called higher", "lower": "called lower", "unclear": "not called"}.get(row["verdict"],
                                                                                                  row["verdict"])
    text = (f"`{reference}` − `{row['condition']}` at {int(row['payload_bytes'])} B: {row['difference']:+.1f} {unit} "
            f"(difference of the {statistic}, n = {row['n']}")
    if pd.notna(row["lo"]):
        text += f"; 95 % {row['method']} interval [{row['lo']:+.1f}, {row['hi']:+.1f}], uncorrected"
    text += f"); {verdict} after Holm's correction over the {family} comparisons of this family"
    if pd.notna(row["p_holm"]):
        text += f" (adjusted p {row['p_holm']:.2g}" + (f", MDE {_ms(row['mde'])} {unit}" if row["verdict"] == "unclear"
                                                        and pd.notna(row["mde"]) else "") + ")"
    return text


def _what_changes(knobs: pd.DataFrame, condition: str, knob: str) -> str:
    k = knobs.loc[condition]
    value = k[knob]
    return {
        "ssai": lambda: f"the sysctl at {value}",
        "gap": lambda: f"{value:g} s between calls",
        "bg": lambda: "no background call" if pd.isna(value) else f"a background call every {value:g} s",
        "ka": lambda: "no keepalive" if pd.isna(value) else f"keepalive pings every {int(value)} ms",
        "cc": lambda: f"congestion control {value}",
        "stack": lambda: f"the {value} stack",
        "pair": lambda: f"the pair {value}",
    }[knob]()


def _step_text(fit: StepFit | None, fit_max_bytes: int) -> str:
    """Whether a condition steps by :func:`fit_step`'s rule, and where its change point is."""
    if fit is None:
        return "too few sizes to place a step"
    cp = fit.change_point.params
    where = (f"between {cp['last_before']:.0f} and {cp['first_after']:.0f} B, "
             f"{cp['jump_ms'] / fit.ping_ms:.2f} ping RTTs")
    if fit.steps:
        return f"latency steps ({where})"
    below = f" below {fit_max_bytes} B" if fit_max_bytes else ""
    return f"no step{below} (its change point: {where})"


def condition_claims(calls: pd.DataFrame, knobs: pd.DataFrame, fits: dict[str, StepFit]) -> dict:
    """The published fixes' predicates of :func:`condition_findings`, those the run has the conditions for:

    - ``sysctl_zero_removes_step``: every condition with the sysctl at 0 has no step and a median of one round
      trip (rounded) at every size;
    - ``short_gap_one_rtt``: with 0.1 s between calls (the sysctl at 1, no other knob), 32000 B took one round
      trip (median, rounded; :data:`PUBLISHED_SHORT_GAP`);
    - ``background_one_rtt``: with 1 s between calls and a background call every 0.25 s, every size up to
      32000 B took one round trip (:data:`PUBLISHED_BACKGROUND`);
    - ``bbr_no_step``: no BBR condition steps, whatever its other knobs.
    """
    held: dict[str, bool] = {}
    medians = calls.groupby(["condition", "payload_bytes"])["rtt_multiple"].median()
    measured = set(medians.index.get_level_values(0))
    off = [c for c in knobs.index if knobs.at[c, "ssai"] == 0 and c in measured]
    if off:
        held["sysctl_zero_removes_step"] = all(
            not (c in fits and fits[c].steps) and bool((medians.loc[c].round() == 1).all()) for c in off)
    short = find_condition(knobs, gap=PUBLISHED_SHORT_GAP["gap"])
    if short is not None and (short, PUBLISHED_SHORT_GAP["bytes"]) in medians.index:
        held["short_gap_one_rtt"] = bool(round(medians.loc[(short, PUBLISHED_SHORT_GAP["bytes"])]) == 1)
    background = find_condition(knobs, gap=PUBLISHED_BACKGROUND["gap"], bg=PUBLISHED_BACKGROUND["bg"])
    if background is not None:
        upto = medians.loc[background]
        upto = upto[upto.index <= PUBLISHED_BACKGROUND["up_to_bytes"]]
        if len(upto):
            held["background_one_rtt"] = bool((upto.round() == PUBLISHED_BACKGROUND["rounds"]).all())
    bbr = [c for c in knobs.index if knobs.at[c, "cc"] == "bbr" and c in fits]
    if bbr:
        held["bbr_no_step"] = not any(fits[c].steps for c in bbr)
    return held


def condition_findings(calls: pd.DataFrame, knobs: pd.DataFrame, fits: dict[str, StepFit],
                       comparisons: pd.DataFrame, reference: str | None, fit_max_bytes: int) -> list[str]:
    """Each condition that changes one knob of the reference against it, size by size (verdicts after Holm's
    correction over the whole family, the largest size's difference with its uncorrected interval beside its
    verdict); the published fixes (:func:`condition_claims`) reproduced or not; and the conditions that change
    more than one knob, in short."""
    held = condition_claims(calls, knobs, fits)
    lines = []
    medians = calls.groupby(["condition", "payload_bytes"])["rtt_multiple"].median()
    family = len(comparisons)
    if reference is not None and family:
        largest = int(comparisons["payload_bytes"].max())
        several = []
        for condition in (c for c in knobs.index if c != reference):
            changed = knobs_changed(knobs, condition, reference)
            rows = comparisons[comparisons["condition"] == condition].sort_values("payload_bytes")
            if rows.empty:
                continue
            if len(changed) != 1:
                several.append(condition)
                continue
            called = {v: rows.loc[rows["verdict"] == v, "payload_bytes"].tolist() for v in ("higher", "lower")}
            unclear = rows[rows["verdict"] == "unclear"]
            parts = [f"called higher (the reference slower) at {_sizes(called['higher'])}" if called["higher"] else "",
                     f"called lower (the reference faster) at {_sizes(called['lower'])}" if called["lower"] else "",
                     (f"not called at {_sizes(unclear['payload_bytes'])} (MDE {_ms(unclear['mde'].min())} to "
                      f"{_ms(unclear['mde'].max())} ms)") if len(unclear) else ""]
            per_size = calls[calls["condition"] == condition].groupby("payload_bytes").size()
            lines.append(
                f"**{_capital(_what_changes(knobs, condition, changed[0]))}** (`{condition}`, "
                f"{per_size.min()}{'–' + str(per_size.max()) if per_size.max() != per_size.min() else ''} calls per "
                f"size): {_step_text(fits.get(condition), fit_max_bytes)}; the reference against it, size by size: "
                + ", ".join(p for p in parts if p) +
                f", after Holm's correction over the {family} comparisons of this family.")
            at_largest = rows[rows["payload_bytes"] == largest]
            if len(at_largest):
                lines.append(_comparison(at_largest.iloc[0], reference, family) + ".")
        if several:
            stepping = [c for c in several if c in fits and fits[c].steps]
            lines.append(f"{len(several)} conditions change more than one knob of the reference; "
                         + (f"{len(stepping)} of them step: " + ", ".join(f"`{c}`" for c in stepping)
                            if stepping else "none of them steps") + " (their verdicts are in the table above).")
    off = [c for c in knobs.index if knobs.at[c, "ssai"] == 0 and c in set(calls["condition"])]
    if "sysctl_zero_removes_step" in held:
        top = max(medians.loc[c].max() for c in off)
        lines.append(
            "The published fix of setting `tcp_slow_start_after_idle` to 0 is "
            + ("reproduced" if held["sysctl_zero_removes_step"] else "not reproduced")
            + ": " + "; ".join(f"`{c}`: {_step_text(fits.get(c), fit_max_bytes)}, median {medians.loc[c].min():.2f}–"
                               f"{medians.loc[c].max():.2f} ping RTTs over its sizes" for c in off)
            + ("" if top < 1.5 else "; some size's median rounds to more than one round trip") + ".")
    if "short_gap_one_rtt" in held:
        short = find_condition(knobs, gap=PUBLISHED_SHORT_GAP["gap"])
        at = calls[(calls["condition"] == short) & (calls["payload_bytes"] == PUBLISHED_SHORT_GAP["bytes"])]
        lines.append(
            "The published one round trip for 32000 B with 0.1 s between calls is "
            + ("reproduced" if held["short_gap_one_rtt"] else "not reproduced")
            + f" under `{short}`: {_took(observed_rounds(at).value_counts())}, median {at['rtt_multiple'].median():.2f} "
              "ping RTTs.")
    if "background_one_rtt" in held:
        background = find_condition(knobs, gap=PUBLISHED_BACKGROUND["gap"], bg=PUBLISHED_BACKGROUND["bg"])
        mine = medians.loc[background]
        upto, beyond = mine[mine.index <= PUBLISHED_BACKGROUND["up_to_bytes"]], mine[mine.index > PUBLISHED_BACKGROUND["up_to_bytes"]]
        text = ("The published one round trip with 1 s between calls and a 1-byte call every 0.25 s is "
                + ("reproduced" if held["background_one_rtt"] else "not reproduced")
                + f" up to 32000 B under `{background}`: median in ping RTTs " + ", ".join(
                    f"{v:.2f} at {int(s)} B" for s, v in upto.items()))
        if len(beyond):
            text += "; beyond the reports' sizes, " + ", ".join(f"{v:.2f} at {int(s)} B" for s, v in beyond.items())
        lines.append(text + ".")
    if "bbr_no_step" in held:
        bbr = [c for c in knobs.index if knobs.at[c, "cc"] == "bbr" and c in fits]
        lines.append(
            f"BBR does not restart, as published: {'none' if held['bbr_no_step'] else 'not every one'} of the "
            f"{len(bbr)} BBR conditions {'steps' if held['bbr_no_step'] else 'is free of a step'}; their medians run "
            f"from {min(medians.loc[c].min() for c in bbr):.2f} to {max(medians.loc[c].max() for c in bbr):.2f} ping "
            "RTTs over the sizes."
            if held["bbr_no_step"] else
            f"The published absence of a restart under BBR is not reproduced: "
            + ", ".join(f"`{c}`" for c in bbr if fits[c].steps) + " step.")
    return lines


def runs_claims(runs_table: pd.DataFrame | None) -> dict:
    """``runs_agree``: in a group of runs, each run's median (in ping RTTs, rounded to whole round trips) is the
    pooled one at every condition and size."""
    if runs_table is None or runs_table.empty:
        return {}
    return {"runs_agree": not _runs_disagree(runs_table)}


def _runs_disagree(runs_table: pd.DataFrame) -> list[tuple[tuple, int, int]]:
    """The rows of a :func:`labkit.analysis.between_runs` table where some run's median rounds to another number of
    round trips than the pooled median: (key, runs that agree, runs)."""
    columns = [c for c in runs_table.columns if str(c).startswith("run ")]
    out = []
    for key, row in runs_table.iterrows():
        values = row[columns].dropna()
        agree = int((values.round() == round(row["pooled"])).sum())
        if agree < len(values):
            out.append((key, agree, len(values)))
    return out


def step_by_run(calls: pd.DataFrame, condition: str, robust: bool = True) -> dict[int, Fit]:
    """The change point of one condition's calls in each run of a group (``replicate``), each run alone."""
    mine = calls[calls["condition"] == condition]
    return {int(r): locate_change_point(f["payload_bytes"], f["rtt_ms"], robust=robust)
            for r, f in mine.groupby("replicate") if f["payload_bytes"].nunique() >= 2}


def runs_findings(runs_table: pd.DataFrame | None, calls: pd.DataFrame, knobs: pd.DataFrame, reference: str | None,
                  largest: int, robust: bool = True) -> list[str]:
    """Between the runs of a group: whether each run's median gives the same whole number of round trips as the
    pooled median, in how many runs; the largest size's medians per run with their interval over runs; in how many
    runs the published round trips (:data:`PUBLISHED_STEP`'s sizes of one count, :data:`PUBLISHED_AROUND_100_KB`)
    are each run's median; and where the reference's step lies in each run alone. Nothing for a run made alone."""
    if runs_table is None or runs_table.empty:
        return []
    lines = []
    columns = [c for c in runs_table.columns if str(c).startswith("run ")]
    runs = len(columns)
    disagree = _runs_disagree(runs_table)
    if not disagree:
        lines.append(f"Each of the {runs} runs' medians gives the pooled median's whole number of round trips at "
                     f"every one of the {len(runs_table)} condition × size cells ({runs} of {runs} runs at each).")
    else:
        lines.append(f"At {len(runs_table) - len(disagree)} of {len(runs_table)} condition × size cells every run's "
                     "median gives the pooled median's whole number of round trips; not at " + "; ".join(
                         f"`{key[0]}` {int(key[1])} B ({agree} of {n} runs)" for key, agree, n in disagree) + ".")
    at_largest = runs_table[runs_table.index.get_level_values(-1) == largest]
    for key, row in at_largest.iterrows():
        lines.append(f"At {largest} B, `{key[0]}`: median " + ", ".join(f"{row[c]:.3f}" for c in columns if pd.notna(row[c]))
                     + f" ping RTTs in runs 1 to {runs}; their mean {row['mean']:.3f}, 95 % Student-t interval over "
                       f"the {int(row['runs'])} runs [{row['lo']:.3f}, {row['hi']:.3f}] ({int(row['n'])} calls).")
    condition = published_condition(knobs)
    published = {size: rounds[0] for size, rounds in PUBLISHED_STEP.items() if len(rounds) == 1}
    published.update({size: PUBLISHED_AROUND_100_KB["rounds"] for size in runs_table.index.get_level_values(-1)
                      if PUBLISHED_AROUND_100_KB["from"] <= size <= PUBLISHED_AROUND_100_KB["to"]})
    parts = []
    for size, rounds in sorted(published.items()):
        if (condition, size) not in runs_table.index:
            continue
        per_run = runs_table.loc[(condition, size), columns].dropna().round()
        parts.append(f"{_trips(rounds)} at {int(size)} B in {int((per_run == rounds).sum())} of {len(per_run)} runs")
    if parts:
        lines.append(f"Run by run, the published round trips are the median under `{condition}`: " + "; ".join(parts)
                     + " (each run's median in ping RTTs, rounded).")
    if reference is not None and "replicate" in calls:
        by_run = step_by_run(calls, reference, robust)
        places = pd.Series({r: (f.params["last_before"], f.params["first_after"]) for r, f in by_run.items()})
        if len(places):
            common = places.mode().iat[0]
            same = int((places == common).sum())
            lines.append(f"Each run alone, the change point of `{reference}` lies between {common[0]:.0f} and "
                         f"{common[1]:.0f} B in {same} of {len(places)} runs" + ("" if same == len(places) else "; " + ", ".join(
                             f"run {r}: {p[0]:.0f}–{p[1]:.0f} B" for r, p in places.items() if p != common)) + ".")
    return lines


def data_needs_findings(short: dict, halfwidth: float) -> list[str]:
    """:func:`labkit.analysis.data_needs_in_short` as a sentence."""
    if not short["groups"]:
        return []
    return [f"{short['short']} of the {short['groups']} condition × size cells have fewer calls than a ±{halfwidth:g} "
            f"RTT interval of the median needs (the most wanted: {short['most_wanted']}); {short['percentile_allowed']} "
            "have enough for a p99."]
