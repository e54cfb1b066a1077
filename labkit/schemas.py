"""Declared Parquet schemas of every table labkit writes, one field per tidy column, each described once.

A run's ``samples.parquet`` is cast to one of these when the run is finalised
(:meth:`labkit.store.Run.finalize`), so a notebook can rely on the column
names, types and nullability whichever command wrote the run.

- :data:`SWEEP_SCHEMA`: ``labkit sweep``, one row per echo call, with the
  connection's TCP state before and after it.
- :data:`SERIES_SCHEMA`: a time series of round trips, one row per probe sent
  (and one per duplicate reply). Written by ``labkit series`` and by ``labkit
  import`` for ping, the Go echo logs, the idle-step client output and ghz
  reports.
- :data:`UNDER_LOAD_SCHEMA`: ``labkit latency-under-load``, a series' rows with
  the cell's condition and each probe's phase of the load.
- :data:`UPLOAD_SCHEMA`: ``labkit upload``, one row per upload.
- :data:`LOAD_SCHEMA`: ``labkit load``, one row per cell.
- :data:`HOP_SCHEMA`: ``labkit hop``, one row per cell (a transport and a repeat).
- :data:`IPERF3_SCHEMA`: iperf3 ``-J`` intervals, one row per stream per
  interval, written by ``labkit import iperf3``. Each report's end summary
  (sum_sent, sum_received, the sender's and receiver's CPU) is a fact of the
  file, not of an interval: it is in the manifest, ``imports[].parser_summary``.

Every schema is declared the same way: a list of ``(name, type, nullable,
meaning)``; the meaning becomes the field's ``description`` metadata (see
:func:`describe`).
"""

from __future__ import annotations

import pyarrow as pa

from labkit.echo.tcpinfo import TCP_COLUMNS

#: The TCP state ``labkit echo call --tcp-info`` records around each call: column stem -> (type, meaning).
_TCP_STATE = {
    "cwnd": (pa.int64(), "congestion window, segments"),
    "ssthresh": (pa.int64(), "slow-start threshold, segments (null while infinite)"),
    "rto_ms": (pa.float64(), "retransmission timeout, ms"),
    "srtt_ms": (pa.float64(), "smoothed RTT, ms"),
    "bytes_acked": (pa.int64(), "bytes acknowledged on the connection so far"),
    "retrans": (pa.int64(), "segments retransmitted on the connection so far"),
    "lastsnd_ms": (pa.float64(), "ms since the connection last sent data (the idle time the kernel sees)"),
    "mss": (pa.int64(), "The connection's MSS, bytes."),
    "tcp_cc": (pa.string(), "The congestion control the connection used (ss's view, e.g. 'cubic')."),
}


def _tcp_fields() -> list[tuple[str, pa.DataType, bool, str]]:
    fields = []
    for column in TCP_COLUMNS:
        stem, _, when = column.rpartition("_") if column.endswith(("_before", "_after")) else (column, "", "")
        kind, meaning = _TCP_STATE[stem]
        if when:
            meaning = f"The call's connection {when} the call (ss -tin): {meaning}; null when there was no connection yet."
        fields.append((column, kind, True, meaning))
    return fields


#: The gRPC stack a row was measured with (labkit.experiments.stacks); older runs lack these columns and
#: Run.samples() fills them as they were then: python on both sides, no option. A series has one stack, kept
#: in its manifest's config (its rows share SERIES_SCHEMA with imports, which have none); Run.samples() adds
#: these columns to a series' rows from there.
STACK_FIELDS: list[tuple[str, pa.DataType, bool, str]] = [
    ("client_impl", pa.string(), True, "The gRPC implementation of the client: 'python' (grpcio) or 'go' (grpc-go); "
                                       "null where the client is a tool (ghz, h2load) or an imported log."),
    ("server_impl", pa.string(), True, "The gRPC implementation of the echo server: 'python' or 'go'; null for imports."),
    ("grpc_options", pa.string(), True, "The --grpc-option values in force, 'key=value;...' sorted by key; null when none."),
]

