"""irtt's argv and JSON (labkit/parsers/irtt.py) on real irtt 0.9.0 runs recorded in tests/data/irtt/.

The expected values come from the JSON itself, read here with json and independent arithmetic (irtt's own
per-packet delays and statistics, its lost marks), and from the links the runs crossed; never from the parser.
tests/data/README.md says how each file was made (tests/data/tools/record_irtt.py). The argv builders run the
real irtt on loopback.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import LABKIT
from labkit.errors import LabkitError
from labkit.parsers import ParseError
from labkit.parsers.irtt import (go_duration, irtt_client_argv, irtt_server_argv, parse_irtt,
                                 parse_irtt_listening)

DATA = Path(__file__).resolve().parent / "data" / "irtt"
RECORDINGS = ["loopback", "loopback_comp", "asymmetric", "loss"]


def text(name: str) -> str:
    return (DATA / f"{name}.json").read_text()


def raw(name: str) -> dict:
    return json.loads(text(name))


def lost_in(data: dict) -> dict[int, str]:
    """seqno -> irtt's lost mark, for the packets irtt marked lost."""
    return {trip["seqno"]: trip["lost"] for trip in data["round_trips"] if trip["lost"] not in (False, "false")}


@pytest.mark.parametrize("name", RECORDINGS)
def test_one_row_per_round_trip_with_irtts_stamps(name):
    data, result = raw(name), parse_irtt(text(name))
    rows, trips = result.rows, data["round_trips"]
    assert len(rows) == len(trips) == data["stats"]["packets_sent"]
    assert (rows["probe"] == "irtt").all() and not rows["duplicate"].any()
    assert list(rows["seq"]) == [trip["seqno"] for trip in trips] == list(range(len(trips)))
    assert list(rows["t_utc_ns"]) == [trip["timestamps"]["client"]["send"]["wall"] for trip in trips]
    lost = lost_in(data)
    assert int((~rows["ok"]).sum()) == len(lost) == data["stats"]["packets_sent"] - data["stats"]["packets_received"]
    assert result.counts == {"lines": len(text(name).splitlines()), "round_trips": len(trips),
                             "replies": len(trips) - len(lost), "lost": len(lost)}
    # The packet length irtt used (its header needs 60 bytes with both stamps on both clocks), as it reports it.
    assert (rows["payload_bytes"] == data["config"]["params"]["length"]).all()
    for trip, row in zip(trips, rows.itertuples(index=False)):
        if trip["seqno"] in lost:
            continue
        client, server = trip["timestamps"]["client"], trip["timestamps"]["server"]
        # The whole round trip as the client saw it, on its monotonic clock: the server's time included.
        assert row.rtt_ms == (client["receive"]["monotonic"] - client["send"]["monotonic"]) / 1e6
        assert row.server_recv_utc_ns == server["receive"]["wall"]
        assert row.server_send_utc_ns == server["send"]["wall"]
        assert row.ok and row.error == "" and row.unit == "ns"


@pytest.mark.parametrize("name", RECORDINGS)
def test_each_ways_delay_is_irtts_own(name):
    """labkit's arithmetic on the rows (as labkit.analysis.oneway does it) gives irtt's own send and receive delays,
    packet by packet: the way out to the ns, the way back to the ns the client's wall and monotonic clocks may part
    over one round trip, and the round trip less the server's time irtt's rtt."""
    data, rows = raw(name), parse_irtt(text(name)).rows
    ok = rows[rows["ok"]]
    delays = {trip["seqno"]: trip["delay"] for trip in data["round_trips"] if trip["seqno"] not in lost_in(data)}
    assert sorted(delays) == list(ok["seq"])
    send = [delays[seq]["send"] for seq in ok["seq"]]
    receive = [delays[seq]["receive"] / 1e6 for seq in ok["seq"]]
    rtt = [delays[seq]["rtt"] / 1e6 for seq in ok["seq"]]
    out_ns = ok["server_recv_utc_ns"] - ok["t_utc_ns"]
    back_ms = (ok["t_utc_ns"] - ok["server_send_utc_ns"]).astype(float) / 1e6 + ok["rtt_ms"]
    server_ms = (ok["server_send_utc_ns"] - ok["server_recv_utc_ns"]).astype(float) / 1e6
    assert list(out_ns) == send
    assert np.allclose(back_ms, receive, rtol=0, atol=1e-3)
    assert np.allclose(ok["rtt_ms"] - server_ms, rtt, rtol=0, atol=1e-3)


