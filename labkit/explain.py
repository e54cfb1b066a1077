"""``labkit explain``: a run's calls, each cut into round trips (:mod:`labkit.analysis.explain`), from its captures or state.

This module reads a run: its rows, whichever experiment wrote them, become
*calls* (when each started, how long it took, where it went, whether it
opened its connection, what the server said it spent, the TCP state around
it); its captures (``--capture``, recorded in the manifest by
:mod:`labkit.experiments.capture`) become one table of packets, each
attributed to the call it belongs to, kept as ``packets.parquet``
(:data:`labkit.schemas.PACKETS_SCHEMA`). :func:`explain_run` then explains every
call: with its packets where the capture has them, with the kernel's rules on
its TCP state where not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pandas as pd

from labkit.analysis.explain import COMPONENTS, Context, QueueWait, attribute_packets, explain_call
from labkit.errors import LabkitError
from labkit.parsers.base import ParseError
from labkit.parsers.pcap import parse_pcap
from labkit.units import format_size

#: Which captured port each kind of call went to: a series probe or an upload transport -> the server's port name.
PORT_OF = {"echo-warm": "grpc", "echo-cold": "grpc", "tcp-echo": "tcp_echo", "tcp-connect": "tcp_echo",
           "grpc": "grpc", "http2": "http2"}
PACKETS_FILE = "packets.parquet"


def run_calls(run) -> pd.DataFrame:
    """The run's calls in one shape, whatever the experiment: ``cell_id``, ``seq``, ``probe``, ``src``, ``dst``,
    ``t_start_utc_ns``, ``rtt_ns``, ``cold``, ``payload_bytes``, ``server_ns``, ``port`` (the name of the server port
    it went to), ``ssai``, and the TCP state columns where the rows have them. Rows without a time (lost probes,
    pings, failed calls) are left out: there is nothing to explain."""
    samples = run.samples()
    experiment = run.manifest.get("experiment")
    if experiment == "idle-step":
        calls = samples.assign(probe="echo", port="grpc")
    elif experiment in ("series", "latency-under-load"):
        calls = samples[samples["probe"].isin([p for p in PORT_OF if p.startswith(("echo", "tcp"))])]
        calls = calls.assign(t_start_utc_ns=calls["t_utc_ns"], rtt_ns=calls["rtt_ms"] * 1e6,
                             port=calls["probe"].map(PORT_OF))
    elif experiment == "upload":
        calls = samples.assign(probe=samples["transport"], port=samples["transport"].map(PORT_OF),
                               rtt_ns=samples["seconds"] * 1e9, payload_bytes=samples["file_bytes"], cold=False)
    else:
        raise LabkitError(f"{run.run_id} is a {experiment!r} run; labkit explain reads sweep, series, "
                          "latency-under-load and upload runs")
    calls = _with_previous_call(calls)
    calls = calls[calls["ok"].astype(bool) & calls["rtt_ns"].notna() & calls["t_start_utc_ns"].notna()].copy()
    calls["ssai"] = [_ssai(run, row) for _, row in calls.iterrows()]
    for column in ("server_ns", "cold"):
        if column not in calls:
            calls[column] = None if column == "server_ns" else False
    return calls.reset_index(drop=True)


def _with_previous_call(calls: pd.DataFrame) -> pd.DataFrame:
    """Each call with ``gap_ms`` since the previous call of its cell (and probe) ended, and the window that call left
    (``cwnd_after_previous``): a window smaller at the next call, after a gap longer than an RTO, was restarted."""
    calls = calls.sort_values(["cell_id", "probe", "seq"])
    previous = calls.groupby(["cell_id", "probe"], sort=False).shift()
    calls["gap_ms"] = (calls["t_start_utc_ns"] - previous["t_start_utc_ns"] - previous["rtt_ns"]) / 1e6
    calls["cwnd_after_previous"] = previous["cwnd_after"] if "cwnd_after" in calls else None
    return calls


def _ssai(run, row) -> int | None:
    """The client's tcp_slow_start_after_idle for a call: the cell's setting, else the host's as its facts say."""
    value = row.get("slow_start_after_idle")
    if value is not None and not pd.isna(value):
        return int(value)
    fact = ((run.manifest.get("hosts") or {}).get(row["src"]) or {}).get("sysctl", {}).get(
        "net.ipv4.tcp_slow_start_after_idle")
    return int(fact) if fact not in (None, "") else None