#: SWEEP_SCHEMA's fields: (name, type, nullable, meaning).
SWEEP_FIELDS: list[tuple[str, pa.DataType, bool, str]] = [
    ("run_id", pa.string(), False, "The run's id (its directory name)."),
    ("experiment", pa.string(), False, "'idle-step'."),
    ("src", pa.string(), False, "The client host (inventory name) that made the call."),
    ("dst", pa.string(), False, "The server host (inventory name) that answered."),
    ("cell_id", pa.string(), False, "The cell: 'src->dst|cc=..|ssai=..|gap=..|bg=..|ka=..' (every knob but the size)."),
    ("attempt", pa.int32(), False, "The cell's attempt that wrote the row (a resumed run redoes unfinished cells)."),
    ("cc", pa.string(), True, "Congestion control set on the route between the hosts; null when left as it was ('keep')."),
    ("slow_start_after_idle", pa.int8(), True, "net.ipv4.tcp_slow_start_after_idle set on both hosts; null when left as it was."),
    ("background_gap_s", pa.float64(), True, "Interval of the 1-byte background calls on the same channel; null when none."),
    ("keepalive_ms", pa.int64(), True, "gRPC keepalive ping interval on the client channel; null when off."),
    ("payload_bytes", pa.int64(), False, "Bytes of the request's payload."),
    ("gap_s", pa.float64(), False, "Idle time from the end of the previous call to the start of this one."),
    ("seq", pa.int64(), False, "0-based number of the recorded call within its cell (warm-up calls are not recorded)."),
    ("t_start_utc_ns", pa.int64(), False, "UTC time the call's timer started (read with it), integer ns since the epoch."),
    ("rtt_ns", pa.int64(), False, "The call's latency: perf_counter_ns around the blocking call alone."),
    ("rtt_ms", pa.float64(), False, "rtt_ns in milliseconds."),
    ("server_ns", pa.int64(), True, "The echo server's own time on the call, from its labkit-server-ns trailer: its handler "
                                    "from the decoded request to the response handed to gRPC, ns; null when it sent none."),
    ("server_recv_utc_ns", pa.int64(), True, "UTC time on the server's clock when its handler received the request (the "
                                             "labkit-server-recv-utc-ns trailer), ns since the epoch; null when it sent none. "
                                             "Less t_start_utc_ns, the one-way delay client -> server plus the two clocks' "
                                             "offset (labkit.analysis.oneway)."),
    ("server_send_utc_ns", pa.int64(), True, "UTC time on the server's clock when its handler handed back the response (the "
                                             "labkit-server-send-utc-ns trailer); null when it sent none. The call's end "
                                             "(t_start_utc_ns + rtt_ns) less it: the one-way delay server -> client less the "
                                             "offset."),
    ("ok", pa.bool_(), False, "True when the call succeeded and the server echoed the right length."),
    ("error", pa.string(), True, "Why ok is false (gRPC details, or a length mismatch); null when ok."),
    ("grpc_code", pa.string(), True, "The call's gRPC status code name."),
    ("cold", pa.bool_(), False, "True for the first call on a channel: it paid for opening the connection."),
    *_tcp_fields(),
    *STACK_FIELDS,
]

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
    ("server_ns", pa.int64(), True, "For gRPC echo probes, the echo server's own time on the call (its labkit-server-ns "
                                    "trailer), ns; null for other probes, imports and servers that send none."),
    ("server_recv_utc_ns", pa.int64(), True, "For probes with a server side (gRPC and TCP echo, irtt), UTC time on the "
                                             "server's clock when it received the probe, ns since the epoch; null for the "
                                             "others. Less t_utc_ns (the send): the one-way delay out plus the clocks' offset "
                                             "(labkit.analysis.oneway)."),
    ("server_send_utc_ns", pa.int64(), True, "UTC time on the server's clock when it sent the reply; null as above. The reply's "
                                             "arrival (t_utc_ns + rtt_ms) less it: the one-way delay back less the offset."),
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

