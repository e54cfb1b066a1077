"""What the link emulator (``labkit-go link``) exports, read back: its status, and its summary over a time window.

The emulator writes, in the testbed's state directory:

- ``link-stats.jsonl``: a line for every second with activity, per direction (``a>b``): wire
  packets in and out, drops by cause (partition, loss, queue, aqm, write), duplicates,
  reorders, the queue's peak, the queue's wait per millisecond of arrival (``sojourn``: the longest wait of the
  packets that arrived in it), and a histogram of how late packets left (µs buckets, 1 µs
  wide below 100 µs), and the schedule's changes applied in that second;
- ``link-status.json``: the parameters in effect, totals since start, lateness since start,
  and per host whether its tap stamps packets at their send (``send_stamps``: how many, and
  how long they waited to be read).

Every experiment run on a testbed records :func:`window_summary` over its own time window in
its manifest (``emulator``), and ``labkit report`` flags a run during which the emulator was
late by more than :func:`late_threshold_us` at p99.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

STATS_FILE = "link-stats.jsonl"
STATUS_FILE = "link-status.json"
DROP_CAUSES = ("partition", "loss", "queue", "aqm", "write")
#: The report's rule: late by more than max(50 µs, 1 % of the one-way delay) at p99.
LATE_FLOOR_US = 50.0
LATE_FRACTION = 0.01


def read_status(state_dir: str | Path) -> dict | None:
    try:
        return json.loads((Path(state_dir) / STATUS_FILE).read_text())
    except (OSError, ValueError):
        return None


def status_after(state_dir: str | Path, t_utc_ns: int, timeout_s: float = 3.0) -> dict | None:
    """The status once the emulator has written everything up to ``t_utc_ns`` (it writes every second)."""
    deadline = time.monotonic() + timeout_s
    while True:
        status = read_status(state_dir)
        if (status and status.get("t_utc_ns", 0) >= t_utc_ns) or time.monotonic() > deadline:
            return status
        time.sleep(0.05)


def bucket_width_us(lower: int) -> int:
    """Width of the histogram bucket starting at ``lower`` µs (as go/internal/linkpath/hist.go)."""
    for limit, width in ((100, 1), (1000, 10), (10000, 100), (100000, 1000)):
        if lower < limit:
            return width
    return 10000


def hist_quantile_us(hist: dict[int, int], q: float, max_us: float | None = None) -> float | None:
    """The upper bound of the bucket holding quantile ``q`` (at most the exact maximum), or None when empty."""
    total = sum(hist.values())
    if not total:
        return None
    rank = int(q * (total - 1)) + 1
    seen = 0
    for lower in sorted(hist):
        seen += hist[lower]
        if seen >= rank:
            upper = float(lower + bucket_width_us(lower))
            return min(upper, max_us) if max_us is not None else upper
    return None


def late_threshold_us(one_way_delay_ns: int) -> float:
    return max(LATE_FLOOR_US, LATE_FRACTION * one_way_delay_ns / 1e3)


def read_lines(stats_path: str | Path, start_ns: int, end_ns: int) -> list[dict]:
    """The per-second lines overlapping [start_ns, end_ns] (a line covers the second before its time)."""
    lines = []
    try:
        with open(stats_path) as handle:
            for raw in handle:
                try:
                    line = json.loads(raw)
                except ValueError:
                    continue  # a line being written
                t = line.get("t_utc_ns", 0)
                if t > start_ns and t - 1_000_000_000 < end_ns:
                    lines.append(line)
    except OSError:
        return []
    return lines


def queue_waits(stats_path: str | Path, start_ns: int, end_ns: int, directions: list[str]) -> list[tuple[str, int, float]]:
    """``(direction, t_ms, wait_us)`` for every millisecond in [start_ns, end_ns] in which packets arrived at a
    direction's queue: the longest any of them waited there before its transmission started (UTC ms since the
    epoch; the emulator's per-second ``sojourn``). A FIFO queue makes every packet that arrives in the same
    millisecond wait about as long: a call's own wait, in each direction, is read at its packets' arrival."""
    waits = []
    low, high = start_ns // 1_000_000, end_ns // 1_000_000
    for line in read_lines(stats_path, start_ns, end_ns):
        for key in directions:
            sojourn = (line.get("d", {}).get(key) or {}).get("sojourn") or {}
            waits += [(key, t, wait) for t, wait in zip(sojourn.get("t_ms", []), sojourn.get("wait_us", []))
                      if low <= t <= high]
    return sorted(waits, key=lambda row: (row[0], row[1]))


def _empty_direction() -> dict:
    return {"in": 0, "out": 0, "in_bytes": 0, "out_bytes": 0, "drops": dict.fromkeys(DROP_CAUSES, 0),
            "duplicated": 0, "reordered": 0, "queue_peak_packets": 0, "queue_peak_bytes": 0,
            "hist": {}, "max_us": 0.0, "seconds": 0}


def _add_second(total: dict, second: dict) -> None:
    for key in ("in", "out", "in_bytes", "out_bytes"):
        total[key] += second.get(key, 0)
    for cause in DROP_CAUSES:
        total["drops"][cause] += second.get("drop", {}).get(cause, 0)
    total["duplicated"] += second.get("dup", 0)
    total["reordered"] += second.get("reorder", 0)
    total["queue_peak_packets"] = max(total["queue_peak_packets"], second.get("queue_peak_packets", 0))
    total["queue_peak_bytes"] = max(total["queue_peak_bytes"], second.get("queue_peak_bytes", 0))
    late = second.get("late", {})
    for lower, count in late.get("hist", {}).items():
        total["hist"][int(lower)] = total["hist"].get(int(lower), 0) + count
    total["max_us"] = max(total["max_us"], late.get("max_us", 0.0))
    total["seconds"] += 1


def window_summary(stats_path: str | Path, start_ns: int, end_ns: int, delays_ns: dict[str, int]) -> dict:
    """The emulator over [start_ns, end_ns]: per direction counters, lateness p50/p99/max and whether it
    was late (``delays_ns``: each direction's one-way delay, for the threshold), and the changes applied."""
    directions: dict[str, dict] = {}
    events: list[dict] = []
    for line in read_lines(stats_path, start_ns, end_ns):
        for key, second in line.get("d", {}).items():
            _add_second(directions.setdefault(key, _empty_direction()), second)
        events += [e for e in line.get("events", []) if start_ns <= e.get("due_utc_ns", 0) <= end_ns]
    late_directions = []
    for key, total in directions.items():
        hist = total.pop("hist")
        threshold = late_threshold_us(delays_ns.get(key, 0))
        p99 = hist_quantile_us(hist, 0.99, total["max_us"])
        total.update(lateness_n=sum(hist.values()), lateness_p50_us=hist_quantile_us(hist, 0.5, total["max_us"]),
                     lateness_p99_us=p99, late_threshold_us=threshold, late=p99 is not None and p99 > threshold)
        if total["late"]:
            late_directions.append(key)
    return {"start_utc_ns": start_ns, "end_utc_ns": end_ns, "stats_file": str(stats_path),
            "directions": directions, "events": events, "late_directions": sorted(late_directions)}


def late_messages(manifest: dict) -> list[str]:
    """One line per recorded window during which the emulator was late, for the report."""
    messages = []
    for window in (manifest.get("emulator") or {}).get("windows", []):
        for key in window.get("late_directions", []):
            d = window["directions"][key]
            messages.append(
                f"the link emulator was late on {key.replace('>', '->')}: p99 {d['lateness_p99_us']:.0f} µs "
                f"(> {d['late_threshold_us']:.0f} µs allowed) over {d['lateness_n']} packets; the link's delays "
                "in this run are not the configured ones"
            )
    return messages


def run_window(testbed: dict | None, start_ns: int, end_ns: int) -> dict | None:
    """What a run records of the emulator: its summary over the run's window, when the inventory is a
    testbed's (``testbed`` is its ``[testbed]`` table), else None.

    The emulator writes each second once it has passed; the window is covered up to the status
    file's last write (``covered_until_utc_ns``), which may leave out the run's last second.
    """
    if not testbed or not testbed.get("link_stats"):
        return None
    state_dir = Path(testbed.get("state_dir") or Path(testbed["link_stats"]).parent)
    delays = {}
    try:
        config = json.loads((state_dir / "link.json").read_text())
        delays = {f"{d['from']}>{d['to']}": d["params"]["delay_ns"] for d in config["directions"]}
    except (OSError, ValueError, KeyError):
        pass
    summary = window_summary(testbed["link_stats"], start_ns, end_ns, delays)
    status = read_status(state_dir) or {}
    summary.update(testbed=testbed.get("name"), links=testbed.get("links"), seed=status.get("seed"),
                   covered_until_utc_ns=status.get("t_utc_ns"), realtime=status.get("realtime"),
                   # whether a host's delays count from its send (its tap) or from the emulator's read
                   send_stamps={host: bool(s.get("tap")) for host, s in (status.get("send_stamps") or {}).items()})
    return summary
