"""One-way delays: each probe's round trip split into its way out (client → server) and its way back.

Every labkit echo server stamps, on its own wall clock, when it received a probe and when its reply left
(:mod:`labkit.echo.stamps`; irtt's server does the same). With the client's wall clock at the send (``t_utc_ns``)
and at the reply's arrival (``t_utc_ns`` + the round trip), a probe's stamps give

    out'  = server_recv − send      = out  + θ
    back' = arrival − server_send   = back − θ

where θ is the server's clock less the client's. Their sum, less the server's own time, is the round trip, which
needs no common clock; the split needs θ.

- **One clock.** Hosts on one kernel (the testbed's namespaces: the same ``boot_id`` in their facts) read one
  wall clock: θ = 0 exactly, and the one-way delays are as exact as the stamps.
- **Two clocks.** θ is bounded by the probes themselves, as NTP and OWAMP bound it: no delay is negative, so
  every probe gives −back'ᵢ ≤ θ ≤ out'ᵢ, and all of them together θ ∈ [max(−back'), min(out')], an interval
  as wide as the smallest out' plus the smallest back' (the path's floor, out and back). labkit takes its
  middle, which is right when the floor is the same each way (the minimum-RTT assumption), and gives every
  one-way figure the interval's half-width as its bound: an asymmetric floor moves the split by up to that
  much, never more. Clock drift over the run widens it further; the hosts' clock-sync state is in their facts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from labkit.analysis.inference import block_bootstrap, method_for, runs_t_interval

#: The probes whose server stamps its side of each call.
STAMPED = ("server_recv_utc_ns", "server_send_utc_ns")


@dataclass(frozen=True)
class ClockOffset:
    """θ, the server's clock less the client's, in ms: ``offset_ms`` ± ``bound_ms``, how it was had (``method``:
    ``one clock`` or ``probe bounds``) and from how many probes (``n``; 0 for one clock)."""

    offset_ms: float
    bound_ms: float
    method: str
    n: int

    def describe(self) -> str:
        if self.method == "one clock":
            return "one clock (the hosts share a kernel): one-way delays exact"
        return f"clock offset {self.offset_ms:+.3f} ms ± {self.bound_ms:.3f} ms (bounds from {self.n} probes)"


def share_a_clock(manifest: dict[str, Any], client: str, server: str) -> bool:
    """Whether two hosts of a run read one wall clock: the same kernel, by the ``boot_id`` their facts recorded
    (network namespaces of one machine). False when either is unknown: two clocks is the safe assumption."""
    if client == server:
        return True
    hosts = manifest.get("hosts") or {}
    ids = [((hosts.get(name) or {}).get("clock") or {}).get("boot_id") for name in (client, server)]
    return ids[0] is not None and ids[0] == ids[1]


def raw_one_way(frame: pd.DataFrame, start: str = "t_utc_ns", rtt_ms: str = "rtt_ms") -> pd.DataFrame:
    """``out_raw_ms`` and ``back_raw_ms`` of every row with both server stamps and a round trip (others dropped):
    the one-way delays with the clock offset still in them (+θ out, −θ back). Pure."""
    have = frame.dropna(subset=[*STAMPED, start, rtt_ms])
    have = have[have["ok"]] if "ok" in have.columns else have
    send = have[start].astype("int64")
    arrival_ms = (send - have["server_send_utc_ns"].astype("int64")) / 1e6 + have[rtt_ms].astype(float)
    return have.assign(out_raw_ms=(have["server_recv_utc_ns"].astype("int64") - send) / 1e6, back_raw_ms=arrival_ms)


def clock_offset(raw: pd.DataFrame, shared: bool) -> ClockOffset:
    """θ for the rows of :func:`raw_one_way` (one client and one server): 0 on one clock, else the middle of the
    interval every probe's stamps allow, with its half-width as the bound."""
    if shared:
        return ClockOffset(0.0, 0.0, "one clock", 0)
    if raw.empty:
        return ClockOffset(float("nan"), float("nan"), "probe bounds", 0)
    low, high = float((-raw["back_raw_ms"]).max()), float(raw["out_raw_ms"].min())
    # low > high only when a stamp is wrong or a clock stepped during the run: no θ fits every probe, and the
    # bound says so by being negative-width, which one_way_summary reports as it is.
    return ClockOffset((low + high) / 2, (high - low) / 2, "probe bounds", len(raw))


def one_way(frame: pd.DataFrame, offset: ClockOffset, start: str = "t_utc_ns", rtt_ms: str = "rtt_ms") -> pd.DataFrame:
    """The stamped rows with ``out_ms`` and ``back_ms``: client → server and back, θ taken out. Pure."""
    raw = raw_one_way(frame, start, rtt_ms)
    return raw.assign(out_ms=raw["out_raw_ms"] - offset.offset_ms, back_ms=raw["back_raw_ms"] + offset.offset_ms)


def _location(values: np.ndarray, seed: int) -> tuple[float, float, float, str]:
    """The median with a block-bootstrap interval (time-ordered probes), or the mean with Student's t below the
    bootstrap's minimum, as :func:`labkit.analysis.inference.method_for` says."""
    method = method_for(values.size)
    if method != "bootstrap":
        mean, low, high = runs_t_interval(values)
        return mean, low, high, method
    low, high = block_bootstrap(values, np.median, seed=seed)
    return float(np.median(values)), low, high, "block bootstrap"


def one_way_summary(frame: pd.DataFrame, offset: ClockOffset, by: str = "probe", start: str = "t_utc_ns",
                    seed: int = 0) -> pd.DataFrame:
    """Per ``by`` (a probe): n, the median way out and way back and their difference (back − out), each with its
    95 % interval over the time-ordered probes, and the clock's bound, which every one-way figure carries (the
    difference moves by twice θ's error: its bound is twice as wide). Rows in time order within each group."""
    rows = []
    for key, group in one_way(frame, offset, start).groupby(by, sort=True):
        group = group.sort_values(start)
        row: dict[str, Any] = {by: key, "n": len(group)}
        for name, values in (("out", group["out_ms"]), ("back", group["back_ms"]),
                             ("back_minus_out", group["back_ms"] - group["out_ms"])):
            value, low, high, method = _location(values.to_numpy(float), seed)
            row.update({f"{name}_ms": value, f"{name}_low_ms": low, f"{name}_high_ms": high})
        row.update(method=method, clock=offset.method, clock_bound_ms=offset.bound_ms)
        rows.append(row)
    return pd.DataFrame(rows)
