"""The streaming parsers (labkit.parsers.stream) on real recorded output: the rows do not depend on where a log
is cut into chunks, and a long log (real recorded lines repeated, numbered on as the tool numbers them) gives one
row per probe with the lost ones where they were taken out.

Every line here is a line of a recorded file (tests/data/README.md, data/external/orca-2016/README.md); only
the icmp_seq / seq numbers of repeated lines are rewritten, as ping and the echo client would have counted on.
"""

from __future__ import annotations

import gzip
import random
import re
from pathlib import Path

import numpy as np
import pytest

from labkit.parsers.base import ParseError
from labkit.parsers.goclient import GoEchoParser, IdleStepParser, parse_go_echo_log
from labkit.parsers.ping import PingParser, parse_ping
from labkit.parsers.stream import line_chunks

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
ORCA = ROOT / "data" / "external" / "orca-2016"

RECORDED = sorted((DATA / "ping").glob("*.txt"))


def streamed(parser, text: str, size: int):
    """Every row ``parser`` gives for ``text`` fed in chunks of about ``size`` characters, and its result."""
    import pyarrow as pa

    batches = [batch for chunk in line_chunks(text, size) for batch in parser.feed(chunk)] + list(parser.finish())
    table = pa.concat_tables(batches) if batches else parser.schema.empty_table()
    return table, parser.result()


def _same(make, text: str, sizes=(1, 37, 4096)) -> None:
    """The rows and counts of ``text`` in one chunk equal those of ``text`` cut every way in ``sizes``."""
    whole, result = streamed(make(), text, len(text) + 1)
    for size in sizes:
        cut, cut_result = streamed(make(), text, size)
        # Compared as DataFrames: a lost probe's rtt is NaN, which Arrow's equals never finds equal to itself.
        assert cut.schema == whole.schema and cut.num_rows == whole.num_rows
        assert cut.to_pandas().equals(whole.to_pandas()), f"rows differ with chunks of {size} characters"
        assert cut_result.counts == result.counts and cut_result.summary == result.summary
        assert cut_result.unrecognised_lines == result.unrecognised_lines
        assert cut_result.unreadable_lines == result.unreadable_lines and cut_result.doubt == result.doubt


@pytest.mark.parametrize("path", RECORDED, ids=[p.name for p in RECORDED])
def test_ping_rows_do_not_depend_on_the_chunks(path):
    _same(PingParser, path.read_text())


def test_orca_logs_rows_do_not_depend_on_the_chunks():
    _same(PingParser, gzip.decompress((ORCA / "ping.txt.gz").read_bytes()).decode(), sizes=(1500, 40000))
    echo = gzip.decompress((ORCA / "echo.txt.gz").read_bytes()).decode()
    _same(lambda: GoEchoParser("America/New_York"), echo, sizes=(1500, 40000))


def test_idle_step_rows_do_not_depend_on_the_chunks():
    _same(IdleStepParser, (DATA / "idle_step" / "standin_loopback.txt").read_text())


def _orca_lines(name: str) -> list[str]:
    return gzip.decompress((ORCA / name).read_bytes()).decode().splitlines()


def test_a_long_ping_log_wraps_icmp_seq_and_keeps_each_lost_probe():
    """150,000 probes (icmp_seq wraps at 65536 twice) from the 2016 log's reply lines; the replies to six
    probes, two on each side of a wrap, taken out: exactly those are lost rows, at their unwrapped seq."""
    lines = _orca_lines("ping.txt.gz")
    replies = [re.sub(r"icmp_seq=\d+", "icmp_seq={}", line) for line in lines if " bytes from " in line]
    probes, lost = 150_000, [65534, 65535, 65536, 65537, 131071, 140000]
    kept = np.setdiff1d(np.arange(probes), lost)
    body = "".join(replies[i % len(replies)].format(i % 65536) + "\n" for i in kept)
    footer = f"\n--- 128.8.126.120 ping statistics ---\n{probes} packets transmitted, {len(kept)} packets received\n"
    table, result = streamed(PingParser(), lines[0] + "\n" + body + footer, 2**20)
    assert table["seq"].to_pylist() == list(range(probes))  # one row per probe, in order, unwrapped
    ok = np.asarray(table["ok"].to_pylist())
    assert ok.sum() == len(kept) and np.flatnonzero(~ok).tolist() == lost
    assert result.counts["replies"] == len(kept) and result.counts["lost"] == len(lost) and result.doubt is None