#: UNDER_LOAD_SCHEMA's fields: a series' columns, and the condition and the phase of the load each probe was sent in.
UNDER_LOAD_FIELDS: list[tuple[str, pa.DataType, bool, str]] = [
    *SERIES_FIELDS,
    ("queue", pa.string(), False, "The testbed link's queue in the cell ('keep': as the link was; '10bdp': droptail of 10 "
                                  "bandwidth-delay products; 'codel:10bdp': CoDel over that buffer)."),
    ("cc", pa.string(), True, "Congestion control of the load's flows (iperf3 -C); null: the hosts' default."),
    ("load", pa.string(), False, "The load: 'tcp-up' (client host to server host), 'tcp-down', 'tcp-both'."),
    ("phase", pa.string(), False, "When the probe was sent, by the cell's plan: 'before' the load, 'ramp' (its first "
                                  "--ramp, while the queue fills), 'during', 'after'."),
    ("t_offset_s", pa.float64(), False, "The probe's tick, in seconds from the cell's first tick (the timeline's x)."),
]

#: UPLOAD_SCHEMA's fields: (name, type, nullable, meaning).
UPLOAD_FIELDS: list[tuple[str, pa.DataType, bool, str]] = [
    ("run_id", pa.string(), False, "The run's id (its directory name)."),
    ("experiment", pa.string(), False, "'upload'."),
    ("src", pa.string(), False, "The client host (inventory name) that uploaded."),
    ("dst", pa.string(), False, "The server host (inventory name) that received."),
    ("cell_id", pa.string(), False, "The cell: '<src>-><dst>|<transport>|tls=on|off|chunk=<bytes>'."),
    ("attempt", pa.int32(), False, "The cell's attempt that wrote the row (a resumed run redoes unfinished cells)."),
    ("transport", pa.string(), False, "'grpc' (client-streaming Upload RPC, one Chunk message per chunk) or "
                                      "'http2' (one POST /upload, one write of DATA frames per chunk)."),
    ("tls", pa.bool_(), False, "True when the connection was TLS, verified against the run's throwaway CA."),
    ("chunk_bytes", pa.int64(), False, "Bytes of file content per chunk (the last chunk may be shorter)."),
    ("file_bytes", pa.int64(), False, "Size of the uploaded file."),
    ("seq", pa.int64(), False, "0-based number of the upload within its cell (all on one warm connection)."),
    ("t_start_utc_ns", pa.int64(), True, "UTC time the upload started, ns since the epoch (null when it never did)."),
    ("seconds", pa.float64(), True, "From just before the first byte was handed to the transport to the arrival of "
                                    "the server's acknowledgement (UploadStatus / the HTTP response with the count)."),
    ("mb_per_s", pa.float64(), True, "file_bytes / seconds / 1e6 (decimal MB/s); null when ok is false."),
    ("chunks", pa.int64(), False, "Chunks the file was cut into: ceil(file_bytes / chunk_bytes)."),
    ("bytes_sent", pa.int64(), False, "Bytes of content the client sent."),
    ("bytes_acked", pa.int64(), True, "Bytes the server says it received; null when it did not answer."),
    ("client_cpu_s", pa.float64(), True, "CPU time of the whole client process (all threads) over the timed window "
                                         "(CLOCK_PROCESS_CPUTIME_ID)."),
    ("client_cpu_user_s", pa.float64(), True, "User part of client CPU, /proc/self/stat utime (1/100 s ticks)."),
    ("client_cpu_sys_s", pa.float64(), True, "Kernel part of client CPU, /proc/self/stat stime (1/100 s ticks)."),
    ("server_cpu_s", pa.float64(), True, "CPU time of the whole server process from the request's start to its "
                                         "answer, measured by the server and returned with the acknowledgement."),
    ("server_cpu_user_s", pa.float64(), True, "User part of server CPU, its /proc/self/stat utime (1/100 s ticks)."),
    ("server_cpu_sys_s", pa.float64(), True, "Kernel part of server CPU, its /proc/self/stat stime (1/100 s ticks)."),
    ("client_rw_syscalls", pa.int64(), True, "read(2)/write(2)-family system calls of the client process over the "
                                             "timed window (/proc/self/io syscr + syscw); labkit-go only: Python's "
                                             "grpcio uses sendmsg/recvmsg, which that file does not count (null)."),
    ("server_rw_syscalls", pa.int64(), True, "The same of the server process over the request (labkit-go's server; "
                                             "null for Python's)."),
    ("client_frames", pa.int64(), True, "HTTP/2 frames of every type the client wrote on its connection over the "
                                        "timed window, read from the bytes above TLS (labkit-go's agent; null for "
                                        "Python's)."),
    ("client_data_frames", pa.int64(), True, "DATA frames among client_frames: what the chunks became on the wire."),
    ("client_writes", pa.int64(), True, "Writes of the client's connection (each one write(2) of the socket, or of "
                                        "TLS records on it) over the timed window (labkit-go's agent; null for "
                                        "Python's)."),
    ("ok", pa.bool_(), False, "True when the server acknowledged every byte with the right SHA-256 and found "
                              "what the client declared; false rows say why in error."),
    ("error", pa.string(), True, "Why ok is false (gRPC status, HTTP status and reason, byte count or checksum "
                                 "mismatch); null when ok."),
    ("status", pa.string(), True, "The transport's status: a gRPC status code name, or the HTTP status code."),
    *STACK_FIELDS,
]

