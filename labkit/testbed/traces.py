"""Files that drive a link: delay traces, Mahimahi rate traces, empirical jitter tables (pure readers).

**Delay trace** (``--delay-trace FILE``): the one-way delay over time, a step function that
starts when the link takes it and loops. Either

- two columns per line, ``TIME DELAY`` (TIME in seconds, DELAY in milliseconds, unless
  they carry units: ``1.5s 40ms``); ``#`` starts a comment; or
- the output of ping in any format ``labkit import`` reads: each reply's RTT halved,
  placed at its ``-D`` timestamp, or at seq × ``--delay-trace-step`` (default 1 s, which is
  also how a log without timestamps is read). A lost probe leaves the delay before it.

``--delay-trace-step`` also replays a ping log faster or slower than it was recorded.

**Rate trace** (``--rate-trace FILE``): Mahimahi's format, one integer per line: a
millisecond at which the link may deliver one 1504-byte packet. Lines may repeat (several
deliveries in one millisecond); the trace loops with the period of its last line.

Either trace lasts at most a week, and a delay trace's delays are at most 10 s, as ``--one-way-delay``'s.

**Jitter table** (``--jitter-distribution FILE``): measured values (any unit; whitespace
or commas between them), or a ping log (its RTTs), standardized to mean 0 and standard
deviation 1 as iproute2's ``maketable`` does, so ``--jitter`` sets the spread and
``--one-way-delay`` the mean; a ``.dist`` file is one of iproute2's tables as it is (values
scaled by 8192).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from labkit.errors import LabkitError
from labkit.files import MAX_TRACE_BYTES, read_text_file
from labkit.limits import MAX_DURATION_S
from labkit.parsers.ping import parse_ping
from labkit.units import parse_duration

#: The latest millisecond of a rate trace: a week, the longest any duration labkit takes.
MAX_TRACE_MS = MAX_DURATION_S * 1000
#: A table longer than this is reduced to this many quantiles.
MAX_TABLE = 4096
NETEM_DIST_SCALE = 8192
_COMMENT = re.compile(r"#.*$")


def _read(path: str | Path, what: str) -> str:
    """A trace's text (gunzipped when it is gzip): a regular file of at most MAX_TRACE_BYTES, strict UTF-8."""
    return read_text_file(path, what, max_bytes=MAX_TRACE_BYTES, gunzip=True)


def parse_two_columns(text: str) -> list[tuple[float, float]] | None:
    """(seconds, one-way delay in seconds) per data line, or None when the text is not two columns."""
    rows = []
    for line in text.splitlines():
        words = _COMMENT.sub("", line).replace(",", " ").split()
        if not words:
            continue
        if len(words) != 2:
            return None
        try:
            rows.append((parse_duration(words[0], "s"), parse_duration(words[1], "ms")))
        except ValueError:
            return None
    return rows or None


def delay_trace_from_ping(text: str, step_s: float | None) -> list[tuple[float, float]]:
    """(seconds since the first probe, RTT/2 in seconds) for each reply of a ping log."""
    rows = parse_ping(text).rows
    if not len(rows):
        return []
    replies = rows[rows["ok"] & ~rows["duplicate"]].sort_values("seq")
    stamps = replies["t_utc_ns"] if "t_utc_ns" in replies else None
    use_stamps = step_s is None and stamps is not None and stamps.notna().all() and len(replies)
    first_seq = int(rows["seq"].min())
    out = []
    for index, row in enumerate(replies.itertuples()):
        if use_stamps:
            t = (stamps.iloc[index] - stamps.iloc[0]) / 1e9
        else:
            t = (int(row.seq) - first_seq) * (step_s or 1.0)
        out.append((float(t), float(row.rtt_ms) / 2e3))
    return out