def test_a_long_echo_log_fills_each_missing_call():
    """100,000 calls from the 2016 echo log's lines (order and seq counting on, a second apart); five calls'
    lines taken out, and the lines shuffled a little (as concurrent calls end out of order): the missing calls
    are rows with ok false, every other call is a sample, in seq order."""
    calls = [line.split(" received ", 1)[1] for line in _orca_lines("echo.txt.gz") if " received " in line]
    calls = [re.sub(r"order=\d+ seq=\d+", "order={0} seq={0}", call) for call in calls]
    n, missing = 100_000, [1, 2, 50_000, 99_999, 100_000]
    seqs = [s for s in range(1, n + 1) if s not in set(missing)]
    rng = random.Random(15)
    for i in range(0, len(seqs) - 3, 997):  # neighbours swapped: a call that ended before the one started first
        seqs[i], seqs[i + 1] = seqs[i + 1], seqs[i]
    start = 1478089496
    text = "".join(f"2016/11/02 {(start + s) // 3600 % 24:02d}:{(start + s) // 60 % 60:02d}:{(start + s) % 60:02d} "
                   f"received {calls[s % len(calls)].format(s)}\n" for s in seqs)
    table, result = streamed(GoEchoParser(), "go run cmd/orca.go ping -n 100000 128.8.126.120:3265\n" + text,
                             rng.randrange(2**18, 2**20))
    # The log starts at the first call it has (seq 3): calls before it are not known to have been made.
    assert table["seq"].to_pylist() == list(range(3, n - 1))  # and ends at the last it has (99,998)
    ok = np.asarray(table["ok"].to_pylist())
    assert np.flatnonzero(~ok).tolist() == [50_000 - 3] and result.counts["missing"] == 1
    assert result.counts["samples"] == n - len(missing) and result.counts["unrecognised"] == 1


@pytest.mark.parametrize("stamp", ["2016/02/30 08:24:56", "2016/11/02 23:59:60", "2016/13/02 08:24:56",
                                   "2016/02/30 08:24:56.5"])
def test_an_echo_stamp_that_is_no_time_is_refused_naming_its_line(stamp):
    """A recorded line with its stamp made impossible (a day or second past the end, which strptime would roll
    over into the next): one error naming the line, never a row at another time."""
    lines = _orca_lines("echo.txt.gz")[:10]
    lines[5] = stamp + lines[5][len("2016/11/02 08:24:56"):]
    with pytest.raises(ParseError, match=rf"line 6: '{re.escape(stamp)}' is not a date and time"):
        streamed(GoEchoParser(), "\n".join(lines) + "\n", 2**20)


# --- the compiled reader (labkit.parsers.compiled) against the regex and numpy way ---------------------------------

def _both_ways(monkeypatch, parse):
    """What ``parse()`` gives with the compiled reader, and without it (every line read the other way)."""
    from labkit.parsers import compiled

    assert compiled.library() is not None, "scripts/bootstrap.sh builds labkit/parsers/_lines.so"
    with_it = parse()
    with monkeypatch.context() as patched:
        patched.setattr(compiled, "library", lambda: None)
        without = parse()
    return with_it, without


def _same_result(a, b) -> None:
    assert a.rows.equals(b.rows)
    assert (a.counts, a.summary, a.unrecognised_lines, a.unreadable_lines, a.doubt) == \
        (b.counts, b.summary, b.unrecognised_lines, b.unreadable_lines, b.doubt)


# Recorded reply lines, each with one field written another way that ping (or a copy of its log) can give: the
# compiled reader must read each exactly as the regex does, or leave it to the regex.
_VARIANTS = [
    lambda line: line,
    lambda line: line.replace(" ms", " ms (DUP!)"),
    lambda line: line.replace("icmp_seq=", "seq="),
    lambda line: line + "\r",  # a copy with Windows line ends
    lambda line: line.replace("time=", "time=123456789012.123"),  # more digits than a double holds exactly
    lambda line: line.replace("time=", "time=1").replace(" ms", "9 ms"),
    lambda line: re.sub(r"icmp_seq=\d+", "icmp_seq=1234567890", line),  # more digits than ping's pattern takes
    lambda line: re.sub(r"from [^:]+:", "from " + "h" * 64 + ":", line),  # the longest name it takes
    lambda line: re.sub(r"from [^:]+:", "from " + "h" * 65 + ":", line),
    lambda line: re.sub(r"from [^:]+:", "from gateway (10.0.0.1):", line),
    lambda line: re.sub(r"ttl=\d+", "ttl=", line),
    lambda line: line.replace(" ms", "ms"),
    lambda line: "  " + line,
    lambda line: line.replace(" bytes", "  bytes"),
]
_STAMPS = ["", "[1795336072.051477] ", "[1795336072] ", "[1795336072.0514771234] ", "[1795.051477123456] ",
           "[8999999999.5] ", "[9223372036.854775807] ", "[1795336072.] ", "[17953360720000.1] "]