def test_the_asymmetric_links_two_ways():
    """30 ms a -> b and 70 ms b -> a on the testbed (one clock for both hosts): each way at least its link's delay,
    its median within 1 ms of it, and irtt's own medians of each way within a µs of the rows'."""
    data, result = raw("asymmetric"), parse_irtt(text("asymmetric"))
    rows = result.rows
    assert rows["ok"].all() and len(rows) == 50
    out_ms = (rows["server_recv_utc_ns"] - rows["t_utc_ns"]).astype(float) / 1e6
    back_ms = (rows["t_utc_ns"] - rows["server_send_utc_ns"]).astype(float) / 1e6 + rows["rtt_ms"]
    assert (out_ms >= 30).all() and (back_ms >= 70).all()
    assert abs(out_ms.median() - 30) < 1 and abs(back_ms.median() - 70) < 1, (out_ms.median(), back_ms.median())
    assert abs(rows["rtt_ms"].median() - 100) < 2
    stats = data["stats"]
    assert [result.summary[way] for way in ("send_delay", "receive_delay")] == [stats["send_delay"],
                                                                                 stats["receive_delay"]]
    assert abs(out_ms.median() - stats["send_delay"]["median"] / 1e6) < 1e-3
    assert abs(back_ms.median() - stats["receive_delay"]["median"] / 1e6) < 1e-3
    assert (result.summary["stamp_at"], result.summary["clock"]) == ("both", "both")


def test_lost_packets_are_rows_that_say_so():
    """10 % loss each way: every packet irtt marked lost is a row, ok False, 'no reply', no time and no server
    stamp (a reply lost on its way back carried them); irtt's direction of each loss is in the summary."""
    data, result = raw("loss"), parse_irtt(text("loss"))
    rows, lost = result.rows, lost_in(data)
    kinds = {"true_up": "up", "true_down": "down", "true": "unknown"}
    assert len(rows) == 80 and 10 <= len(lost) <= 25
    assert {kinds[mark] for mark in lost.values()} >= {"up", "down"}  # both directions lost some
    gone = rows[~rows["ok"]]
    assert list(gone["seq"]) == sorted(lost)
    assert (gone["error"] == "no reply").all() and gone["rtt_ms"].isna().all() and gone["unit"].isna().all()
    assert gone[["server_recv_utc_ns", "server_send_utc_ns"]].isna().all().all()
    assert result.summary["lost_seqnos"] == {seq: kinds[mark] for seq, mark in lost.items()}
    assert result.summary["lost"] == {kind: sum(kinds[mark] == kind for mark in lost.values())
                                      for kind in ("up", "down", "unknown")}
    # The server received every packet but those lost on the way out (a loss of unknown direction may be either).
    received = int(rows["ok"].sum())
    down, unknown = result.summary["lost"]["down"], result.summary["lost"]["unknown"]
    assert received + down <= data["stats"]["server_packets_received"] <= received + down + unknown
    assert result.summary["packets_received"] == received == data["stats"]["packets_received"]


def test_slots_count_the_intervals_irtts_timer_skipped():
    """irtt's default timer wakes a little early now and then, and its send loop then skips the next interval: its
    seqno runs behind the interval a packet went in. The slot is that interval, from the send times."""
    data, rows = raw("loopback_comp"), parse_irtt(text("loopback_comp")).rows
    interval = data["config"]["params"]["interval"]
    assert interval == 100_000_000 and len(rows) < 100  # 10 s: fewer packets than intervals
    sends = np.array([trip["timestamps"]["client"]["send"]["monotonic"] for trip in data["round_trips"]])
    # Every packet within a few ms of the start of its slot; slots strictly rising, some ahead of their seqno.
    assert np.abs(sends - sends[0] - rows["slot"].to_numpy() * interval).max() < 5e6
    assert (np.diff(rows["slot"]) >= 1).all() and (rows["slot"] > rows["seq"]).any() and rows["slot"].max() < 100
    # With the timer labkit asks for (Go's plain one), nothing was skipped.
    for name in ("loopback", "asymmetric", "loss"):
        plain = parse_irtt(text(name)).rows
        assert (plain["slot"] == plain["seq"]).all(), name


@pytest.mark.parametrize("bad, says", [
    ("", "empty"),
    ("{\"version\": {", "invalid JSON"),
    ("[1, 2]", "no 'version' object"),
])
def test_what_is_not_irtts_json_is_one_line(bad, says):
    with pytest.raises(ParseError, match=says) as caught:
        parse_irtt(bad)
    assert "\n" not in str(caught.value) and isinstance(caught.value, LabkitError)


