"""Picking the client's own connection out of real ``ss -tinp`` output.

The recording (tests/data/ss/ss-tinp-two-clients-testbed.txt) was taken on the
testbed (50 ms one way, cubic) with two `labkit echo call` processes, pids
13942 (30000 B requests, caught mid-send) and 13944 (100 B), talking to one
server at 198.18.0.2:50051.
"""

from __future__ import annotations

from conftest import DATA

from labkit.echo.tcpinfo import TCP_COLUMNS, pick_connection
from labkit.parsers.ss import ss_argv

RECORDING = (DATA / "ss" / "ss-tinp-two-clients-testbed.txt").read_text()


def test_picks_the_connection_of_the_given_process():
    big = pick_connection(RECORDING, 13942)
    small = pick_connection(RECORDING, 13944)
    assert big["local"] == "[::ffff:198.18.0.1]:39776"
    assert (big["cwnd"], big["mss"], big["congestion_control"], big["bytes_acked"]) == (10, 1408, "cubic", 30412)
    assert big["rto_ms"] == 304 and abs(big["rtt_ms"] - 100.243) < 1e-9
    assert small["local"] == "[::ffff:198.18.0.1]:39778" and small["bytes_acked"] == 687


def test_no_connection_for_another_process():
    assert pick_connection(RECORDING, 99999) is None
    # pid 1394 is a prefix of both pids in the recording: it must not match either.
    assert pick_connection(RECORDING, 1394) is None
    assert pick_connection("", 13942) is None


def test_ss_command_filters_on_the_target():
    assert ss_argv("198.18.0.2", 50051)[-2:] == ["dst", "198.18.0.2:50051"]
    assert ss_argv("::1", 80)[-1] == "[::1]:80"
    assert "cwnd_before" in TCP_COLUMNS and "cwnd_after" in TCP_COLUMNS and "mss" in TCP_COLUMNS
