"""What a load adds to each probe's latency, per direction, and the responsiveness left under it
(``labkit latency-under-load``; :mod:`labkit.experiments.latency_under_load`).

For each condition (queue, congestion control, load) and probe, the probes sent **before** the load are the
baseline and those **during** it (its ramp, while the queue fills, left out) the loaded sample. Both are
time-ordered, so the added latency (median during − median before) has a block-bootstrap interval
(:func:`labkit.analysis.inference.block_bootstrap_difference`), and the many comparisons of one run share one Holm
family. A probe its server stamps is also split by direction (:mod:`labkit.analysis.oneway`): the way out and the
way back each get their own added latency, which says in which direction the queue was.

**Responsiveness** is the IETF draft's figure (draft-ietf-ippm-responsiveness): round trips per minute,
60000 / the trimmed mean of the round trips in ms, the trimmed mean leaving out the values above the 95th
percentile. The draft combines HTTP probes on new connections and on the loaded ones; labkit gives the figure per
probe (ping, a warm gRPC call, a raw TCP echo), which is what each kind of request would see.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from labkit.analysis.inference import adjust, block_bootstrap_difference
from labkit.analysis.oneway import clock_offset, one_way, raw_one_way

CONDITION = ["queue", "cc", "load"]
#: The way of the client-server path each load fills (tcp-both fills both).
LOADED_WAY = {"tcp-up": "out", "grpc-up": "out", "tcp-down": "back"}
#: Each measure of a probe: its round trip, and for a stamped probe its way out and way back.
MEASURES = {"rtt": "rtt_ms", "out": "out_ms", "back": "back_ms"}


def trimmed_mean_95(values) -> float:
    """The mean of the values at or below their 95th percentile (the draft's TM); NaN when there are none."""
    array = np.asarray(values, dtype=float)
    array = array[np.isfinite(array)]
    if not array.size:
        return float("nan")
    return float(array[array <= np.percentile(array, 95)].mean())


def responsiveness_rpm(rtts_ms) -> float:
    """Round trips per minute: 60000 / the 95 % trimmed mean of the round trips (ms)."""
    return 60000.0 / trimmed_mean_95(rtts_ms)


def with_one_way(samples: pd.DataFrame, shared_clock: bool):
    """Every ok row, with ``out_ms`` and ``back_ms`` where its server stamped it (NaN elsewhere), and the clocks'
    offset they rest on, taken from the probes sent without the load (before and after it): their floor is the
    path's own, so the bound is tightest there."""
    ok = samples[samples["ok"] & ~samples["duplicate"]]
    idle = ok[ok["phase"].isin(["before", "after"])]
    offset = clock_offset(raw_one_way(idle), shared_clock)
    ways = one_way(ok, offset)[["out_ms", "back_ms"]]
    return ok.join(ways), offset


def added_latency(samples: pd.DataFrame, shared_clock: bool, seed: int = 0) -> pd.DataFrame:
    """Per condition, probe and measure (``rtt``, ``out``, ``back``): n and median before and during the load, the
    added latency with its 95 % interval and Holm-adjusted p-value, and for the round trip the responsiveness
    before and during (RPM). Rows without a value (a measure the probe lacks) are left out."""
    rows = []
    if samples.empty:
        return pd.DataFrame()
    ok, offset = with_one_way(samples, shared_clock)
    ok = ok.sort_values("t_utc_ns")
    for key, group in ok.groupby([*CONDITION, "probe"], sort=False, dropna=False):
        before, during = group[group["phase"] == "before"], group[group["phase"] == "during"]
        for measure, column in MEASURES.items():
            a, b = before[column].dropna().to_numpy(float), during[column].dropna().to_numpy(float)
            if not (a.size and b.size):
                continue
            difference = block_bootstrap_difference(a, b, np.median, seed=seed)
            row = dict(zip([*CONDITION, "probe"], key), measure=measure, n_before=int(a.size), n_during=int(b.size),
                       before_ms=float(np.median(a)), during_ms=float(np.median(b)), added_ms=difference.difference,
                       added_low_ms=difference.low, added_high_ms=difference.high, p=difference.pvalue,
                       method=difference.method, clock=offset.method, clock_bound_ms=offset.bound_ms)
            if measure == "rtt":
                row.update(rpm_before=responsiveness_rpm(a), rpm_during=responsiveness_rpm(b))
            rows.append(row)
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    testable = table["p"].notna()
    table["p_holm"] = np.nan
    if testable.any():
        table.loc[testable, "p_holm"] = adjust(table.loc[testable, "p"].to_list(), "holm")[1]
    return table


def queue_table(cell_events: list[dict]) -> pd.DataFrame:
    """Per cell and direction of the link, from the cells' complete events (a testbed's run): the queue's limit as
    the time it takes to drain at the link's rate, how full the load made it (its peak, as the same time), the
    drops by cause, and the load's own goodput. What the probes' added latency is to be read against: a droptail
    queue that fills adds about its drain time to every packet behind it."""
    rows = []
    for event in cell_events:
        if event.get("event") != "complete":
            continue
        condition = dict(part.split("=", 1) for part in event["cell"].split("|")[1:])
        for direction, link in (event.get("link") or {}).items():
            rate = link.get("rate_bps")
            peak = link.get("queue_peak_bytes")
            rows.append({**{key: condition.get(key) for key in CONDITION}, "direction": direction,
                         "aqm": link.get("aqm"), "drain_ms": link.get("drain_ms"),
                         "peak_ms": peak * 8e3 / rate if rate and peak is not None else None,
                         "drops": sum((link.get("drops") or {}).values()),
                         "load_sent_mbps": (event.get("load_sent_bps") or 0) / 1e6 or None})
    return pd.DataFrame(rows)


#: What "changes little" means for a probe's transport: the added latencies of the probes of one condition and
#: direction differ by less than this share of the largest of them (and less than the base RTT's fifth).
SAME_SHARE = 0.1
#: CoDel's target (RFC 8289: the standing queue's sojourn time it holds a queue to) and the most a probe's round trip
#: may rise under it for ``codel_target``: three targets, the queue on one way and what the hosts add.
CODEL_TARGET_MS = 5.0
CODEL_MOST_MS = 15.0
#: The other way of a loaded path "moved little" when its median moved by less than this.
OTHER_WAY_MS = 5.0
#: A verdict is called where the Holm-adjusted p-value is below this.
ALPHA = 0.05


def _droptail(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[~frame["queue"].str.startswith("codel")]


def _codel(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["queue"].str.startswith("codel")]


def _loaded_ways(added: pd.DataFrame):
    """Per droptail condition with one loaded way (an upload or a download): (queue, load, the loaded way, the other
    way, its rows indexed by probe and measure)."""
    for (queue, load), group in _droptail(added).groupby(["queue", "load"]):
        if load in LOADED_WAY:  # tcp-both loads both ways: no one way to name
            loaded = LOADED_WAY[load]
            yield queue, load, loaded, "back" if loaded == "out" else "out", group.set_index(["probe", "measure"])


def _peak(queues: pd.DataFrame, queue: str, load: str) -> pd.Series | None:
    """The emulator's record of the loaded direction's queue in one condition: the row of the direction whose queue
    stood highest (its ``peak_ms``, ``drain_ms``, ``drops``); None without a record."""
    if queues.empty:
        return None
    rows = queues[(queues["queue"] == queue) & (queues["load"] == load)].dropna(subset=["peak_ms"])
    return rows.loc[rows["peak_ms"].idxmax()] if len(rows) else None


def claims(added: pd.DataFrame, queues: pd.DataFrame) -> dict[str, bool]:
    """The findings the notebook states, each a predicate on the run's own numbers:

    - ``deep_queue_way``: under droptail, each load's queue showed on the way it loads (an upload on the way out,
      a download on the way back): every stamped probe's rise there called above zero after Holm's correction over
      the run's table, and its other way's median within :data:`OTHER_WAY_MS`;
    - ``deep_queue_fill``: under droptail, what the probes' loaded way met is at least half of what the emulator saw
      the queue hold at its peak (the queue they waited in was the link's);
    - ``drain_time``: under droptail, the classic account holds: every stamped probe's loaded way rose by the
      queue's whole drain time, its 95 % interval reaching it;
    - ``codel_target``: under CoDel, no probe's round trip rose by more than :data:`CODEL_MOST_MS`;
    - ``codel_responsiveness``: under the same load, every probe kept more than twice the round trips per minute
      under CoDel that it kept under droptail;
    - ``transport_little``: under droptail, the probes' added round trips differ by less than :data:`SAME_SHARE` of
      the largest, ping, gRPC and TCP alike."""
    rtt = added[added["measure"] == "rtt"] if len(added) else added
    if added.empty:
        return dict.fromkeys(["deep_queue_way", "deep_queue_fill", "drain_time", "codel_target",
                              "codel_responsiveness", "transport_little"], False)
    droptail, codel = _droptail(rtt), _codel(rtt)
    way_ok, fill_ok, drain_ok = [], [], []
    for queue, load, loaded, other, ways in _loaded_ways(added):
        stamped = [probe for probe, measure in ways.index if measure == loaded]
        for probe in stamped:
            row = ways.loc[(probe, loaded)]
            way_ok.append(bool(row["p_holm"] < ALPHA and row["added_ms"] > 0
                               and abs(ways.loc[(probe, other), "added_ms"]) < OTHER_WAY_MS))
        peak = _peak(queues, queue, load)
        if peak is not None and stamped:
            met = ways.loc[[(probe, loaded) for probe in stamped]]
            fill_ok.append(bool(met["added_ms"].min() >= 0.5 * peak["peak_ms"]))
            drain_ok.append(bool((met["added_high_ms"] >= peak["drain_ms"]).all()))
    spread = [g["added_ms"].max() - g["added_ms"].min() <= SAME_SHARE * g["added_ms"].abs().max()
              for _, g in droptail.groupby(["queue", "load"]) if len(g) > 1]
    responsive = []
    for (load, probe), group in rtt.groupby(["load", "probe"]):
        deep, short = _droptail(group), _codel(group)
        if len(deep) and len(short):
            responsive.append(bool(short["rpm_during"].min() > 2 * deep["rpm_during"].max()))
    return {"deep_queue_way": bool(way_ok) and all(way_ok), "deep_queue_fill": bool(fill_ok) and all(fill_ok),
            "drain_time": bool(drain_ok) and all(drain_ok),
            "codel_target": bool(len(codel)) and bool((codel["added_ms"] <= CODEL_MOST_MS).all()),
            "codel_responsiveness": bool(responsive) and all(responsive),
            "transport_little": bool(spread) and all(spread)}


def _family(added: pd.DataFrame) -> str:
    n = int(added["p"].notna().sum())
    return f"Holm's correction over the {n} comparisons of this run's table"


def _rise(row, *, digits: int = 0) -> str:
    """A rise with the interval it was tested with and its n."""
    return (f"{row['added_ms']:+.{digits}f} ms, 95 % block-bootstrap interval [{row['added_low_ms']:+.{digits}f}, "
            f"{row['added_high_ms']:+.{digits}f}], n = {int(row['n_before'])} before and {int(row['n_during'])} during")


def _span(values, digits: int = 2) -> str:
    """The least and the most of ``values`` ("0.74 to 0.76"), or the one value where they are the same as printed."""
    low, high = f"{min(values):.{digits}f}", f"{max(values):.{digits}f}"
    return low if low == high else f"{low} to {high}"


def findings(added: pd.DataFrame, queues: pd.DataFrame) -> list[str]:
    """The sentences the notebook says of a run, each only where its predicate (:func:`claims`) holds on the run's
    numbers, with those numbers, their n, the interval each verdict was taken from and the correction; the drain
    time's sentence says whether the classic account holds, either way, wherever the emulator kept the queue."""
    if added.empty:
        return []
    held = claims(added, queues)
    rtt = added[added["measure"] == "rtt"]
    lines = []
    if held["deep_queue_way"]:
        parts = []
        for queue, load, loaded, other, ways in _loaded_ways(added):
            for probe in sorted(p for p, m in ways.index if m == loaded):
                parts.append(f"{load} through droptail {queue}: {probe}'s way {loaded} "
                             f"{_rise(ways.loc[(probe, loaded)])}, its way {other} "
                             f"{ways.loc[(probe, other), 'added_ms']:+.1f} ms")
        lines.append("**The queue is in one direction, the load's**: " + "; ".join(parts) +
                     f". Each loaded way's rise is called above zero after {_family(added)}, and each other way's "
                     f"median moved by less than {OTHER_WAY_MS:g} ms.")
    for queue, load, loaded, _, ways in _loaded_ways(added):
        peak = _peak(queues, queue, load)
        stamped = sorted(p for p, m in ways.index if m == loaded)
        if peak is None or not stamped:
            continue
        met = ways.loc[[(probe, loaded) for probe in stamped]]
        share = met["added_ms"] / peak["drain_ms"]
        each = "; ".join(f"{probe} {_rise(ways.loc[(probe, loaded)])}" for probe in stamped)
        if held["deep_queue_fill"]:
            lines.append(f"**What the probes waited is what the link's queue held** ({load} through droptail {queue}): "
                         f"the emulator saw the queue peak at {peak['peak_ms']:.0f} ms of its {peak['drain_ms']:.0f} ms "
                         f"limit ({int(peak['drops'])} drops), and the probes' way {loaded} rose by "
                         f"{_span(met['added_ms'] / peak['peak_ms'])} of that peak.")
        if (met["added_high_ms"] >= peak["drain_ms"]).all():
            lines.append(f"**A full droptail queue adds its drain time**, as the classic account of bufferbloat has "
                         f"it, under {load} through {queue}: the way {loaded} rose by {_span(share)} of the "
                         f"{peak['drain_ms']:.0f} ms drain time, every 95 % interval reaching it: {each}.")
        else:
            short = met[met["added_high_ms"] < peak["drain_ms"]]
            lines.append(f"**Less than the drain time**, against the classic account of bufferbloat (a full droptail "
                         f"queue adds its whole drain time): under {load} through {queue} the way {loaded} rose by "
                         f"{_span(share)} of the {peak['drain_ms']:.0f} ms drain time, the 95 % interval of "
                         f"{len(short)} of its {len(met)} stamped probes below it: {each}.")
    if held["codel_target"]:
        worst = _codel(rtt).sort_values("added_ms").iloc[-1]
        lines.append(f"**CoDel keeps the same buffer short**: no probe's round trip rose by more than "
                     f"{CODEL_MOST_MS:g} ms, three times its {CODEL_TARGET_MS:g} ms target (the most: {worst['probe']} "
                     f"under {worst['load']} through {worst['queue']}: {_rise(worst, digits=1)}).")
    if held["codel_responsiveness"]:
        deep, short = _droptail(rtt), _codel(rtt)
        lines.append(f"**CoDel keeps the path responsive**: under load every probe kept "
                     f"{_span(short['rpm_during'], 0)} round trips per minute through CoDel (n = "
                     f"{_span(short['n_during'], 0)} each), against {_span(deep['rpm_during'], 0)} through droptail "
                     f"(n = {_span(deep['n_during'], 0)}) and {_span(rtt['rpm_before'], 0)} before the load, more "
                     "than twice droptail's for every probe and load (the IETF draft's RPM: 60000 over the 95 % "
                     "trimmed mean of the round trips in ms).")
    if held["transport_little"]:
        parts = []
        for (queue, load), group in _droptail(rtt).groupby(["queue", "load"]):
            rises = ", ".join(f"{r.probe} {r.added_ms:+.0f} ms (n = {r.n_during})"
                              for r in group.sort_values("probe").itertuples())
            parts.append(f"{load} through {queue}: {rises}")
        lines.append(f"**The probe's own transport changes little**: under droptail, ping, gRPC and the raw TCP "
                     f"echo gained round trips within {SAME_SHARE:.0%} of the largest ({'; '.join(parts)}): a shared "
                     "queue delays every packet behind it alike.")
    return lines


def explained_findings(explained: pd.DataFrame) -> list[str]:
    """What ``labkit explain`` says of the probes under load (:func:`explained_under_load`): per droptail condition
    with one loaded way, in how many of its explained probes the cause is queueing in that way, and from which
    evidence. Nothing where no probe under load was explained."""
    if explained.empty:
        return []
    lines = []
    for (queue, load), group in _droptail(explained).groupby(["queue", "load"]):
        if load not in LOADED_WAY:
            continue
        way = LOADED_WAY[load]
        named = int(((group["cause"] == "queueing") & (group["queued"] == way)).sum())
        evidence = ", ".join(f"{n} from {e}" for e, n in group["evidence"].value_counts().items())
        lines.append(f"Under {load} through droptail {queue}, {named} of the {len(group)} explained probes are "
                     f"queueing on the way {way}, the load's ({evidence}).")
    return lines


def explained_under_load(explained: pd.DataFrame, samples: pd.DataFrame) -> pd.DataFrame:
    """The explained probes (:func:`labkit.explain.explain_run` rows) sent while the load ran (its ramp left out),
    each with its ``condition`` (queue and load) and the direction it queued in (``queued``: out, back, both, or
    none)."""
    keys = ["cell_id", "probe", "seq"]
    probes = samples.drop_duplicates(keys).set_index(keys)[["phase", "queue", "load"]]
    joined = explained.join(probes, on=keys)
    loaded = joined[joined["phase"] == "during"].copy()
    loaded["condition"] = loaded["queue"] + ", " + loaded["load"]
    loaded["queued"] = loaded["queue_direction"].fillna("none")
    return loaded


def answered_or_lost(samples: pd.DataFrame) -> pd.DataFrame:
    """The rows a timeline draws: every probe sent, answered or lost; a tick skipped because the probe's previous
    call was still in flight is neither a sample nor a loss."""
    return samples[~samples["error"].fillna("").str.startswith("skipped")]


def ways_long(samples: pd.DataFrame, shared_clock: bool, probe: str, client: str, server: str) -> pd.DataFrame:
    """One probe's way out and way back as rows (``way``: ``client → server`` or back, ``ms``), for a timeline."""
    ways, _ = with_one_way(samples, shared_clock)
    long = ways[ways["probe"] == probe].melt(id_vars=["cell_id", "t_offset_s", "ok", "queue", "load"],
                                             value_vars=["out_ms", "back_ms"], var_name="way", value_name="ms")
    long["way"] = long["way"].map({"out_ms": f"{client} → {server}", "back_ms": f"{server} → {client}"})
    return long


def headline(added: pd.DataFrame, held: dict[str, bool]) -> dict[str, object]:
    """The notebook's headline numbers: each condition's and probe's added round trip, its n under load and RPM,
    and each claim."""
    rtt = added[added["measure"] == "rtt"]
    numbers: dict[str, object] = {}
    for r in rtt.itertuples():
        key = f"{r.queue}.{r.load}.{r.probe}"
        numbers.update({f"added_ms.{key}": round(r.added_ms, 3), f"n_during.{key}": int(r.n_during),
                        f"rpm_during.{key}": round(r.rpm_during, 1)})
    return {**numbers, **{f"claim.{name}": value for name, value in held.items()}}