def test_a_cut_recording_and_another_tools_json_are_refused():
    whole = text("asymmetric")
    with pytest.raises(ParseError, match="invalid JSON"):
        parse_irtt(whole[: len(whole) // 2])
    iperf3 = (DATA.parent / "iperf3" / "client_100M.json").read_text()
    with pytest.raises(ParseError, match="no 'version' object"):
        parse_irtt(iperf3)
    other_format = raw("loopback")
    other_format["version"]["json_format"] = 2
    with pytest.raises(ParseError, match="JSON format 2 is not the one labkit reads"):
        parse_irtt(json.dumps(other_format))


# -- the argv, through the real irtt on loopback -----------------------------------------------------------------

def test_the_server_binds_one_address_only():
    for everywhere in ("0.0.0.0", "::", "", "%eth0"):
        with pytest.raises(ValueError, match="one address"):
            irtt_server_argv(everywhere, max_duration_s=10, min_interval_s=0.1, max_length=100)
    argv = irtt_server_argv("fd00::2", 0, max_duration_s=10, min_interval_s=0.1, max_length=100)
    assert argv[argv.index("-b") + 1] == "[fd00::2]:0"
    assert go_duration(0.1) == "100000000ns" and go_duration(3 * 0.1) == "300000000ns"
    with pytest.raises(ValueError):
        go_duration(math.nan)


@pytest.mark.skipif(shutil.which("irtt") is None, reason="irtt is not installed (scripts/bootstrap.sh installs it)")
def test_argv_run_the_real_irtt_within_the_servers_bounds():
    """The server's argv on loopback, port 0: its listening line names the port. The client's argv gets JSON the
    parser reads; a client asking for more than the server's bounds is refused by irtt in one line (exit 1)."""
    server = subprocess.Popen(irtt_server_argv("127.0.0.1", 0, max_duration_s=1, min_interval_s=0.05, max_length=100),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        listening = None
        for line in server.stdout:
            listening = parse_irtt_listening(line)
            if listening:
                break
        assert listening is not None and listening[0] == "127.0.0.1"
        port = listening[1]
        run = subprocess.run(irtt_client_argv("127.0.0.1", port, 0.05, 0.5, 50, wait_s=0.5), capture_output=True,
                             text=True, timeout=30)
        assert run.returncode == 0 and run.stderr == "", run.stderr
        result = parse_irtt(run.stdout)
        # Ten intervals; a busy machine may wake irtt's sender late enough to skip one, never to send more.
        assert result.rows["ok"].all() and result.rows["slot"].max() < 10 and result.summary["length"] == 60
        for too_much in (dict(interval_s=0.01, duration_s=0.5, payload_bytes=50),
                         dict(interval_s=0.05, duration_s=2.0, payload_bytes=50),
                         dict(interval_s=0.05, duration_s=0.5, payload_bytes=500)):
            refused = subprocess.run(irtt_client_argv("127.0.0.1", port, wait_s=0.5, **too_much), capture_output=True,
                                     text=True, timeout=30)
            assert refused.returncode == 1 and refused.stdout == "", too_much
            assert refused.stderr.strip().startswith("[ServerRestriction]"), refused.stderr
    finally:
        server.terminate()
        server.wait(10)
    assert parse_irtt_listening("[ServerStart] starting IRTT server version 0.9.0") is None


# -- --probes ...,irtt (series, latency-under-load): refused before anything runs ------------------------------------------------

LOCAL_PAIR = '[hosts.a]\nssh = "local"\n\n[hosts.b]\nssh = "local"\n'


@pytest.mark.parametrize("experiment, args", [
    ("series", ["--duration", "2s"]),
    ("latency-under-load", ["--duration", "4s", "--load-start", "1s", "--load-for", "2s", "--ramp", "1s"]),
])
def test_irtt_on_hosts_without_it_is_refused_in_one_line(tmp_path, experiment, args):
    """irtt is Debian's, not a tool labkit sends: a host without it (here: a PATH without /usr/bin) is named in one
    line, exit 2, before the run exists."""
    inventory = tmp_path / "inventory.toml"
    inventory.write_text(LOCAL_PAIR)
    runs = tmp_path / "runs"
    venv_bin = str(Path(LABKIT).parent)
    proc = subprocess.run([LABKIT, experiment, str(inventory), "--client", "a", "--server", "b", *args,
                           "--probes", "ping,irtt", "--runs-dir", str(runs)], capture_output=True, text=True,
                          timeout=60, env={"PATH": venv_bin, "HOME": str(tmp_path)})
    assert proc.returncode == 2, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert "--probes irtt needs irtt on the client and the server host: it is not on a nor b" in line, line
    assert not runs.exists() or not any(runs.iterdir())


@pytest.mark.parametrize("args, says", [
    (["--interval", "10ms", "--duration", "20m"], "--probes irtt: 120000 ticks is more than one irtt run keeps"),
    (["--payload-bytes", "70000"], "--payload-bytes (with irtt, its packet length)"),
])
def test_a_series_with_irtt_beyond_its_bounds_is_refused_in_one_line(tmp_path, args, says):
    inventory = tmp_path / "inventory.toml"
    inventory.write_text(LOCAL_PAIR)
    proc = subprocess.run([LABKIT, "series", str(inventory), "--client", "a", "--server", "b", "--probes", "irtt",
                           *args, "--runs-dir", str(tmp_path / "runs")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and says in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