def test_the_compiled_reader_reads_ping_as_the_regex_does(monkeypatch):
    """Every recorded ping output, the 2016 log, and recorded replies written every way above (with and without
    -D stamps of every width): the same rows, counts and unread lines with the compiled reader as without."""
    texts = [path.read_text() for path in RECORDED]
    texts.append(gzip.decompress((ORCA / "ping.txt.gz").read_bytes()).decode())
    replies = [line for line in (DATA / "ping" / "linux_lo.txt").read_text().splitlines() if " bytes from " in line]
    header = (DATA / "ping" / "linux_lo.txt").read_text().splitlines()[0]
    texts += [header + "\n" + "".join(stamp + variant(line) + "\n" for line in replies) for variant in _VARIANTS
              for stamp in _STAMPS]
    for text in texts:
        _same_result(*_both_ways(monkeypatch, lambda: parse_ping(text)))
    from labkit.parsers.compiled import ping_replies
    from labkit.parsers.ping import _PENDING
    from labkit.parsers.stream import Lines, arrow_schema

    plain, _ = ping_replies(Lines(texts[-len(_VARIANTS) * len(_STAMPS)]), arrow_schema(_PENDING))
    assert plain.num_rows == len(replies)  # the plain lines were the compiled reader's


@pytest.mark.parametrize("tz", [None, "America/New_York"])
def test_the_compiled_reader_reads_the_echo_log_as_the_regex_does(monkeypatch, tz):
    """The 2016 echo log, and its lines with a field written another way (each unit Go writes, other stamps):
    the same rows with the compiled reader as without."""
    text = gzip.decompress((ORCA / "echo.txt.gz").read_bytes()).decode()
    lines = text.splitlines()
    calls = [line for line in lines if " received " in line][:40]
    variants = [re.sub(r"time=[\d.]+ms", unit, line) for unit in
                ("time=1.868983839s", "time=950.5µs", "time=950.5μs", "time=950.5us", "time=950ns", "time=27ms",
                 "time=1234567890ms", "time=1.2345678901ms", "time=2m3s")
                for line in calls[:3]]
    variants += [line[:11] + "23:59:59" + line[19:] for line in calls[:2]]
    variants += [line.replace("2016/11/02", "2016/02/29") for line in calls[:2]]
    variants += [re.sub(r"\(\S+\)", "()", line) for line in calls[:2]]
    variants += [re.sub(r"order=\d+", "order=", line) for line in calls[:2]]
    variants += [re.sub(r"seq=(\d+)", r"seq=\1 ", line) for line in calls[:2]]
    for log in (text, "\n".join(lines[:1] + variants + calls[10:]) + "\n"):
        _same_result(*_both_ways(monkeypatch, lambda: parse_go_echo_log(log, tz=tz)))


# --- times the tables cannot hold: refused, naming the line, the same both ways --------------------------------------

#: What a timestamp in nanoseconds (datetime64[ns], the tables' time columns) holds.
STORABLE = "1677-09-21 00:12:43.145224193 to 2262-04-11 23:47:16.854775807 UTC"


def _error_both_ways(monkeypatch, parse) -> str:
    """The error ``parse()`` raises with the compiled reader, which must be the one it raises without it."""
    errors = []

    def refused():
        with pytest.raises(ParseError) as caught:
            parse()
        errors.append(str(caught.value))

    _both_ways(monkeypatch, refused)
    assert errors[0] == errors[1], "the two ways refuse differently"
    return errors[0]