#: LOAD_SCHEMA's fields: (name, type, nullable, meaning).
LOAD_FIELDS: list[tuple[str, pa.DataType, bool, str]] = [
    ("run_id", pa.string(), False, "The run's id (its directory name)."),
    ("experiment", pa.string(), False, "'load'."),
    ("cell_id", pa.string(), False, "The cell: src->dst|transport|c=concurrency|p=payload|conns=N|ka=keepalive."),
    ("attempt", pa.int32(), False, "The cell's attempt that wrote the row (a resumed run redoes unfinished cells)."),
    ("src", pa.string(), False, "The client host (inventory name) that ran the load tool."),
    ("dst", pa.string(), False, "The server host (inventory name) that ran `labkit echo serve`."),
    ("transport", pa.string(), False, "'grpc' (ghz, one connection), 'grpc-conns' (ghz --connections N) or 'http2' (h2load POST /echo)."),
    ("tool", pa.string(), False, "'ghz', 'h2load' or 'labkit-go' (its gRPC load, every message timed)."),
    ("tool_version", pa.string(), True, "What the tool's --version printed on the client host."),
    ("concurrency", pa.int64(), False, "Requests asked to be in flight at once (ghz -c; for h2load connections × streams, see in_flight)."),
    ("connections", pa.int64(), False, "TCP connections the tool opened (ghz --connections, h2load -c)."),
    ("streams_per_connection", pa.int64(), True, "h2load -m: concurrent streams per connection (concurrency // connections); null for ghz."),
    ("in_flight", pa.int64(), False, "Requests actually outstanding at once: concurrency for ghz, connections × streams for h2load."),
    ("keepalive_ms", pa.int64(), True, "ghz --keepalive: client HTTP/2 ping interval in ms; null when off (and for h2load, which has none)."),
    ("payload_bytes", pa.int64(), False, "Payload bytes per request: the EchoRequest payload (gRPC) or the POST body (HTTP/2)."),
    ("compression", pa.string(), False, "'gzip' when ghz compressed every request (--enable-compression), else 'none'."),
    ("rpc", pa.string(), False, "'unary' (Echo, or h2load's POST) or 'stream' (one EchoStream per call, messages_per_call requests)."),
    ("messages_per_call", pa.int64(), False, "Requests per call: 1, or the stream's messages; a stream call's latency "
                                            "and req/s are per stream, so divide or multiply by this for messages."),
    ("payload_kind", pa.string(), False, "'random' (random bytes, which gzip cannot shrink) or 'text' (JSON-like "
                                        "records of a small vocabulary, which it shrinks several times over)."),
    ("ladder_step", pa.string(), True, "--design ladder: the step this cell is, 'default' or what it added to the "
                                       "step before (e.g. '+keepalive_ms=10000', '+codec=vtproto'); null otherwise."),
    ("warmup_s", pa.float64(), False, "Configured warm-up before the measured window, not counted."),
    ("duration_s", pa.float64(), False, "Configured length of the measured window."),
    ("t_start_utc_ns", pa.int64(), False, "UTC time the cell's tool was started, integer ns since the epoch."),
    ("requests", pa.int64(), False, "Requests that finished (ok or not) in the measured window."),
    ("ok", pa.int64(), False, "Successful requests in the window: gRPC status OK, or an HTTP 2xx response."),
    ("errors", pa.int64(), False, "requests - ok: failed calls, reset streams, non-2xx responses."),
    ("rps", pa.float64(), False, "Successful requests per second of the measured window (ok / duration_s)."),
    ("latency_min_ms", pa.float64(), True, "Fastest successful request (null when none succeeded)."),
    ("latency_mean_ms", pa.float64(), True, "Mean latency of the successful requests."),
    ("latency_p50_ms", pa.float64(), True, "Median latency of the successful requests (nearest rank, as ghz computes it)."),
    ("latency_p90_ms", pa.float64(), True, "90th percentile latency of the successful requests (nearest rank)."),
    ("latency_p99_ms", pa.float64(), True, "99th percentile latency of the successful requests (nearest rank)."),
    ("latency_max_ms", pa.float64(), True, "Slowest successful request."),
    ("status_codes", pa.string(), False, "JSON object: gRPC status name or HTTP status (-1: failed stream) -> count, in the window."),
    ("error_kinds", pa.string(), False, "JSON object: the most frequent error texts (at most 5) -> count, in the window."),
    ("messages", pa.int64(), True, "labkit-go's load: request messages of the window's calls (null for ghz and h2load, "
                                   "which time calls, not messages)."),
    ("messages_ok", pa.int64(), True, "labkit-go's load: those answered."),
    ("message_mean_ms", pa.float64(), True, "labkit-go's load: mean of each answered message's own latency, from its "
                                            "send to its answer's arrival (inside a stream, not the call's ÷ messages)."),
    ("message_p50_ms", pa.float64(), True, "labkit-go's load: median of the messages' own latencies (nearest rank)."),
    ("message_p90_ms", pa.float64(), True, "labkit-go's load: 90th percentile of the messages' own latencies."),
    ("message_p99_ms", pa.float64(), True, "labkit-go's load: 99th percentile of the messages' own latencies."),
    ("message_intended_mean_ms", pa.float64(), True, "labkit-go's load: mean of each answered message's latency from when "
                                                     "the closed loop meant to send it (the end of its worker's call "
                                                     "before, or its first call's start): the wait before a request "
                                                     "left is in it, and message_mean_ms leaves it out."),
    ("message_intended_p50_ms", pa.float64(), True, "labkit-go's load: median of the messages' latencies from their "
                                                    "intended send (nearest rank)."),
    ("message_intended_p90_ms", pa.float64(), True, "labkit-go's load: 90th percentile of those."),
    ("message_intended_p99_ms", pa.float64(), True, "labkit-go's load: 99th percentile of those."),
    ("tool_rps", pa.float64(), True, "The tool's own req/s (ghz: every call over warm-up + duration; h2load: succeeded over duration)."),
    ("tool_requests", pa.int64(), True, "Requests the tool itself counted (ghz: count incl. warm-up; h2load: requests total)."),
    ("tool_exit", pa.int64(), True, "The tool's exit status (null when it was stopped)."),
    ("server_cpu_s", pa.float64(), True, "CPU seconds (user + system, all threads) the echo server process used during the cell, "
                                     "from /proc/<pid>/stat before and after; null when it could not be read."),
    ("server_cpu_util", pa.float64(), True, "server_cpu_s over the wall time between the two readings (1.0 = one core busy)."),
    ("server_alive_after", pa.bool_(), False, "Whether the echo server process was still running after the cell."),
    ("error", pa.string(), True, "Why the row is partial or empty: the tool failed, the server died, nothing was measured."),
    ("raw_files", pa.string(), False, "The cell's raw outputs under the run's raw/ directory, comma-separated."),
    *STACK_FIELDS,
]

