"""Logs written by Go gRPC echo clients of the published experiments.

Two formats:

- :func:`parse_go_echo_log`, the 2016 ping-vs-gRPC client (bbengfort/orca)::

      2016/11/02 08:24:56 received 50 bytes from orca (128.8.126.120:3265) order=1 seq=1 time=27.355185ms

  ``time=`` is a Go duration in whatever unit Go chose (``1.868983839s`` for
  a slow call): every unit is read, none dropped.

- :func:`parse_idle_step_output`, the client of the idle-connection report
  (grpc-go #5599/#8436): ``Payload size: N bytes`` lines, each giving the
  request size of the ``Round trip time: <Go duration>`` lines that follow.
  A Go ``log`` timestamp in front of either line is accepted.

Both are streaming parsers (:mod:`labkit.parsers.stream`): :class:`GoEchoParser` and
:class:`IdleStepParser` read a log a chunk at a time, the ``parse_*`` functions a whole text with the same code.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Iterator

from labkit.parsers.base import LineTally, ParseError, ParseResult
from labkit.parsers.compiled import ECHO_UNITS, echo_calls
from labkit.parsers.godur import NS_PER_UNIT, go_duration_unit, parse_go_duration_ns
from labkit.parsers.stream import (INFERRED_BATCH, STORABLE_TIMES, Lines, Prepared, SeqWindow, StreamParser,
                                   arrow_schema, digits, inferred_allowed, line_numbers, lines_one_by_one, parse_whole,
                                   sort_by, sorted_within)

_GO_LOG_STAMP = r"(?P<stamp>\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{1,9})?)"
# Numbers are bounded: they must fit the 64-bit columns they go to.
_ECHO = re.compile(
    rf"^{_GO_LOG_STAMP} received (?P<bytes>\d{{1,18}}) bytes from (?P<peer>\S+) \((?P<addr>[^)]*)\) "
    r"order=(?P<order>\d{1,18}) seq=(?P<seq>\d{1,18}) time=(?P<time>\S+)$"
)
# The commonest line exactly: read by compiled code (labkit.parsers.compiled) or, without it, its fields cut out of
# many lines at once by their spaces (:func:`_plain_echoes`).
_PLAIN_ECHO = (r"^\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2} received \d{1,9} bytes from [A-Za-z0-9._-]{1,64} "
               r"\([A-Za-z0-9._:-]{0,64}\) order=\d{1,9} seq=\d{1,9} time=\d{1,9}(?:\.\d{1,9})?(?:ns|us|µs|μs|ms|s)\n?$")
_ECHO_STATS_HEADER = re.compile(r"^--- (\S+) statistics ---$")
_NUMBER = r"(\d+(?:\.\d+)?)"
_ECHO_STATS_RTT = re.compile(rf"^round-trip min/avg/max/stddev = {_NUMBER}/{_NUMBER}/{_NUMBER}/{_NUMBER} ms$")
# A line not read that has these words may be a call's (cut short where a copy of the log was truncated): the
# rows would miss that call, so the line is unreadable, not merely unrecognised.
_ECHO_LIKE = re.compile(r"\breceived \d")
_IDLE_STEP_LIKE = re.compile(r"\b(?:Round trip|Payload)\b")
#: How far out of order (in seq) a line of the echo log may be and still be placed.
REACH = 2**15


def _to_utc(stamps, tz: str | None, lines=None):
    """Go's log writes local time without a zone: localise it in ``tz`` (UTC if unknown); an Arrow array of
    UTC timestamps (null where a stamp is null). ``lines`` as for :func:`_naive`."""
    return _localised(_naive(stamps, lines), tz, lines)


def _naive(stamps, lines=None):
    """Go log stamps as wall-clock times (Arrow timestamps without a zone; null where a stamp is null).

    ``lines``, the line of each stamp, names a stamp that is no time, or a time outside what a timestamp in
    nanoseconds holds, in errors (one line, not a traceback).
    """
    import pyarrow.compute as pc

    stamps, naive = _naive_or_null(stamps)
    bad = pc.index(pc.and_(stamps.is_valid(), naive.is_null()), True).as_py()
    if bad >= 0:
        where = f"line {lines[bad]}: " if lines is not None else ""
        raise ParseError(f"{where}{_not_a_time(stamps[bad].as_py())}")
    return naive


def _not_a_time(stamp: str) -> str:
    """Why ``stamp`` (a Go log stamp that is no timestamp in nanoseconds) is refused."""
    whole, _, fraction = stamp.partition(".")
    try:  # Python's datetime holds every date of the years 1 to 9999, and microseconds
        datetime.strptime(f"{whole}.{fraction[:6] or 0}", "%Y/%m/%d %H:%M:%S.%f")
    except ValueError:
        return f"{stamp!r} is not a date and time"
    return f"{stamp!r} is outside the times labkit can store ({STORABLE_TIMES})"


def _naive_or_null(stamps):
    """``stamps`` as an Arrow string array, and as wall-clock times: null where a stamp is null or no time that a
    timestamp in nanoseconds holds. Whole seconds (what Go's log writes by default) are read by Arrow; stamps with
    a fraction by pandas."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(stamps, pa.ChunkedArray):
        stamps = stamps.combine_chunks()
    stamps = stamps.cast(pa.string()) if isinstance(stamps, pa.Array) else pa.array(stamps, pa.string())
    fraction = pc.fill_null(pc.match_substring(stamps, "."), False)
    naive = pc.strptime(pc.if_else(fraction, pa.scalar(None, pa.string()), stamps), format="%Y/%m/%d %H:%M:%S",
                        unit="ns", error_is_null=True)
    # strptime rolls a day or second past the end over (Feb 30 is Mar 1, 23:59:60 the next day): refused.
    day, second = (pc.cast(pc.utf8_slice_codeunits(stamps, a, a + 2), pa.int64()) for a in (8, 17))
    rolled = pc.or_(pc.not_equal(pc.day(naive), day), pc.not_equal(pc.second(naive), second))
    naive = pc.if_else(pc.fill_null(rolled, False), pa.scalar(None, naive.type), naive)
    if pc.any(fraction).as_py():
        chosen = fraction.to_numpy(zero_copy_only=False)
        parsed = pd.to_datetime(pd.Series(stamps.filter(fraction).to_pylist(), dtype="object"),
                                format="%Y/%m/%d %H:%M:%S.%f", errors="coerce")
        # Fractions of up to six digits are read in microseconds, which hold the years 1 to 9999: a time there that
        # nanoseconds do not hold is no time here, not one wrapped round to another by the conversion.
        parsed = parsed.where((parsed >= pd.Timestamp.min) & (parsed <= pd.Timestamp.max)).astype("datetime64[ns]")
        values = naive.to_numpy(zero_copy_only=False).astype("datetime64[ns]")
        values[chosen] = parsed.to_numpy(dtype="datetime64[ns]")
        naive = pa.array(values, pa.timestamp("ns"), mask=np.isnat(values))
    return stamps, naive


def _localised(naive, tz: str | None, lines=None):
    """Wall-clock times (timestamps without a zone, or integer nanoseconds) read in ``tz`` (UTC if None), as UTC.
    ``lines``, the line of each time, names one that the zone puts outside the tables' times."""
    import pandas as pd
    import pyarrow as pa

    naive = naive.cast(pa.timestamp("ns"))
    if tz in (None, "UTC"):
        return naive.cast(pa.timestamp("ns", tz="UTC"))  # the wall-clock times are UTC's
    try:
        local = pd.Series(naive.to_pandas(), dtype="datetime64[ns]").dt.tz_localize(tz)
    except pd.errors.OutOfBoundsDatetime:  # a time within a day of either end, moved past it by the zone
        raise ParseError(_outside_in_zone(naive, tz, lines)) from None
    except (ValueError, TypeError) as exc:  # a time the zone skips or has twice (daylight saving)
        raise ParseError(f"a time of the log cannot be read in zone {tz}: {str(exc).splitlines()[0]}; "
                         "give --tz UTC if the log was written in UTC") from None
    return pa.array(local.dt.tz_convert("UTC"), pa.timestamp("ns", tz="UTC"))


def _outside_in_zone(naive, tz: str, lines=None) -> str:
    """Why the zone ``tz`` cannot place ``naive``: the first time it moves past the tables' times, and its line."""
    import pandas as pd

    values = pd.Series(naive.to_pandas(), dtype="datetime64[ns]")
    day = pd.Timedelta(days=1)  # no zone is a day from UTC
    for index, value in values[(values > pd.Timestamp.max - day) | (values < pd.Timestamp.min + day)].items():
        try:
            pd.Series([value], dtype="datetime64[ns]").dt.tz_localize(tz)
        except pd.errors.OutOfBoundsDatetime:
            where = f"line {lines[index]}: " if lines is not None else ""
            return f"{where}'{value}' in zone {tz} is outside the times labkit can store ({STORABLE_TIMES})"
    return f"a time of the log in zone {tz} is outside the times labkit can store ({STORABLE_TIMES})"


def _unit_name(unit: str) -> str:
    """Go's own spelling of a unit: µs for us, µs and μs."""
    return {"\u03bcs": "µs", "us": "µs", "\u00b5s": "µs"}.get(unit, unit)


#: Calls waiting in :class:`GoEchoParser` (``naive_ns``: the stamp's wall-clock time, as if it were UTC).
_ECHO_PENDING = {"seq": "int64", "order": "Int64", "line": "int64", "rtt_ms": "float64", "unit": "string",
                 "naive_ns": "Int64", "bytes": "Int64", "peer": "string"}


class GoEchoParser(StreamParser):
    """The 2016 echo client's log fed a chunk at a time: a row per ``received`` line, plus rows for missing seqs.

    Rows come out in seq order once no later line can come before them: a line more than :data:`REACH`
    seqs out of order is refused (the log is one client's, written as its calls end).
    """

    dtypes = {"seq": "int64", "order": "Int64", "rtt_ms": "float64", "unit": "string", "bytes": "Int64",
              "peer": "string", "ok": "bool"}

    def __init__(self, tz: str | None = None) -> None:
        import pyarrow as pa

        self.tz = tz
        self.schema = pa.schema([*arrow_schema(self.dtypes), ("t_utc", pa.timestamp("ns", tz="UTC"))])
        self.tally = LineTally()
        self.summary: dict = {}
        self.units: dict[str, int] = {}
        self.n = {"samples": 0, "missing": 0}
        self.window = SeqWindow(arrow_schema(_ECHO_PENDING), ["seq", "order", "line"], REACH)
        self.next_missing: int | None = None

    def prepare(self, text: str) -> Prepared:
        """The vectorised pass over a chunk (no state: it may run ahead, on another thread)."""
        import numpy as np

        lines = Lines(text)
        calls = echo_calls(lines)
        if calls is None:  # no compiled reader here: the plain lines found by a regex and cut out by numpy
            plain = lines.matching(_PLAIN_ECHO)
            rows = _plain_echoes(lines, plain)
            # A stamp that is no time goes to the line-by-line code, which names the first such line as the
            # compiled reader leaves it there: an error reads the same, and names the same line, both ways.
            timed = rows["naive_ns"].is_valid()
            plain, rows = plain[timed.to_numpy(zero_copy_only=False)], rows.filter(timed)
        else:
            plain, rows = calls["line"], _compiled_echoes(calls)
        left = np.ones(len(lines), dtype=bool)
        left[plain] = False
        slow = np.flatnonzero(left)
        return Prepared(len(lines), rows, lines.array.take(slow).to_pylist(), slow)

    def feed_prepared(self, chunk: Prepared) -> list:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        base = self.tally.lines
        self.tally.bulk(chunk.rows.num_rows, chunk.rows.num_rows)
        records = self._read_lines(chunk.rest, (base + chunk.rest_at + 1).tolist())
        plain = chunk.rows.set_column(chunk.rows.schema.get_field_index("line"), "line", pc.add(chunk.rows["line"], base))
        naive = pc.cast(_naive([record.pop("stamp") for record in records], [record["line"] for record in records]),
                        pa.int64()).to_pylist()
        others = pa.Table.from_pylist([{**record, "naive_ns": ns} for record, ns in zip(records, naive)],
                                      schema=self.window.schema)
        rows = pa.concat_tables([plain, others])
        self.window.see(rows["seq"].to_numpy(), where=f"line {base + 1} on: ")
        self._check_gaps(rows)
        self.window.add(rows)
        self.n["samples"] += rows.num_rows
        for unit, count in zip(*np.unique(rows["unit"].to_numpy(zero_copy_only=False).astype(str),
                                          return_counts=True)):
            self.units[unit] = self.units.get(unit, 0) + int(count)
        below = self.window.ready_below()
        return self._release(below) if below is not None else []

    def _read_lines(self, texts: list[str], numbers: list[int]) -> list[dict]:
        """The lines the vectorised pass did not read, one by one: their rows."""
        records = []
        for number, raw, line in lines_one_by_one(self.tally, texts, numbers):
            if m := _ECHO.match(line):
                try:
                    ns = parse_go_duration_ns(m["time"])
                except ValueError:
                    self.tally.unknown(number, raw)
                    continue
                records.append({"seq": int(m["seq"]), "order": int(m["order"]), "line": number, "rtt_ms": ns / 1e6,
                                "unit": go_duration_unit(m["time"]), "stamp": m["stamp"], "bytes": int(m["bytes"]),
                                "peer": m["addr"]})
            elif m := _ECHO_STATS_HEADER.match(line):
                self.summary["name"] = m.group(1)
            elif m := _ECHO_STATS_RTT.match(line):
                self.summary.update(
                    zip(("rtt_min_ms", "rtt_avg_ms", "rtt_max_ms", "rtt_stddev_ms"), map(float, m.groups())))
            else:
                self.tally.unknown(number, raw, looks_like_data=bool(_ECHO_LIKE.search(line)))
                continue
            self.tally.recognised()
        return records

    def _check_gaps(self, rows) -> None:
        """Refuse, before any is made, more rows for missing seqs than a log of the lines read so far may infer."""
        import numpy as np

        if not rows.num_rows:
            return
        lines = self.tally.lines
        missing = self.window.max_seen - self.window.min_seen + 1 - lines  # at least this many seqs are missing
        if missing > inferred_allowed(lines):
            highest = int(np.argmax(rows["seq"].to_numpy()))
            raise ParseError(f"line {rows['line'][highest].as_py()}: seq {rows['seq'][highest].as_py()} leaves "
                             f"{missing} seqs missing from {lines} lines, more than labkit infers from a log of this "
                             f"size ({inferred_allowed(lines)}): not one client's log")

    def finish(self) -> Iterator:
        return self._release(None)

    def _release(self, below: int | None) -> Iterator:
        """Rows below ``below`` (all for None), and rows for the seqs missing among them, in seq order.

        The rows read are taken from the window and the missing seqs counted now; the rows are made as the
        result is taken, :data:`INFERRED_BATCH` seqs at a time, so a long gap is never held whole."""
        if self.next_missing is None:
            if self.window.min_seen is None:
                return iter(())
            self.next_missing = self.window.min_seen
        if below is not None and below <= self.next_missing:
            return iter(())
        rows = self.window.release(below)
        start, end = self.next_missing, below if below is not None else (self.window.max_seen + 1)
        seqs = rows["seq"].to_numpy()
        self.n["missing"] += max(0, end - start) - sorted_within(seqs, start, end)[1]
        self.next_missing = max(start, end)
        return self._filled(rows, seqs, start, end)

    def _filled(self, rows, seqs, start: int, end: int) -> Iterator:
        """``rows`` (sorted by seq, every seq below ``end``) with a row for each seq from ``start`` to ``end`` that
        they lack, a batch of seqs at a time."""
        import numpy as np
        import pyarrow as pa

        for low in range(start, max(start, end), INFERRED_BATCH):
            high = min(end, low + INFERRED_BATCH)
            first, last = np.searchsorted(seqs, [low, high])
            first = 0 if low == start else first  # rows below start (none are expected) go with the first batch
            last = len(seqs) if high == end else last
            part = rows.slice(first, last - first)
            present = np.zeros(high - low, dtype=bool)
            inside = seqs[first:last]
            present[inside[(inside >= low) & (inside < high)] - low] = True
            missing = np.flatnonzero(~present) + low
            filled = sort_by(pa.concat_tables([part, _gap_rows(missing, self.window.schema)]), ["seq", "order", "line"])
            if not filled.num_rows:
                continue
            t_utc = _localised(filled["naive_ns"], self.tz, filled["line"].to_numpy())
            table = pa.table({name: filled[name] for name in ("seq", "order", "rtt_ms", "unit", "bytes", "peer")})
            table = table.append_column("ok", pa.array(filled["line"].to_numpy() > 0))
            table = table.append_column("t_utc", t_utc)
            yield table.cast(self.schema)

    def result(self) -> ParseResult:
        counts = self.tally.counts()
        counts.update(samples=self.n["samples"], missing=self.n["missing"])
        for unit in sorted(self.units):
            counts[f"unit_{unit}"] = self.units[unit]
        return ParseResult(rows=None, counts=counts, summary=self.summary, unrecognised_lines=self.tally.unrecognised,
                           unreadable_lines=self.tally.unreadable)


def _gap_rows(missing, schema):
    """Pending rows for seqs missing from the log: no time, no line (line 0 marks them)."""
    import pyarrow as pa

    n = len(missing)
    return pa.table({name: (pa.array(missing, pa.int64()) if name == "seq" else
                            pa.array([0] * n, pa.int64()) if name == "line" else
                            pa.array([float("nan")] * n) if name == "rtt_ms" else pa.nulls(n, schema.field(name).type))
                     for name in schema.names}, schema=schema)


def _plain_echoes(lines, at):
    """The rows of :data:`_PLAIN_ECHO` lines ``at`` of a chunk, their fields cut out between spaces (``line``
    numbered within the chunk)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    starts, ends, raw = lines.starts[at], lines.ends[at], lines.bytes
    spaces, first = lines.positions(ord(" "), at)
    space = [spaces[first + j] for j in range(10)]  # date, time, received, N, bytes, from, peer, (addr), order, seq
    number_start = space[9] + 6  # " time="
    # The unit, from the end: "s" after a digit, "ms"/"ns"/"us", or the two bytes of µ or μ and "s".
    before = raw[ends - 2]
    unit_bytes = np.where((before >= ord("0")) & (before <= ord("9")), 1, np.where(before >= 0x80, 3, 2))
    unit_names = np.where(unit_bytes == 1, "s", np.where(unit_bytes == 3, "µs",
                          np.where(before == ord("m"), "ms", np.where(before == ord("n"), "ns", "µs"))))
    number_end = ends - unit_bytes
    dot = np.minimum(lines.next_at(ord("."), number_start, number_end), number_end)  # the address has dots too
    frac_start = np.minimum(dot + 1, number_end)
    scale = np.select([unit_names == "s", unit_names == "ms", unit_names == "µs"],
                      [NS_PER_UNIT["s"], NS_PER_UNIT["ms"], NS_PER_UNIT["us"]], NS_PER_UNIT["ns"])
    nanos = digits(raw, number_start, dot) * scale + \
        digits(raw, frac_start, number_end) * scale // 10 ** (number_end - frac_start)
    return pa.table({
        # At most 9 digits each (:data:`_PLAIN_ECHO`): read in place, without cutting strings out first.
        "seq": digits(raw, space[8] + 5, space[9]), "order": digits(raw, space[7] + 7, space[8]),
        "line": pa.array(at + 1, pa.int64()), "rtt_ms": pa.array(nanos / 1e6),
        "unit": pa.array(unit_names, pa.string()),
        "naive_ns": pc.cast(_naive_or_null(lines.cut(starts, space[1]))[1], pa.int64()),
        "bytes": digits(raw, space[2] + 1, space[3]),
        "peer": pc.cast(lines.cut(space[6] + 2, space[7] - 1), pa.string()),
    }, schema=arrow_schema(_ECHO_PENDING))


def _compiled_echoes(calls: dict):
    """The rows of the plain lines read by compiled code (:func:`labkit.parsers.compiled.echo_calls`)."""
    import numpy as np
    import pyarrow as pa

    units = pa.DictionaryArray.from_arrays(calls["unit"].astype(np.int32), ECHO_UNITS).cast(pa.string())
    return pa.table({
        "seq": calls["seq"], "order": calls["order"], "line": calls["line"] + 1, "rtt_ms": calls["nanos"] / 1e6,
        "unit": units, "naive_ns": calls["naive_ns"], "bytes": calls["bytes"], "peer": calls["peer"],
    }, schema=arrow_schema(_ECHO_PENDING))


def parse_go_echo_log(text: str, *, tz: str | None = None) -> ParseResult:
    """Parse the 2016 Go echo client log: one row per ``received`` line, plus rows for missing seqs.

    Row columns: ``seq``, ``order``, ``rtt_ms`` (float, NaN when missing),
    ``unit`` (the unit Go wrote the duration in: ns, µs, ms, s, m or h),
    ``t_utc`` (the log timestamp, read in ``tz``, which defaults to UTC because
    Go's log does not say its zone), ``bytes``, ``peer``, ``ok`` (False for
    a seq missing between the first and last one seen).

    Counts: ``samples`` (received lines), ``missing`` (seqs absent in the
    range seen), and ``unit_<u>`` for every unit met (``unit_s`` is the number
    of samples written in seconds). ``summary`` has the client's closing
    ``round-trip min/avg/max/stddev`` line when present.
    """
    result = parse_whole(GoEchoParser(tz), text)
    result.rows = result.rows[["seq", "order", "rtt_ms", "unit", "t_utc", "bytes", "peer", "ok"]]
    return result


_PAYLOAD = re.compile(rf"^(?:{_GO_LOG_STAMP} )?Payload size: (?P<size>\d{{1,18}}) bytes?$")
_ROUND_TRIP = re.compile(rf"^(?:{_GO_LOG_STAMP} )?Round trip time: (?P<time>\S+)$")


class IdleStepParser(StreamParser):
    """The idle-step client's output fed a chunk at a time: a row per ``Round trip time`` line, in order."""

    dtypes = {"call": "int64", "payload_bytes": "Int64", "index_in_size": "int64", "rtt_ms": "float64",
              "unit": "string", "ok": "bool"}

    def __init__(self, tz: str | None = None) -> None:
        import pyarrow as pa

        self.tz = tz
        self.schema = pa.schema([*arrow_schema(self.dtypes), ("t_utc", pa.timestamp("ns", tz="UTC"))])
        self.tally = LineTally()
        self.size: int | None = None
        self.index_in_size = 0
        self.n = {"calls": 0, "sizes": 0, "calls_without_size": 0}

    def feed_prepared(self, text: str) -> list:
        import pyarrow as pa

        records, numbers = [], []
        for number, raw in line_numbers(text, self.tally.lines):
            line = self.tally.prepare(raw)
            if line is None:
                continue
            if m := _PAYLOAD.match(line):
                self.size, self.index_in_size = int(m["size"]), 0
                self.n["sizes"] += 1
            elif (m := _ROUND_TRIP.match(line)) and _is_duration(m["time"]):
                records.append({"call": self.n["calls"], "payload_bytes": self.size, "index_in_size": self.index_in_size,
                                "rtt_ms": parse_go_duration_ns(m["time"]) / 1e6, "unit": go_duration_unit(m["time"]),
                                "ok": True})
                numbers.append((number, m["stamp"]))
                self.n["calls"] += 1
                self.n["calls_without_size"] += self.size is None
                self.index_in_size += 1
            else:
                self.tally.unknown(number, raw, looks_like_data=bool(_IDLE_STEP_LIKE.search(line)))
                continue
            self.tally.recognised()
        if not records:
            return []
        table = pa.Table.from_pylist(records, schema=pa.schema(list(self.schema)[:-1]))
        stamps = [stamp for _, stamp in numbers]
        t_utc = _to_utc(stamps, self.tz, [n for n, _ in numbers])
        return [table.append_column("t_utc", t_utc)]

    def finish(self) -> list:
        return []

    def result(self) -> ParseResult:
        counts = self.tally.counts()
        counts.update(self.n)
        return ParseResult(rows=None, counts=counts, unrecognised_lines=self.tally.unrecognised,
                           unreadable_lines=self.tally.unreadable)


def parse_idle_step_output(text: str, *, tz: str | None = None) -> ParseResult:
    """Parse the idle-step client's output: one row per ``Round trip time`` line.

    Row columns: ``call`` (0-based, in output order), ``payload_bytes`` (from
    the latest ``Payload size`` line, NA before any), ``index_in_size`` (0 for
    the first call after a ``Payload size`` line), ``rtt_ms``, ``unit``,
    ``t_utc`` (when the line has a Go log timestamp, read in ``tz``), ``ok``.

    Counts: ``calls``, ``sizes`` (``Payload size`` lines), ``calls_without_size``.
    """
    result = parse_whole(IdleStepParser(tz), text)
    result.rows = result.rows[["call", "payload_bytes", "index_in_size", "rtt_ms", "unit", "ok", "t_utc"]]
    return result


def _is_duration(text: str) -> bool:
    try:
        parse_go_duration_ns(text)
    except ValueError:
        return False
    return True
