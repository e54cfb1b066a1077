"""Packet captures and `labkit explain`: the pcap parser and the explanation of calls, on captures recorded on the testbed.

tests/data/pcap/ holds what labkit's own tcpdump argv captured on host a of a
testbed (50 ms one way) while labkit's echo clients called host b, with the
rows those clients printed (tests/data/tools/record_pcaps.sh).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from labkit.analysis.explain import COMPONENTS, Context, attribute_packets, explain_call, flights
from labkit.errors import LabkitError
from labkit.parsers.base import ParseError
from labkit.parsers.pcap import parse_pcap, tcpdump_argv

DATA = Path(__file__).resolve().parent / "data" / "pcap"
BASE_RTT_MS = 100.2  # the recording testbed's ping minimum, 50 ms each way
PORTS = {"grpcio-idle": 50051, "grpcgo-cold": 50052, "grpcio-tls-cold": 50053}


def recorded(name: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    packets = parse_pcap((DATA / f"{name}.pcap").read_bytes(), {PORTS[name]}).rows
    calls = pd.DataFrame([json.loads(line) for line in (DATA / f"{name}.calls.jsonl").read_text().splitlines()])
    return packets, calls.assign(server_port=PORTS[name])


def explained(name: str, ssai: int = 1) -> tuple[pd.DataFrame, list[dict]]:
    packets, calls = recorded(name)
    owner = attribute_packets(packets, calls)
    return calls, [explain_call(call.to_dict(), packets[owner == label], Context(BASE_RTT_MS, ssai))
                   for label, call in calls.iterrows()]


def components(result: dict) -> dict[str, float]:
    return {c["name"]: c["ms"] for c in result["components"]}


# -- the parser ----------------------------------------------------------------------------------

def test_headers_only_packets_keep_their_real_lengths_and_sequence():
    packets, _ = recorded("grpcgo-cold")
    assert set(packets.columns) >= {"t_ns", "conn", "direction", "flags", "seq", "ack", "length", "window", "kind"}
    assert packets["t_ns"].is_monotonic_increasing and packets["conn"].nunique() == 2
    for _, conn in packets.groupby("conn"):
        # Each connection opens with the client's SYN and the server's SYN-ACK; sequence numbers start at 0.
        assert list(conn["flags"].iloc[:2]) == ["S", "SA"] and list(conn["direction"].iloc[:2]) == ["c2s", "s2c"]
        assert (conn["seq"].iloc[:2] == 0).all() and conn["ack"].iloc[1] == 1
        # The snap length kept 128 bytes of each packet; the lengths are the IP header's: full segments of MSS 1408.
        assert conn["length"].max() == 1408
        data = conn[(conn["direction"] == "c2s") & (conn["length"] > 0)]
        assert (data["seq"].diff().dropna() == data["length"].shift().dropna()).all()  # contiguous, nothing resent
        assert conn["kind"].eq("h2-preface").sum() == 1
    assert not packets["retransmit"].any()
    # Windows after the handshake are scaled by the SYN's option: the server advertises more than 65535 bytes.
    assert packets.loc[packets["direction"] == "s2c", "window"].max() > 65535


def test_tls_records_are_recognised_and_a_cut_capture_keeps_what_it_holds():
    packets, _ = recorded("grpcio-tls-cold")
    assert packets["kind"].eq("tls").sum() >= 4 and not packets["kind"].eq("h2-preface").any()  # the preface is encrypted
    full = parse_pcap((DATA / "grpcio-idle.pcap").read_bytes())
    cut = parse_pcap((DATA / "truncated.pcap").read_bytes())
    # The last record is cut inside its payload: its headers, and so its row, are whole.
    assert 0 < len(cut.rows) < len(full.rows)
    pd.testing.assert_frame_equal(cut.rows, full.rows.head(len(cut.rows)))
    # Cut inside a record's header, the file still gives what came before, and says it was cut.
    data = (DATA / "truncated.pcap").read_bytes()
    cut_in_header = parse_pcap(data[: len(data) - 75 - 8])
    assert cut_in_header.counts["truncated"] == 1 and len(cut_in_header.rows) == len(cut.rows) - 1


def test_what_is_not_a_capture_is_refused_in_one_line(tmp_path):
    with pytest.raises(ParseError, match="not a pcap file"):
        parse_pcap(b"tcpdump: no such device\n")
    assert issubclass(ParseError, LabkitError)


def test_tcpdump_argv_is_words_with_the_experiment_ports():
    argv = tcpdump_argv("/usr/sbin/tcpdump", "/tmp/x/capture.pcap", "198.18.0.2", [50051, 8443])
    assert argv[:2] == ["/usr/sbin/tcpdump", "-i"] and "-U" in argv and "--immediate-mode" in argv
    assert argv[argv.index("-s") + 1] == "128" and argv[argv.index("-w") + 1] == "/tmp/x/capture.pcap"
    assert argv[-6:] == ["tcp", "and", "host", "198.18.0.2", "and", "(port 50051 or port 8443)"]
    with pytest.raises(ValueError):
        tcpdump_argv("tcpdump", "x", "198.18.0.2", [])


# -- packets to calls, calls to round trips -------------------------------------------------------

def test_each_call_gets_its_own_connections_packets():
    packets, calls = recorded("grpcgo-cold")
    owner = attribute_packets(packets, calls)
    # Two cold calls, two connections: each call owns one, from its SYN.
    by_call = {label: packets[owner == label] for label in calls.index}
    assert [frame["conn"].nunique() for frame in by_call.values()] == [1, 1]
    assert by_call[0]["conn"].iat[0] != by_call[1]["conn"].iat[0]
    assert all(frame["flags"].iat[0] == "S" for frame in by_call.values())
    # Packets outside every call's window (the closing FINs) belong to none.
    assert (owner == -1).sum() > 0 and set(owner) == {-1, 0, 1}


def test_warm_calls_after_idle_are_counted_in_round_trips_with_the_kernels_restart_as_cause():
    calls, results = explained("grpcio-idle")
    by_size = {}
    for call, result in zip(calls.itertuples(), results):
        by_size.setdefault(call.payload_bytes, []).append(result)
        assert result["evidence"] == "capture"
        parts = components(result)
        assert list(parts) == list(COMPONENTS)
        # Named components add up to the measured latency within 5 %.
        assert abs(parts["remainder"]) <= 0.05 * result["rtt_ms"], parts
    # 1000 B fits the restarted window of 10 segments: one round trip. 16000 B and 32000 B do not: two, because the
    # kernel restarted the window after one idle second (the sysctl at 1).
    assert {r["rounds"] for r in by_size[1000]} == {1} and {r["cause"] for r in by_size[1000]} == {"none"}
    for size in (16000, 32000):
        assert {r["rounds"] for r in by_size[size]} == {2}
        assert {r["cause"] for r in by_size[size]} == {"cwnd-restart-after-idle"}
    # With the sysctl at 0 the same extra round would be the congestion window's own limit.
    _, at_zero = explained("grpcio-idle", ssai=0)
    assert {r["cause"] for r in at_zero if r["rounds"] == 2} == {"cwnd-limited"}


def test_a_cold_call_names_the_handshake_and_the_http2_setup():
    for name, setup, rounds in (("grpcgo-cold", ("handshake", "http2-setup"), 2),
                                ("grpcio-tls-cold", ("handshake", "tls", "http2-setup"), 1)):
        _, results = explained(name)
        for result in results:
            parts = components(result)
            # Each set-up exchange is one round trip of the path; the request after it needs `rounds` more.
            assert all(0.95 * BASE_RTT_MS <= parts[step] <= 1.1 * BASE_RTT_MS for step in setup), (name, parts)
            assert result["rounds"] == rounds and result["cause"] in setup
            assert abs(parts["remainder"]) <= 0.05 * result["rtt_ms"], (name, parts)
    # grpc-go's 16000 B request takes two rounds after a new connection's initial window: the window's own limit.
    _, results = explained("grpcgo-cold")
    assert {r["reason"] for r in results} == {"cwnd-limited"}


def test_without_a_capture_the_kernels_rules_count_the_same_rounds():
    calls, with_capture = explained("grpcio-idle")
    for (_, call), captured in zip(calls.iterrows(), with_capture):
        # 61 B of gRPC and HTTP/2 framing per request, as the idle-step notebook measures it.
        result = explain_call(call.to_dict(), None, Context(BASE_RTT_MS, 1, overhead_bytes=61))
        assert result["evidence"] == "tcp-state"
        assert (result["rounds"], result["cause"]) == (captured["rounds"], captured["cause"])
        assert sum(c["ms"] for c in result["components"]) == pytest.approx(result["rtt_ms"], abs=0.01)


def test_flights_split_where_the_client_waited():
    packets, calls = recorded("grpcgo-cold")
    owner = attribute_packets(packets, calls)
    found = flights(packets[owner == 0], BASE_RTT_MS)
    assert [f.kind for f in found][:2] == ["handshake", "http2-setup"]
    # The first request flight is what a new connection's initial window of 10 segments let out; the second the rest.
    request = [f for f in found if f.kind == "request"]
    assert request[0].bytes < 16000 <= request[0].bytes + request[1].bytes and len(request[0].segments) <= 12