def _echo_with_stamps(stamps: dict[int, str]) -> str:
    """The 2016 echo log's first lines (line 1 is its command line), with the stamps of ``stamps``' lines replaced."""
    lines = _orca_lines("echo.txt.gz")[:8]
    for number, stamp in stamps.items():
        lines[number - 1] = stamp + lines[number - 1][len("2016/11/02 08:24:56"):]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("stamp,ns", [
    ("2262/04/11 23:47:16", 9223372036 * 10**9),  # the last whole second the tables hold
    ("2262/04/11 23:47:16.854775807", 2**63 - 1),  # the last instant
    ("1677/09/21 00:12:44", -9223372036 * 10**9),  # the first whole second
    ("1677/09/21 00:12:43.145224193", -(2**63) + 1),  # the first instant
])
def test_an_echo_time_at_the_edge_of_the_tables_is_read_both_ways(monkeypatch, stamp, ns):
    """Recorded lines with the stamp of line 4 at an end of what the tables' times hold: read, the same with the
    compiled reader as without, and at exactly that time."""
    with_it, without = _both_ways(monkeypatch, lambda: parse_go_echo_log(_echo_with_stamps({4: stamp})))
    _same_result(with_it, without)
    assert with_it.rows["t_utc"].astype("int64").tolist()[2] == ns  # line 4 is the third call


@pytest.mark.parametrize("stamp", ["2262/04/11 23:47:17", "2262/04/12 00:00:00", "2263/01/01 00:00:00",
                                   "9999/12/31 23:59:59", "1677/09/21 00:12:43", "0001/01/01 00:00:00",
                                   "2262/04/11 23:47:16.854775808", "1677/09/21 00:12:43.145224192",
                                   "2262/04/11 23:47:16.854776"])  # microseconds: read another way
def test_an_echo_time_past_the_tables_is_refused_naming_its_line_both_ways(monkeypatch, stamp):
    """A recorded line dated just past either end of what the tables hold, or far past (years 1 and 9999): one
    error naming line 4, the same with the compiled reader as without (which once stored 9999/12/31 as
    1816-03-29)."""
    error = _error_both_ways(monkeypatch, lambda: parse_go_echo_log(_echo_with_stamps({4: stamp})))
    assert error == f"line 4: '{stamp}' is outside the times labkit can store ({STORABLE})"


@pytest.mark.parametrize("stamp,tz", [("2262/04/11 23:47:16", "America/New_York"),
                                     ("1677/09/21 00:12:44", "Asia/Tokyo")])
def test_an_echo_time_its_zone_moves_past_the_tables_is_refused_naming_its_line_both_ways(monkeypatch, stamp, tz):
    """A time the tables hold as written, which the log's zone (``--tz``) moves past their end once read as UTC:
    one error naming line 4, the same both ways."""
    error = _error_both_ways(monkeypatch, lambda: parse_go_echo_log(_echo_with_stamps({4: stamp}), tz=tz))
    written = stamp.replace("/", "-")
    assert error == f"line 4: '{written}' in zone {tz} is outside the times labkit can store ({STORABLE})"


def test_the_first_echo_line_past_the_tables_is_the_one_named_both_ways(monkeypatch):
    """Two lines past the tables' times, line 3 with a fraction of a second (which only the line-by-line code
    reads) and line 6 in the plain shape (which the compiled reader reads): both ways name line 3, the first."""
    log = _echo_with_stamps({3: "9999/12/31 23:59:59.5", 6: "9999/12/31 23:59:59"})
    error = _error_both_ways(monkeypatch, lambda: parse_go_echo_log(log))
    assert error.startswith("line 3: '9999/12/31 23:59:59.5' is outside the times labkit can store")


def _ping_with_stamp(stamp: str, number: int = 4) -> str:
    """linux_lo_D.txt (iputils -D), its line ``number`` stamped ``stamp``."""
    lines = (DATA / "ping" / "linux_lo_D.txt").read_text().splitlines()
    lines[number - 1] = re.sub(r"^\[[\d.]+\]", stamp, lines[number - 1])
    return "\n".join(lines) + "\n"


def test_a_ping_stamp_at_the_end_of_the_tables_is_read_both_ways(monkeypatch):
    with_it, without = _both_ways(monkeypatch, lambda: parse_ping(_ping_with_stamp("[9223372036.854775807]")))
    _same_result(with_it, without)
    assert with_it.rows["t_utc_ns"].tolist()[2] == 2**63 - 1  # line 4 is the third reply


@pytest.mark.parametrize("stamp", ["[9223372036.854775808]", "[9999999999.5]", "[99999999999.5]"])
def test_a_ping_stamp_past_the_tables_is_refused_naming_its_line_both_ways(monkeypatch, stamp):
    """A -D stamp past the last time the tables hold: one error naming its line, the same both ways (both once
    stored [99999999999.5] wrapped round to another time)."""
    error = _error_both_ways(monkeypatch, lambda: parse_ping(_ping_with_stamp(stamp)))
    assert error == f"line 4: the stamp {stamp} is outside the times labkit can store ({STORABLE})"