def packets_table(run, calls: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every captured packet of the run, with ``host``, ``role`` and the call it belongs to (``cell_id``, ``probe``
    and ``call``, the call's ``seq``; null for packets of no call). Only a client's captures are attributed: they
    share the clock of its calls' start times."""
    if calls is None:
        try:
            calls = run_calls(run)
        except LabkitError:  # an experiment whose rows are not calls (hop): its packets, attributed to none
            calls = None
    frames = []
    for capture in run.manifest.get("captures") or []:
        path = run.raw_dir / capture["file"]
        if not path.exists() or not path.stat().st_size:
            continue
        try:
            packets = parse_pcap(path.read_bytes(), set(capture["ports"].values())).rows
        except ParseError as exc:  # a file damaged or replaced after the run: which one, or nothing to go on
            raise LabkitError(f"{run.run_id}: capture {path}: {exc.message}") from None
        packets = packets.assign(host=capture["host"], role=capture["role"], cell_id=None, probe=None,
                                 call=pd.Series(pd.NA, index=packets.index, dtype="Int64"))
        if capture["role"] == "client" and calls is not None:
            _attribute(packets, calls, capture)
        frames.append(packets)
    if not frames:
        return pd.DataFrame(columns=["host", "role", "cell_id", "probe", "call"])
    return pd.concat(frames, ignore_index=True)


def _attribute(packets: pd.DataFrame, calls: pd.DataFrame, capture: dict) -> None:
    mine = calls[(calls["src"] == capture["host"]) & calls["port"].isin(list(capture["ports"]))]
    mine = mine.assign(server_port=mine["port"].map(capture["ports"]))
    owner = attribute_packets(packets, mine)
    found = owner >= 0
    for column, source in (("cell_id", "cell_id"), ("probe", "probe"), ("call", "seq")):
        packets.loc[found, column] = owner[found].map(mine[source]).to_numpy()


def write_packets(run) -> None:
    """packets.parquet from the run's captures, cast to PACKETS_SCHEMA."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from labkit.schemas import PACKETS_SCHEMA

    packets = packets_table(run)
    table = pa.Table.from_pandas(packets[[f.name for f in PACKETS_SCHEMA]], schema=PACKETS_SCHEMA, preserve_index=False)
    pq.write_table(table, run.path / PACKETS_FILE)


def run_packets(run) -> pd.DataFrame | None:
    """The run's packets: packets.parquet, else built from its captures (a run stopped before it wrote them); None
    without captures."""
    if not run.manifest.get("captures"):
        return None
    path = run.path / PACKETS_FILE
    return pd.read_parquet(path) if path.exists() else packets_table(run)


def recorded_queue_waits(run, queue: str | None = None) -> pd.DataFrame:
    """What every packet of the run waited in the testbed link's queues, per direction and millisecond of arrival
    (``direction``, ``t_ms``, ``wait_us``), as the run kept it (raw/queue-*.csv.gz), or only the cells of one
    ``queue`` setting (e.g. ``"10bdp"``); empty when it kept none."""
    pattern = f"queue-{queue}-*.csv.gz" if queue else "queue-*.csv.gz"
    frames = [pd.read_csv(path) for path in sorted(run.raw_dir.glob(pattern)) if path.stat().st_size]
    frames = [frame for frame in frames if len(frame)]
    if not frames:
        return pd.DataFrame(columns=["direction", "t_ms", "wait_us"])
    return pd.concat(frames, ignore_index=True).sort_values(["direction", "t_ms"], kind="stable")


#: The longest a call's first packet is looked for after the stamp that precedes it (the sender's stack, the
#: emulator's own reading of it under load): beyond it the call is taken to have met no queue on that way.
ENTRY_MS = 50


def queue_waits(run, calls: pd.DataFrame) -> list[QueueWait | None]:
    """Each call's wait in the path's queues, each way, where the run can say: from the emulator's record of every
    packet's wait (a testbed's run that kept it), read at the millisecond the request entered the client's side and
    the one the reply entered the server's; else from the server's stamps, each way's delay beyond its least for the
    same probe and hosts (the clocks' offset cancels); None for a call with neither."""
    recorded = recorded_queue_waits(run)
    by_direction = {key: (frame["t_ms"].to_numpy(), frame["wait_us"].to_numpy())
                    for key, frame in recorded.groupby("direction")}
    have_stamps = {"server_recv_utc_ns", "server_send_utc_ns"} <= set(calls.columns)
    floors = {}
    if have_stamps:
        from labkit.analysis.oneway import raw_one_way

        ways = raw_one_way(calls.assign(t_utc_ns=calls["t_start_utc_ns"], rtt_ms=calls["rtt_ns"] / 1e6))
        floors = ways.groupby(["src", "dst", "probe"])[["out_raw_ms", "back_raw_ms"]].min().to_dict("index")
    waits = []
    for _, call in calls.iterrows():
        out_key, back_key = f"{call['src']}>{call['dst']}", f"{call['dst']}>{call['src']}"
        stamped = have_stamps and pd.notna(call["server_recv_utc_ns"]) and pd.notna(call["server_send_utc_ns"])
        if out_key in by_direction and back_key in by_direction and stamped:
            waits.append(QueueWait(_wait_at(by_direction[out_key], call["t_start_utc_ns"]),
                                   _wait_at(by_direction[back_key], call["server_send_utc_ns"]), "emulator"))
        elif stamped and (call["src"], call["dst"], call["probe"]) in floors:
            floor = floors[(call["src"], call["dst"], call["probe"])]
            send, rtt_ms = int(call["t_start_utc_ns"]), call["rtt_ns"] / 1e6
            out = (int(call["server_recv_utc_ns"]) - send) / 1e6 - floor["out_raw_ms"]
            back = (send - int(call["server_send_utc_ns"])) / 1e6 + rtt_ms - floor["back_raw_ms"]
            waits.append(QueueWait(out, back, "one-way"))
        else:
            waits.append(None)
    return waits


def _wait_at(series: tuple, stamp_ns) -> float:
    """What the first packets to enter a queue at or after ``stamp_ns`` waited (ms): the call's own, or, when
    another flow's came first, theirs, which a FIFO queue makes the same to within the time between them; 0 when
    none entered within :data:`ENTRY_MS`."""
    t_ms, wait_us = series
    # The emulator labels a millisecond of its own clock with the UTC millisecond it starts in: a packet's label is
    # up to 1 ms before its arrival on the wall clock, so the search starts a millisecond before the stamp.
    stamp_ms = int(stamp_ns) // 1_000_000
    first = t_ms.searchsorted(stamp_ms - 1)
    if first == len(t_ms) or t_ms[first] > stamp_ms + ENTRY_MS:
        return 0.0
    return float(wait_us[first]) / 1e3


def explain_run(run, seq: int | None = None) -> pd.DataFrame:
    """One row per call (or per call numbered ``seq`` in each cell): ``cell_id``, ``seq``, ``probe``, ``rtt_ms``,
    ``base_rtt_ms``, ``rounds``, ``components`` ([{name, ms}]), ``cause``, ``evidence``, ``reason``."""
    from labkit.analysis.idle import request_framing

    calls = run_calls(run)
    if seq is not None:
        calls = calls[calls["seq"] == seq]
        if calls.empty:
            raise LabkitError(f"{run.run_id} has no call {seq} (its calls are numbered from 0 in each cell)")
    packets = run_packets(run)
    overhead = request_framing(calls).overhead_bytes if "bytes_acked_after" in calls else 0
    groups = {}
    if packets is not None:
        for (cell, probe, number), frame in packets.dropna(subset=["cell_id"]).groupby(["cell_id", "probe", "call"]):
            groups[(cell, probe, int(number))] = frame
    rows = []
    bases = {pair: base_rtt_ms(run, *pair) for pair in set(zip(calls["src"], calls["dst"]))}
    for (_, call), queue in zip(calls.iterrows(), queue_waits(run, calls)):
        context = Context(bases[(call["src"], call["dst"])], call["ssai"], overhead)
        own = groups.get((call["cell_id"], call["probe"], int(call["seq"])))
        result = explain_call(call.to_dict(), own.sort_values("t_ns") if own is not None else None, context, queue)
        rows.append({"cell_id": call["cell_id"], "seq": int(call["seq"]), "probe": call["probe"],
                     "payload_bytes": int(call["payload_bytes"]), **result})
    return pd.DataFrame(rows, columns=["cell_id", "seq", "probe", "payload_bytes", "rtt_ms", "base_rtt_ms", "rounds",
                                       "components", "cause", "evidence", "reason", "queue_direction",
                                       "queueing_out_ms", "queueing_back_ms"])


def base_rtt_ms(run, src: str, dst: str) -> float:
    """The path's base RTT: the minimum of the ping baseline before the run, or of a series' own ping probes."""
    ping = run.ping_baseline(src, dst) or {}
    if ping.get("rtt_min_ms"):
        return float(ping["rtt_min_ms"])
    samples = run.samples()
    if "probe" in samples:
        pings = samples[(samples["probe"] == "ping") & samples["ok"] & (samples["src"] == src)]["rtt_ms"]
        if len(pings):
            return float(pings.min())
    raise LabkitError(f"{run.run_id} has no ping of {src}-{dst} (baseline or probe): no base RTT to count round trips in")


def group_labels(explained: pd.DataFrame, by: tuple[str, ...] = ("cell",)) -> pd.Series:
    """A label per explained call from the parts named in ``by``: ``cell`` (its id without the host pair),
    ``probe``, ``size`` (its payload bytes)."""
    parts = {"cell": explained["cell_id"].str.split("|", n=1).str[-1], "probe": explained["probe"].astype(str),
             "size": explained["payload_bytes"].astype(str) + " B"}
    labels = parts[by[0]]
    for name in by[1:]:
        labels = labels + " " + parts[name]
    return labels


@dataclass(frozen=True)
class Layout:
    """Where each explained call goes in the components figure (:func:`layout`): its ``panel`` (a condition; one
    empty panel when nothing but ``x`` varies) and its place on the ``x`` axis, ``x_order`` from left to right
    (sizes ascending), the axis' ``x_label``, and the ``common`` parts every call shares, for the title."""

    panel: pd.Series
    x: pd.Series
    x_order: list[str]
    x_label: str
    common: str


def layout(explained: pd.DataFrame, by: tuple[str, ...] = ("cell",)) -> Layout:
    """Lay the groups of ``by`` (as :func:`group_labels`) out for a reader: the cell id split into its ``key=value``
    parts; what every call shares goes to the title; a size that varies (``size``, else a cell part of whole
    numbers such as ``chunk``) is the x axis in numeric order; the other parts that vary name the panels.

    A label like ``cc=cubic|ssai=0|gap=1|bg=none|ka=none 16000 B``, sixty characters set at an angle and sorted
    as text (16000 B before 1000 B), becomes the panel ``ssai=0`` and the tick ``16000B``.
    """
    parts: dict[str, pd.Series] = {}
    for name in by:
        if name == "cell":
            cells = explained["cell_id"].str.split("|", n=1).str[-1].str.split("|").map(
                lambda cell: dict(zip(_keys(cell), cell)))
            for key in dict.fromkeys(key for cell in cells for key in cell):
                parts[key] = cells.map(lambda cell, key=key: cell.get(key, ""))
        elif name == "probe":
            parts["probe"] = explained["probe"].astype(str)
        elif name == "size":
            parts["size"] = explained["payload_bytes"].map(lambda size: f"size={size}")
    varying = [key for key, values in parts.items() if values.nunique() > 1]
    common = " ".join(dict.fromkeys(parts[key].iat[0] for key in parts if key not in varying and len(parts[key])))
    numeric = [key for key in varying if parts[key].str.fullmatch(r"[^=]*=\d+").all()]
    x_key = "size" if "size" in numeric else (numeric[-1] if numeric else None)
    panels = [key for key in varying if key != x_key]
    if x_key is None:  # nothing to lay along an axis: one panel, a bar per group
        x = _joined(parts, panels, explained.index)
        return Layout(pd.Series("", index=explained.index), x, sorted(x.unique()), "", common)
    sizes = parts[x_key].str.split("=").str[-1].astype(int)
    x = sizes.map(format_size)
    x_label = "payload (bytes)" if x_key == "size" else f"{x_key} (bytes)"
    return Layout(_joined(parts, panels, explained.index), x, [format_size(s) for s in sorted(sizes.unique())],
                  x_label, common)


def _keys(cell_parts: list[str]) -> list[str]:
    """The name of each part of a cell id: the key of ``key=value``, else the part's position (``grpc``)."""
    return [part.split("=", 1)[0] if "=" in part else f"#{position}" for position, part in enumerate(cell_parts)]


def _joined(parts: dict[str, pd.Series], keys: list[str], index) -> pd.Series:
    if not keys:
        return pd.Series("", index=index)
    joined = parts[keys[0]]
    for key in keys[1:]:
        joined = joined + " " + parts[key]
    return joined


def json_lines(explained: pd.DataFrame) -> list[str]:
    """``--format json``: one object per call, each component in ms and in base RTTs."""
    lines = []
    for row in explained.to_dict(orient="records"):
        base = row["base_rtt_ms"]
        row["components"] = [{**c, "rtts": round(c["ms"] / base, 3)} for c in row["components"]]
        lines.append(json.dumps({k: _plain(v) for k, v in row.items()}))
    return lines


def _plain(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 3)
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return value


def component_table(explained: pd.DataFrame) -> pd.DataFrame:
    """One row per call, one column per component (ms): what stacked bars and tables show."""
    wide = pd.DataFrame([{c["name"]: c["ms"] for c in components} for components in explained["components"]],
                        columns=list(COMPONENTS), index=explained.index)
    return pd.concat([explained.drop(columns=["components"]), wide], axis=1)