#: HOP_SCHEMA's fields: (name, type, nullable, meaning).
HOP_FIELDS: list[tuple[str, pa.DataType, bool, str]] = [
    ("run_id", pa.string(), False, "The run's id (its directory name)."),
    ("experiment", pa.string(), False, "'hop'."),
    ("cell_id", pa.string(), False, "The cell: load_host|via|tool|rate=closed or N/s|r=repeat."),
    ("attempt", pa.int32(), False, "The cell's attempt that wrote the row (a resumed run redoes unfinished cells)."),
    ("load_host", pa.string(), False, "The host (inventory name) that ran the load tool."),
    ("front", pa.string(), True, "The host of the front relay (labkit-go front); null for direct cells, which skip it."),
    ("back", pa.string(), False, "The host of the back service (labkit-go back)."),
    ("nats_host", pa.string(), True, "The host of nats-server, for nats cells; null otherwise."),
    ("via", pa.string(), False, "'direct' (the load on the back itself), or the transport the front called the back "
                                "over: 'grpc' (BackService.Get), 'http2' (GET on one h2c connection), 'http2-tls', "
                                "'nats' (request-reply)."),
    ("tool", pa.string(), False, "'wrk' (closed loop, latencies corrected for coordinated omission), 'vegeta' (closed "
     "loop of `connections` workers, or open loop at `rate`) or 'ghz' (gRPC, closed loop)."),
    ("tool_version", pa.string(), True, "What the tool's --version printed on the load host."),
    ("repeat", pa.int64(), False, "0-based repeat of the transport: the independent unit the notebook resamples."),
    ("order", pa.int64(), False, "0-based position of the cell in the run's shuffled order."),
    ("threads", pa.int64(), True, "wrk -t; null for the other tools."),
    ("connections", pa.int64(), True, "wrk -c, or ghz's concurrency and connections; null for vegeta (open loop)."),
    ("rate", pa.int64(), True, "vegeta's request rate per second (open loop); null for the closed-loop tools."),
    ("duration_s", pa.float64(), False, "Configured length of the load."),
    ("grpc_channels", pa.int64(), True, "gRPC channels from the front to the back (round robin), for grpc cells."),
    ("nats_workers", pa.int64(), True, "The back's NATS subscriptions answering at once, when the run has NATS."),
    ("body_bytes", pa.int64(), False, "Bytes of the back's body (the response body of every request)."),
    ("t_start_utc_ns", pa.int64(), False, "UTC time the cell's tool was started, integer ns since the epoch."),
    ("requests", pa.int64(), False, "Requests that ended, answered or not (wrk: responses plus socket errors)."),
    ("ok", pa.int64(), False, "Successful requests: a 2xx response (vegeta: with the back's exact body; ghz: status OK)."),
    ("errors", pa.int64(), False, "requests - ok: non-2xx responses (a front's 502), socket errors, timeouts, failed calls."),
    ("rps", pa.float64(), False, "Successful requests per second (ok over the tool's measured duration)."),
    ("messages", pa.int64(), True, "labkit-go's load: request messages of the window's calls (null for ghz and h2load, "
                                   "which time calls, not messages)."),
    ("messages_ok", pa.int64(), True, "labkit-go's load: those answered."),
    ("message_mean_ms", pa.float64(), True, "labkit-go's load: mean of each answered message's own latency, from its "
                                            "send to its answer's arrival (inside a stream, not the call's ÷ messages)."),
    ("message_p50_ms", pa.float64(), True, "labkit-go's load: median of the messages' own latencies (nearest rank)."),
    ("message_p90_ms", pa.float64(), True, "labkit-go's load: 90th percentile of the messages' own latencies."),
    ("message_p99_ms", pa.float64(), True, "labkit-go's load: 99th percentile of the messages' own latencies."),
    ("tool_rps", pa.float64(), True, "The tool's own req/s (wrk's Requests/sec counts non-2xx answers too; ghz's rps)."),
    ("tool_duration_s", pa.float64(), True, "The duration the tool measured (wrk's exact runtime; else the configured one)."),
    ("latency_min_ms", pa.float64(), True, "Fastest request (wrk: every answered request, errors included; others: ok only)."),
    ("latency_mean_ms", pa.float64(), True, "Mean latency (wrk's own, exact from its script; others over ok requests)."),
    ("latency_stdev_ms", pa.float64(), True, "Standard deviation of the latency, as wrk computes it (others: population)."),
    ("latency_p50_ms", pa.float64(), True, "Median latency (wrk: its histogram's percentile, µs resolution; others nearest rank)."),
    ("latency_p90_ms", pa.float64(), True, "90th percentile latency."),
    ("latency_p99_ms", pa.float64(), True, "99th percentile latency."),
    ("latency_max_ms", pa.float64(), True, "Slowest request."),
    ("bytes_read", pa.int64(), True, "Bytes the tool read: wrk counts whole HTTP responses (headers too), vegeta bodies "
                                      "only; null for ghz."),
    ("transfer_bytes_per_s", pa.float64(), True, "bytes_read over the tool's duration (wrk's Transfer/sec, unrounded)."),
    ("error_kinds", pa.string(), False, "JSON object: what went wrong -> count (wrk: connect/read/write/timeout/status)."),
    ("front_cpu_s", pa.float64(), True, "CPU seconds (user + system, all threads) of the front over the cell, from "
                                        "/proc/<pid>/stat before and after; null without a front or when unreadable."),
    ("back_cpu_s", pa.float64(), True, "CPU seconds of the back over the cell."),
    ("nats_cpu_s", pa.float64(), True, "CPU seconds of nats-server over the cell; null when the run has no NATS."),
    ("load_cpu_s", pa.float64(), True, "CPU seconds of the load tool over the cell, sampled from /proc/<pid>/stat on "
     "the load host while it ran (the last sample at most 0.1 s before it ended); null when none was read."),
    ("cell_wall_s", pa.float64(), False, "Wall time between the CPU readings before and after the cell."),
    ("services_alive_after", pa.bool_(), False, "Whether the front, the back and nats-server all still ran after the cell."),
    ("tool_exit", pa.int64(), True, "Exit status of the tool's (last) command; null when it was stopped."),
    ("error", pa.string(), True, "Why the row is partial: a process died, the tool failed, nothing was answered."),
    ("raw_files", pa.string(), False, "The cell's raw outputs under the run's raw/ directory, comma-separated."),
]