def read_delay_trace(path: str, step: str | None = None) -> dict:
    """The emulator's delay trace: times and delays in ns from t = 0, and the period after which it loops."""
    text = _read(path, "--delay-trace")
    try:
        step_s = parse_duration(step) if step else None
    except ValueError as exc:
        raise LabkitError(f"--delay-trace-step: {exc}") from None
    if step_s is not None and step_s <= 0:
        raise LabkitError(f"--delay-trace-step: {step!r} must be longer than 0 (the time between two probes)")
    rows = parse_two_columns(text)
    if rows:
        # A step function is read in order: a time that goes back (or repeats) is a mistake in the file, refused
        # as the rate trace refuses one, not sorted into some other trace.
        for (before, _), (after, _) in zip(rows, rows[1:]):
            if after <= before:
                raise LabkitError(f"--delay-trace {path}: the times must increase ({after:g} s comes after {before:g} s)")
    else:
        rows = sorted(delay_trace_from_ping(text, step_s))
    if not rows:
        raise LabkitError(f"--delay-trace {path}: neither TIME DELAY lines nor ping replies")
    t0 = rows[0][0]
    # The emulator counts in int64 nanoseconds: a time beyond any trace's length is refused here, by name.
    if rows[-1][0] - t0 > MAX_DURATION_S:
        raise LabkitError(f"--delay-trace {path}: it lasts {rows[-1][0] - t0:g} s, more than a week")
    times = [round((t - t0) * 1e9) for t, _ in rows]
    delays = [round(d * 1e9) for _, d in rows]
    if any(d < 0 for d in delays):
        raise LabkitError(f"--delay-trace {path}: a delay is negative")
    gaps = sorted(b - a for a, b in zip(times, times[1:]) if b > a)
    last_step = round(step_s * 1e9) if step_s else (gaps[len(gaps) // 2] if gaps else 1_000_000_000)
    return {"t_ns": times, "delay_ns": delays, "period_ns": times[-1] + max(last_step, 1)}


def read_rate_trace(path: str) -> dict:
    """Mahimahi's delivery opportunities (ms), checked."""
    text = _read(path, "--rate-trace")
    ms = []
    for number, line in enumerate(text.splitlines(), start=1):
        word = _COMMENT.sub("", line).strip()
        if not word:
            continue
        if not word.isdigit():
            raise LabkitError(f"--rate-trace {path}:{number}: {line.strip()!r} is not a whole number of milliseconds")
        # The emulator counts in int64 nanoseconds: a time beyond any trace's length is refused here, by name
        # (by its length first: int() refuses a number of thousands of digits with an error of its own).
        if len(word) > len(str(MAX_TRACE_MS)) or int(word) > MAX_TRACE_MS:
            raise LabkitError(f"--rate-trace {path}:{number}: {word} ms is later than a week, the longest a trace lasts")
        ms.append(int(word))
    if not ms or ms[-1] <= 0:
        raise LabkitError(f"--rate-trace {path}: no delivery opportunity after 0 ms")
    if any(b < a for a, b in zip(ms, ms[1:])):
        raise LabkitError(f"--rate-trace {path}: the times must not decrease (Mahimahi's format)")
    return {"ms": ms}


def rate_trace_bps(trace: dict) -> float:
    """The average rate of a Mahimahi trace: 1504 bytes per opportunity over its period."""
    return len(trace["ms"]) * 1504 * 8 / (trace["ms"][-1] / 1e3)


def _numbers(text: str) -> list[float] | None:
    numbers = []
    for line in text.splitlines():
        for word in _COMMENT.sub("", line).replace(",", " ").split():
            try:
                numbers.append(float(word))
            except ValueError:
                return None
    return numbers


def read_jitter_table(path: str) -> list[float]:
    """Sorted standardized values for the emulator's table distribution."""
    text = _read(path, "--jitter-distribution")
    numbers = _numbers(text)
    if numbers is None:
        numbers = [rtt * 2 for _, rtt in delay_trace_from_ping(text, None)]
    if not numbers:
        raise LabkitError(f"--jitter-distribution {path}: neither numbers nor ping replies")
    if len(numbers) < 2:
        raise LabkitError(f"--jitter-distribution {path}: needs at least two values")
    if str(path).endswith(".dist"):
        values = [n / NETEM_DIST_SCALE for n in numbers]
    else:
        mean = sum(numbers) / len(numbers)
        sd = math.sqrt(sum((n - mean) ** 2 for n in numbers) / (len(numbers) - 1))
        if sd == 0:
            raise LabkitError(f"--jitter-distribution {path}: all values are equal")
        values = [(n - mean) / sd for n in numbers]
    values.sort()
    if len(values) > MAX_TABLE:
        values = [values[min(len(values) - 1, int((i + 0.5) * len(values) / MAX_TABLE))] for i in range(MAX_TABLE)]
    return values
