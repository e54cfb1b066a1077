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


def claims(added: pd.DataFrame, queues: pd.DataFrame) -> dict[str, bool]:
    """The findings the notebook states, each a predicate on the run's own numbers (tested on the shipped sample):

    - ``deep_queue_way``: under droptail, each load's queue showed on the way it loads (an upload on the way out,
      a download on the way back), every stamped probe's interval above zero there and its other way within 5 ms;
    - ``deep_queue_fill``: under droptail, what the probes' way met is at least half of what the emulator saw the
      queue hold at its peak (the queue they waited in was the link's);
    - ``codel_target``: under CoDel, no probe's round trip rose by more than 15 ms;
    - ``transport_little``: under droptail, the probes' added round trips differ by less than
      :data:`SAME_SHARE` of the largest, ping, gRPC and TCP alike."""
    rtt = added[added["measure"] == "rtt"]
    droptail = rtt[~rtt["queue"].str.startswith("codel")]
    codel = rtt[rtt["queue"].str.startswith("codel")]
    way_ok, fill_ok = [], []
    for (queue, load), group in added[~added["queue"].str.startswith("codel")].groupby(["queue", "load"]):
        if load not in LOADED_WAY:
            continue  # both ways loaded: no one way to name
        loaded = LOADED_WAY[load]
        other = "back" if loaded == "out" else "out"
        ways = group.set_index(["probe", "measure"])
        for probe in group.loc[group["measure"] == loaded, "probe"]:
            way_ok.append(ways.loc[(probe, loaded), "added_low_ms"] > 0 and abs(ways.loc[(probe, other), "added_ms"]) < 5)
        if not queues.empty:
            direction = queues[(queues["queue"] == queue) & (queues["load"] == load)]
            peak = direction["peak_ms"].max()
            met = group.loc[group["measure"] == loaded, "added_ms"]
            fill_ok.append(bool(len(met)) and peak == peak and met.min() >= 0.5 * peak)
    spread = [g["added_ms"].max() - g["added_ms"].min() <= SAME_SHARE * g["added_ms"].abs().max()
              for _, g in droptail.groupby(["queue", "load"]) if len(g) > 1]
    return {"deep_queue_way": bool(way_ok) and all(way_ok), "deep_queue_fill": bool(fill_ok) and all(fill_ok),
            "codel_target": bool(len(codel)) and bool((codel["added_ms"] <= 15).all()),
            "transport_little": bool(spread) and all(spread)}


def findings(added: pd.DataFrame, queues: pd.DataFrame) -> str:
    """The sentences the notebook says of a run, each only where its predicate (:func:`claims`) holds on the run's
    numbers, with those numbers, their n and intervals."""
    held = claims(added, queues)
    rtt = added[added["measure"] == "rtt"]
    lines = []
    if held["deep_queue_way"]:
        parts = []
        for (queue, load), group in added[~added["queue"].str.startswith("codel")].groupby(["queue", "load"]):
            if load not in LOADED_WAY:
                continue
            way = LOADED_WAY[load]
            row = group[(group["measure"] == way)].sort_values("probe").iloc[0]
            parts.append(f"{load} through droptail {queue}: {row['probe']}'s way {way} +{row['added_ms']:.0f} ms "
                         f"[{row['added_low_ms']:.0f}, {row['added_high_ms']:.0f}] (n = {row['n_before']} before, "
                         f"{row['n_during']} during)")
        lines.append("- **The queue is in one direction, the load's.** " + "; ".join(parts) +
                     "; the other way moved by less than 5 ms.")
    if held["deep_queue_fill"]:
        deep = queues[~queues["queue"].str.startswith("codel")]
        peaks = deep.groupby(["queue", "load"])[["peak_ms", "drain_ms"]].max()
        lines.append("- **What the probes waited is what the link's queue held**: at least half of its peak as the "
                     "emulator recorded it (" + ", ".join(
                         f"{q} {l}: peak {row.peak_ms:.0f} ms of the {row.drain_ms:.0f} ms a full queue takes to drain"
                         for (q, l), row in peaks.iterrows()) + f"; drops {int(deep['drops'].sum())}): a standing "
                     "queue adds most of its drain time to every packet behind it, never more.")
    if held["codel_target"]:
        worst = rtt[rtt["queue"].str.startswith("codel")].sort_values("added_ms").iloc[-1]
        lines.append(f"- **CoDel keeps the same buffer short**: no probe's round trip rose by more than 15 ms (the "
                     f"most: {worst['probe']} under {worst['load']}, +{worst['added_ms']:.1f} ms "
                     f"[{worst['added_low_ms']:.1f}, {worst['added_high_ms']:.1f}], n = {worst['n_during']}).")
    if held["transport_little"]:
        deep = rtt[~rtt["queue"].str.startswith("codel")]
        counts = ", ".join(f"{probe} n = {n}" for probe, n in deep.groupby("probe")["n_during"].min().items())
        lines.append(f"- **The probe's own transport changes little**: under droptail, ping, gRPC and the raw TCP "
                     f"echo gained round trips within {SAME_SHARE:.0%} of each other ({counts} under load, the "
                     "fewest of any condition): a shared queue delays every packet behind it alike.")
    return "\n".join(lines) or "This run shows none of the classic findings: read the tables above."


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