#: PACKETS_SCHEMA's fields: one row per captured TCP packet (packets.parquet; labkit.parsers.pcap, labkit.explain).
PACKETS_FIELDS: list[tuple[str, pa.DataType, bool, str]] = [
    ("host", pa.string(), False, "The inventory host that captured the packet (tcpdump -i any on its data address)."),
    ("role", pa.string(), False, "'client' or 'server': the side of the experiment the capturing host played."),
    ("t_ns", pa.int64(), False, "Capture time, ns since the epoch, by the capturing host's clock."),
    ("conn", pa.string(), False, "The connection: 'CLIENT_IP:PORT>SERVER_IP:PORT'."),
    ("direction", pa.string(), False, "'c2s' (client to server) or 's2c'."),
    ("flags", pa.string(), False, "TCP flags as letters: S (SYN), F (FIN), R (RST), P (PSH), A (ACK)."),
    ("seq", pa.int64(), False, "Sequence number relative to the sender's initial one (the SYN's is 0)."),
    ("ack", pa.int64(), True, "Acknowledgement number relative to the peer's initial one; null without the ACK flag."),
    ("length", pa.int64(), False, "TCP payload bytes, from the IP header (a snap length does not cut it)."),
    ("window", pa.int64(), False, "Advertised receive window, bytes (scaled by the SYN's option when the handshake was captured)."),
    ("retransmit", pa.bool_(), False, "True for a data segment that sends no byte beyond the highest already sent that way."),
    ("kind", pa.string(), False, "What its first payload bytes show: 'h2-preface', 'tls' (a TLS record), or ''."),
    ("cell_id", pa.string(), True, "The cell of the call the packet belongs to (its time window and connection); null for none."),
    ("probe", pa.string(), True, "The call's probe (series), transport (upload) or 'echo' (sweep); null for no call."),
    ("call", pa.int64(), True, "The call's seq in its cell; null for packets of no call and for server-side captures."),
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
    ("snd_wnd_bytes", pa.int64(), True, "Send window the receiver advertised at the interval's end, bytes (Linux senders only)."),
    ("rtt_ms", pa.float64(), True, "Sender's smoothed RTT at the interval's end, ms (iperf3 prints µs)."),
    ("rttvar_ms", pa.float64(), True, "Sender's RTT variance, ms."),
    ("pmtu", pa.int64(), True, "Path MTU the sender saw."),
    ("jitter_ms", pa.float64(), True, "UDP: interarrival jitter the receiver measured in the interval, ms; null for TCP "
                                      "and on the sending side (a UDP sender's own intervals carry only packets)."),
    ("lost_packets", pa.int64(), True, "UDP: datagrams the receiver found missing in the interval; null for TCP and on the sending side."),
    ("packets", pa.int64(), True, "UDP: datagrams sent (sending side) or expected by sequence number (receiving side) in the interval."),
    ("lost_percent", pa.float64(), True, "UDP: lost_packets as a percentage of packets, as iperf3 computed it; null where lost_packets is."),
    ("omitted", pa.bool_(), True, "True for intervals in iperf3's --omit warm-up."),
    ("sender", pa.bool_(), True, "True when these numbers are the sending side's."),
    ("source_file", pa.string(), True, "The report the row came from, as stored under the run's raw/ directory."),
]


