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
from labkit.parsers.goclient import GoEchoParser, IdleStepParser
from labkit.parsers.ping import PingParser
from labkit.parsers.stream import line_chunks

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
ORCA = ROOT / "data" / "external" / "orca-2016"

RECORDED = sorted((DATA / "ping").glob("*.txt"))


def streamed(parser, text: str, size: int):
    """Every row ``parser`` gives for ``text`` fed in chunks of about ``size`` characters, and its result."""
    import pyarrow as pa

    batches = [batch for chunk in line_chunks(text, size) for batch in parser.feed(chunk)] + parser.finish()
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
