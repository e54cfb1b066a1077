"""The largest count, duration and size a user may ask labkit for, each stated once.

Every bound sits far above what an experiment needs and far below what would
exhaust the machine: a typo (``--repeats 100000000``, ``--gap 1e9``) is refused
at once, in one line, instead of running for days or growing without bound.
The CLI's click types, the config dataclasses' ``validate()`` and the agents
all read them from here; labkit-go states the same numbers in
``go/internal/limits`` (tests/test_limits.py compares the two).
"""

from __future__ import annotations

#: Bytes of one echo request (a typo like 16000000000 fails at once instead of exhausting memory).
MAX_REQUEST_BYTES = 1 << 30
#: Bytes of one request of a sweep: its calls are timed in a cell of a matrix, where 64 MiB is already extreme.
MAX_SWEEP_REQUEST_BYTES = 64 * 2**20
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
#: Ticks of a series (and of one series agent run): 10 million, some four months at 1 s.
MAX_TICKS = 10_000_000


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
    from labkit.errors import LabkitError

    def shown(bound) -> str:
        return duration_text(bound) if unit == "s" else f"{bound:g}{unit}"

    if low is None and not 0 < value <= high:
        raise LabkitError(f"{what} must be above 0{unit} and at most {shown(high)}, not {value:g}{unit}")
    if low is not None and not low <= value <= high:
        raise LabkitError(f"{what} must be between {low:g}{unit} and {shown(high)}, not {value:g}{unit}")
