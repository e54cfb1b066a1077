"""The largest count, duration and size a user may ask labkit for, each stated once.

Every bound sits far above what an experiment needs and far below what would
exhaust the machine: a typo (``--repeats 100000000``, ``--gap 1e9``) is refused
at once, in one line, instead of running for days or growing without bound.
The CLI's click types, the config dataclasses' ``validate()`` and the agents
all read them from here; labkit-go states the same numbers in
``go/internal/limits`` (tests/test_limits.py compares the two).
"""

from __future__ import annotations

from labkit.errors import LabkitError

#: Bytes of one echo request (a typo like 16000000000 fails at once instead of exhausting memory).
MAX_REQUEST_BYTES = 1 << 30
#: What an echo server accepts unless told otherwise: gRPC's own default receive limit (grpcio's and grpc-go's), large
#: enough for the brief's largest request (about 100 KB) and upload chunk (2 MiB); --max-message-bytes raises it.
GRPC_DEFAULT_MESSAGE_BYTES = 4 * 2**20
#: The largest payload of an echo call between a server and a client that keep gRPC's default bound (sweep, load,
#: demo): the request's and the reply's framing must fit beside it. Measured on loopback, each of the four stacks
#: (grpcio and grpc-go, either side) echoes 4 MiB − 1 KiB and refuses 4 MiB with RESOURCE_EXHAUSTED; a sweep allowed
#: 64 MiB before, every call above 4 MiB of which failed that way.
MAX_ECHO_PAYLOAD_BYTES = GRPC_DEFAULT_MESSAGE_BYTES - 1024
#: The largest gRPC message a server may be told to accept: gRPC's own limit (a signed 32-bit length).
MAX_MESSAGE_BYTES = 2**31 - 1
#: Bytes of the file of ``labkit upload`` (the agent holds it in memory).
MAX_FILE_BYTES = 1 << 30
#: Recorded calls per size (echo call, a sweep's cell) and uploads per cell: a million calls are days of measuring.
MAX_REPEATS = 1_000_000
#: Recorded calls of one ``echo call`` (sizes × repeats): a shuffled order keeps one small index per call, at most
#: 40 MB here.
MAX_CALLS = 10_000_000
#: Unrecorded calls (or uploads) before the first recorded one.
MAX_WARMUP = 10_000
#: Any gap, interval or per-call deadline a user gives: one week.
MAX_DURATION_S = 7 * 24 * 3600
#: A keepalive ping interval, in milliseconds: one hour (a longer one never fires within a call's gap anyway).
MAX_KEEPALIVE_MS = 3_600_000
#: Pings of a baseline before and after a run.
MAX_PING_COUNT = 10_000
#: Seconds of an iperf3 baseline.
MAX_IPERF_SECONDS = 3600
#: Payload of a series' echo probes: small calls are what a series compares with ping.
MAX_SERIES_PAYLOAD_BYTES = 2**20
#: Ticks of a series (and of one series agent run): 10 million, some four months at 1 s.
MAX_TICKS = 10_000_000
#: The deadline of each call of a sweep or a hop (``--call-timeout``): one that waits it out fails its cell, so it
#: is short, but long enough for a slow link's handshake.
MIN_CALL_TIMEOUT_S = 0.1
MAX_CALL_TIMEOUT_S = 600
#: The time between a series' ticks, and each of its probes' deadline: one hour (a probe spans one tick).
MAX_SERIES_INTERVAL_S = 3600
#: Round trips of one irtt client run (a series' range of ticks, with --probes irtt): irtt keeps every one in memory
#: and writes them all as one JSON document when it ends, ~1.2 kB each, which labkit then reads whole: 100 000 (a
#: day at 1 s) is some 120 MB.
MAX_IRTT_ROUND_TRIPS = 100_000
#: irtt's packet length (a series' --payload-bytes, with irtt): the largest UDP payload an IPv4 datagram carries.
MAX_IRTT_LENGTH = 65_507
#: Requests a load tool keeps in flight at once (load's --concurrency, hop's --connections: wrk's -c).
MAX_CONCURRENCY = 10_000
#: Connections ghz and h2load spread a load cell's requests over.
MAX_LOAD_CONNECTIONS = 1000
#: Threads of wrk (hop's --threads).
MAX_LOAD_THREADS = 256
#: Requests per second of an open-loop load (hop's --rate, vegeta).
MAX_RATE = 1_000_000
#: Measured load of one cell (load, hop): a day.
MAX_LOAD_DURATION_S = 24 * 3600
#: Unmeasured load before a load cell's window.
MAX_LOAD_WARMUP_S = 3600
#: Requests of one stream call of a load cell (load's --stream-messages).
MAX_STREAM_MESSAGES = 100_000
#: Cells per transport of a hop run.
MAX_HOP_REPEATS = 1000
#: gRPC channels from the hop's front to its back (each its own connection).
MAX_GRPC_CHANNELS = 256
#: NATS subscriptions of the hop's back answering at once.
MAX_NATS_WORKERS = 1024
#: A certificate, key or CA bundle file (the system's whole CA bundle is ~200 KB), and an SSH identity file.
MAX_PEM_BYTES = 2**20
#: The hop back's body: one NATS message under nats-server's default max_payload (1 MiB), and one gRPC message
#: under grpc-go's default receive limit (4 MiB).
MAX_BODY_BYTES = 2**20


def duration_text(seconds: float) -> str:
    """A bound for --help and error lines, in the largest whole unit: 168h, 1h, 5s."""
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


#: What --help says of every bounded duration.
AT_MOST = f"at most {duration_text(MAX_DURATION_S)}"


def check_within(what: str, value, low, high, unit: str = "") -> None:
    """Refuse ``value`` outside ``[low, high]`` with one line naming ``what`` (a config's validate(), an agent).

    ``low=None``: any value above zero (a duration or deadline that must not be 0)."""
    def number(value) -> str:
        return str(value) if isinstance(value, int) else f"{value:g}"  # a count or size whole: 67108864, not 6.71089e+07

    def shown(bound) -> str:
        return duration_text(bound) if unit == "s" else f"{number(bound)}{unit}"

    if low is None and not 0 < value <= high:
        raise LabkitError(f"{what} must be above 0{unit} and at most {shown(high)}, not {number(value)}{unit}")
    if low is not None and not low <= value <= high:
        raise LabkitError(f"{what} must be between {number(low)}{unit} and {shown(high)}, not {number(value)}{unit}")
