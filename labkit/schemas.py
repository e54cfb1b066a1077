"""Declared Parquet schemas of the tables labkit writes, one field per tidy column.

A run's ``samples.parquet`` is cast to one of these when the run is finalised
(:meth:`labkit.store.Run.finalize`), so a notebook can rely on the column
names, types and nullability whichever command wrote the run.

- :data:`SERIES_SCHEMA`: a time series of round trips, one row per probe sent
  (and one per duplicate reply). Written by ``labkit import`` for ping, the Go
  echo logs, the idle-step client output and ghz reports, and meant for any
  command that records round trips one by one.
- :data:`IPERF3_SCHEMA`: iperf3 ``-J`` intervals, one row per stream per
  interval, written by ``labkit import iperf3``.

Each field's ``description`` metadata (see :func:`describe`) says what it
means; the same text is in :data:`SERIES_FIELDS` and :data:`IPERF3_FIELDS`.
"""

from __future__ import annotations

import pyarrow as pa

#: SERIES_SCHEMA's fields: (name, type, nullable, meaning).
SERIES_FIELDS: list[tuple[str, pa.DataType, bool, str]] = [
    ("run_id", pa.string(), False, "The run's id (its directory name)."),
    ("experiment", pa.string(), False, "The run's experiment, e.g. 'ping-vs-echo', 'import-ping' (an import that changes it relabels the run's rows)."),
    ("cell_id", pa.string(), False, "The cell the row belongs to; for an import, one cell per imported file ('<kind>:<file name>')."),
    ("attempt", pa.int32(), False, "The cell's attempt that wrote the row (re-importing a file replaces its cell with a new attempt)."),
    ("probe", pa.string(), False, "What was measured: 'ping' (ICMP echo), 'echo-cold' (a gRPC echo on a new connection), "
                                  "'echo-warm' (on an open connection), 'echo' (connection state unknown), 'tcp-echo', 'ghz', ..."),
    ("src", pa.string(), False, "The host that sent the probe, as the run names it ('unknown' when an imported log does not say)."),
    ("dst", pa.string(), False, "The address or host the probe went to ('unknown' when the source does not say)."),
    ("seq", pa.int64(), False, "Probe number as the tool printed it (ping's icmp_seq unwrapped past 65535, the echo log's seq); "
                               "for outputs without numbers, the 0-based position in the output."),
    ("t_utc_ns", pa.int64(), True, "UTC time of the sample in integer ns since the epoch: the send time when the tool gives it, "
                                   "else the time it logged the result (ping -D: reply time; Go log: the line's time, to 1 s). "
                                   "Null when the output has no times."),
    ("rtt_ms", pa.float64(), True, "Round-trip time in milliseconds, whatever unit the tool printed. Null for a lost probe; for a "
                                   "failed call a tool timed (ghz), the time until it failed."),
    ("ok", pa.bool_(), False, "True for a sample of the round trip: a reply, a successful call. False for a lost probe, a failed "
                              "call, and a duplicate reply (a duplicate is not a second sample of its probe)."),
    ("error", pa.string(), False, "Why ok is false: 'no reply', an ICMP error text, 'missing from log', a gRPC status and message, "
                                  "'duplicate'. Empty when ok."),
    ("cold", pa.bool_(), False, "True when the probe is known to have paid for opening its connection (a new channel or dial); "
                                "False when it used an open connection or the source does not say."),
    ("duplicate", pa.bool_(), False, "True for a further reply to a probe already answered (ping's DUP!, or a repeated seq)."),
    ("payload_bytes", pa.int64(), True, "Bytes of payload the probe carried as the tool reports them (ping's data bytes, the echo "
                                        "log's 'received N bytes', the idle-step request size); null when unknown."),
    ("unit", pa.string(), True, "The unit the tool printed the time in ('ms', 's', 'µs', 'ns', ...); null when it printed none "
                                "(a lost probe). Kept so that a parser that assumed one unit can be audited."),
    ("source_file", pa.string(), True, "For imported rows, the file the row came from, as stored under the run's raw/ directory."),
    ("line_number", pa.int64(), True, "1-based line of source_file that gave the row, when the parser reports it; null otherwise "
                                      "(and for rows inferred from a gap or from closing statistics)."),
]

#: IPERF3_SCHEMA's fields: (name, type, nullable, meaning).
IPERF3_FIELDS: list[tuple[str, pa.DataType, bool, str]] = [
    ("run_id", pa.string(), False, "The run's id (its directory name)."),
    ("experiment", pa.string(), False, "The run's experiment, 'import-iperf3'."),
    ("cell_id", pa.string(), False, "One cell per imported iperf3 report ('iperf3:<file name>')."),
    ("attempt", pa.int32(), False, "The cell's attempt that wrote the row."),
    ("src", pa.string(), False, "The iperf3 client's host ('unknown' when not given)."),
    ("dst", pa.string(), False, "The iperf3 server (the report's remote host, else 'unknown')."),
    ("interval", pa.int64(), False, "0-based interval number."),
    ("socket", pa.int64(), True, "iperf3's socket number of the stream."),
    ("start_s", pa.float64(), False, "Interval start, seconds since the test began."),
    ("end_s", pa.float64(), False, "Interval end, seconds since the test began."),
    ("bytes", pa.int64(), True, "Bytes transferred by the stream in the interval."),
    ("bits_per_second", pa.float64(), True, "Throughput of the stream in the interval."),
    ("retransmits", pa.int64(), True, "TCP retransmits in the interval (Linux senders only)."),
    ("snd_cwnd_bytes", pa.int64(), True, "Sender congestion window at the interval's end, bytes (Linux senders only)."),
    ("rtt_ms", pa.float64(), True, "Sender's smoothed RTT at the interval's end, ms (iperf3 prints µs)."),
    ("rttvar_ms", pa.float64(), True, "Sender's RTT variance, ms."),
    ("pmtu", pa.int64(), True, "Path MTU the sender saw."),
    ("omitted", pa.bool_(), True, "True for intervals in iperf3's --omit warm-up."),
    ("sender", pa.bool_(), True, "True when these numbers are the sending side's."),
    ("source_file", pa.string(), True, "The report the row came from, as stored under the run's raw/ directory."),
]


def _schema(fields: list[tuple[str, pa.DataType, bool, str]], name: str) -> pa.Schema:
    return pa.schema(
        [pa.field(n, t, nullable=nullable, metadata={"description": meaning}) for n, t, nullable, meaning in fields],
        metadata={"labkit.schema": name},
    )


#: One row per round-trip probe (see :data:`SERIES_FIELDS` for every column).
SERIES_SCHEMA: pa.Schema = _schema(SERIES_FIELDS, "series/1")

#: One row per iperf3 stream per interval (see :data:`IPERF3_FIELDS`).
IPERF3_SCHEMA: pa.Schema = _schema(IPERF3_FIELDS, "iperf3/1")


def describe(schema: pa.Schema) -> dict[str, str]:
    """Field name -> its meaning, from the schema's field metadata."""
    return {f.name: (f.metadata or {}).get(b"description", b"").decode() for f in schema}