def _schema(fields: list[tuple[str, pa.DataType, bool, str]], name: str) -> pa.Schema:
    return pa.schema(
        [pa.field(n, t, nullable=nullable, metadata={"description": meaning}) for n, t, nullable, meaning in fields],
        metadata={"labkit.schema": name},
    )


#: One row per echo call of a sweep (see :data:`SWEEP_FIELDS`).
SWEEP_SCHEMA: pa.Schema = _schema(SWEEP_FIELDS, "sweep/4")  # 3: server_ns; 4: the server's stamps

#: One row per round-trip probe (see :data:`SERIES_FIELDS` for every column).
SERIES_SCHEMA: pa.Schema = _schema(SERIES_FIELDS, "series/3")  # 2: server_ns; 3: the server's stamps

#: One row per probe of a latency-under-load cell (see :data:`UNDER_LOAD_FIELDS`).
UNDER_LOAD_SCHEMA: pa.Schema = _schema(UNDER_LOAD_FIELDS, "under-load/1")

#: One row per upload (see :data:`UPLOAD_FIELDS`).
UPLOAD_SCHEMA: pa.Schema = _schema(UPLOAD_FIELDS, "upload/2")

#: One row per load cell (see :data:`LOAD_FIELDS`).
LOAD_SCHEMA: pa.Schema = _schema(LOAD_FIELDS, "load/3")  # 3: compression, rpc, messages_per_call

#: One row per hop cell (see :data:`HOP_FIELDS`).
HOP_SCHEMA: pa.Schema = _schema(HOP_FIELDS, "hop/1")

#: One row per captured TCP packet (see :data:`PACKETS_FIELDS`).
PACKETS_SCHEMA: pa.Schema = _schema(PACKETS_FIELDS, "packets/1")

#: One row per iperf3 stream per interval (see :data:`IPERF3_FIELDS`).
IPERF3_SCHEMA: pa.Schema = _schema(IPERF3_FIELDS, "iperf3/2")  # 2: snd_wnd and the UDP columns


def describe(schema: pa.Schema) -> dict[str, str]:
    """Field name -> its meaning, from the schema's field metadata."""
    return {f.name: (f.metadata or {}).get(b"description", b"").decode() for f in schema}
