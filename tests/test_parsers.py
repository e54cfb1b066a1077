"""Parsers on real recorded tool output (tests/data/, data/external/orca-2016/).

The expected numbers come from the files themselves (their closing statistics
lines, or counts read off with grep) and from independent arithmetic, never
from running the parser. See tests/data/README.md for how each file was made.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from labkit.parsers import (
    ParseError,
    go_duration_unit,
    parse_ghz_json,
    parse_go_duration_ms,
    parse_go_duration_ns,
    parse_go_echo_log,
    parse_idle_step_output,
    parse_iperf3_json,
    parse_ping,
    parse_ss,
    parse_ss_tcp_info,
)

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
ORCA = ROOT / "data" / "external" / "orca-2016"


def read(name: str) -> str:
    return (DATA / name).read_text()


@pytest.fixture(scope="module")
def orca_ping():
    return parse_ping(gzip.open(ORCA / "ping.txt.gz", "rt").read())


@pytest.fixture(scope="module")
def orca_echo():
    return parse_go_echo_log(gzip.open(ORCA / "echo.txt.gz", "rt").read())


def assert_every_line_accounted(result, text: str) -> None:
    counts = result.counts
    assert counts["lines"] == len(text.splitlines())
    assert counts["lines"] == counts["blank"] + counts["parsed"] + counts["unrecognised"]
    assert counts["unrecognised"] == len(result.unrecognised_lines)


# --- Go durations -------------------------------------------------------------


def go_duration_cases():
    accepted, rejected = [], []
    for line in read("go/durations.tsv").split("\n")[:-1]:
        left, _, right = line.partition("\t")
        (rejected if left == "!" else accepted).append((right, left))
    return accepted, rejected


@pytest.mark.parametrize("text,ns", go_duration_cases()[0])
def test_go_duration_matches_go(text, ns):
    assert parse_go_duration_ns(text) == int(ns)


@pytest.mark.parametrize("text", [t for t, _ in go_duration_cases()[1]])
def test_go_duration_rejects_what_go_rejects(text):
    with pytest.raises(ValueError):
        parse_go_duration_ns(text)


def test_go_duration_units_and_ms():
    assert parse_go_duration_ms("1.868983839s") == pytest.approx(1868.983839)
    assert go_duration_unit("1.868983839s") == "s"
    assert go_duration_unit("27.355185ms") == "ms"
    assert go_duration_unit("1.5\u00b5s") == "µs"
    assert go_duration_unit("1m2.5s") == "m"
    with pytest.raises(ValueError):
        parse_go_duration_ns("9223372036854775808ns")  # one past int64


# --- the 2016 macOS ping log ----------------------------------------------------


def test_orca_ping_counts_match_its_closing_statistics(orca_ping):
    text = gzip.open(ORCA / "ping.txt.gz", "rt").read()
    assert_every_line_accounted(orca_ping, text)
    counts, summary = orca_ping.counts, orca_ping.summary
    assert summary["flavour"] == "bsd"
    assert (summary["transmitted"], summary["received"]) == (3600, 3593)
    assert counts["lines"] == 3605
    assert counts["unrecognised"] == 0
    assert counts["timeout_lines"] == 7 == len(re.findall(r"^Request timeout", text, re.M))
    assert counts["replies"] == summary["received"]
    assert counts["lost"] == summary["transmitted"] - summary["received"] == 7
    assert counts["probes"] == 3600 and len(orca_ping.rows) == 3600
    assert counts["duplicates"] == 0


def test_orca_ping_lost_and_late_probes(orca_ping):
    rows = orca_ping.rows
    assert rows["seq"].tolist() == list(range(3600))  # macOS numbers from 0
    lost = rows[~rows["ok"]]
    # 3120 has no line at all: only the transmitted count reveals it.
    assert lost["seq"].tolist() == [32, 403, 527, 2752, 2876, 2877, 3120]
    assert lost["rtt_ms"].isna().all() and (lost["status"] == "no_reply").all()
    late = rows[rows["late"]]
    assert late["seq"].tolist() == [3119]
    assert late["rtt_ms"].iloc[0] == 2001.640 and late["ok"].iloc[0]


def test_orca_ping_rtts_reproduce_the_logs_own_summary(orca_ping):
    ok = orca_ping.rows.loc[orca_ping.rows["ok"], "rtt_ms"].to_numpy()
    summary = orca_ping.summary
    assert ok.min() == summary["rtt_min_ms"] == 10.616
    assert ok.max() == summary["rtt_max_ms"] == 2001.640
    assert round(ok.mean(), 3) == summary["rtt_avg_ms"]
    assert abs(ok.std(ddof=0) - summary["rtt_mdev_ms"]) < 0.001


# --- the 2016 Go echo client log --------------------------------------------------


def test_orca_echo_counts(orca_echo):
    text = gzip.open(ORCA / "echo.txt.gz", "rt").read()
    assert_every_line_accounted(orca_echo, text)
    counts = orca_echo.counts
    assert counts["lines"] == 3603
    assert counts["samples"] == 3600 == len(re.findall(r"received 50 bytes", text))
    assert counts["unit_ms"] == 3598
    assert counts["unit_s"] == 2 == len(re.findall(r"time=[\d.]+s$", text, re.M))
    assert counts["missing"] == 0
    # The command line the author captured with the log: reported, not parsed.
    assert orca_echo.unrecognised_lines == [(1, "go run cmd/orca.go ping -n 3600 128.8.126.120:3265")]
    # Line 18 begins with an echoed arrow key ("^[[D"); its sample is kept.
    assert counts["cleaned"] == 1
    assert text.splitlines()[17].startswith("^[[D")


def test_orca_echo_rows(orca_echo):
    rows = orca_echo.rows
    assert rows["seq"].tolist() == list(range(1, 3601))
    assert (rows["seq"] == rows["order"]).all() and rows["ok"].all()
    seconds = rows[rows["unit"] == "s"]
    assert seconds["seq"].tolist() == [2786, 3021]
    assert seconds["rtt_ms"].tolist() == pytest.approx([1868.983839, 2079.863882])
    assert rows.loc[rows["seq"] == 17, "rtt_ms"].item() == pytest.approx(28.978478)
    assert rows["t_utc"].iloc[0] == pd.Timestamp("2016-11-02 08:24:56", tz="UTC")
    assert rows["t_utc"].iloc[-1] == pd.Timestamp("2016-11-02 09:27:04", tz="UTC")


def test_orca_echo_samples_agree_with_the_clients_own_summary(orca_echo):
    # The client's closing line was computed from its own timer, a few µs
    # below the logged values; with the two seconds-valued samples dropped
    # the mean would be ~1.1 ms lower and the max under 100 ms.
    rtt = orca_echo.rows["rtt_ms"].to_numpy()
    summary = orca_echo.summary
    assert abs(rtt.min() - summary["rtt_min_ms"]) < 0.01
    assert abs(rtt.max() - summary["rtt_max_ms"]) < 0.01
    assert abs(rtt.mean() - summary["rtt_avg_ms"]) < 0.01
    assert abs(rtt.std(ddof=0) - summary["rtt_stddev_ms"]) < 0.01


def test_echo_log_timestamps_can_be_read_in_a_zone():
    line = gzip.open(ORCA / "echo.txt.gz", "rt").read().splitlines()[1]
    result = parse_go_echo_log(line, tz="America/New_York")
    # 2 November 2016 was still daylight-saving time (EDT, UTC-4).
    assert result.rows["t_utc"].iloc[0] == pd.Timestamp("2016-11-02 12:24:56", tz="UTC")


# --- ping: iputils, busybox, GNU inetutils ----------------------------------------------

# Recorded output labkit must not read as losses (README: -q prints no reply
# lines; inetutils in de_DE writes time=10,236 ms).
PING_REFUSED = ["busybox_loss_q.txt", "inetutils_loss_de_DE.txt", "iputils_loss_q.txt"]
PING_FILES = sorted(p.name for p in (DATA / "ping").glob("*.txt") if p.name not in PING_REFUSED)
# The header tells how probes are numbered: iputils from 1, the others (BSD-style header) from 0.
FIRST_SEQ = {"linux": 1, "iputils": 1, "busybox": 0, "inetutils": 0}
# Probes lost while the receiver's device was down (tests/data/README.md).
PING_LOST = {
    "busybox_loss.txt": range(6, 13), "busybox_loss_s.txt": range(6, 13), "busybox_tail_loss.txt": range(7, 10),
    "inetutils_loss.txt": range(6, 13), "inetutils_loss_s.txt": range(6, 13), "inetutils_tail_loss.txt": range(7, 10),
    "iputils_loss.txt": range(7, 14), "iputils_loss_D.txt": range(7, 14), "iputils_loss_O.txt": range(7, 14),
    "iputils_loss_O_D.txt": range(7, 14), "iputils_loss_s.txt": range(7, 14),
}


def printed_reply_seqs(text: str) -> list[int]:
    """The probe numbers of the reply lines, read with a pattern of the tests' own."""
    return [int(n) for n in re.findall(r"^(?:\[[\d.]+\] )?\d+ bytes from [^:]+: (?:icmp_)?seq=(\d+) ", text, re.M)]


@pytest.mark.parametrize("name", PING_FILES)
def test_ping_every_line_accounted_and_replies_match_summary(name):
    text = read(f"ping/{name}")
    result = parse_ping(text)
    assert_every_line_accounted(result, text)
    summary, counts = result.summary, result.counts
    first = FIRST_SEQ[name.split("_")[0]]
    assert summary["flavour"] == ("iputils" if first == 1 else "bsd")
    assert counts["replies"] == summary["received"]
    assert counts["duplicates"] == summary.get("duplicates", 0)
    assert counts["probes"] == summary["transmitted"]
    assert counts["lost"] == summary["transmitted"] - summary["received"]
    assert result.rows["seq"].min() == first
    assert result.unreadable_lines == [] and counts["unknown"] == 0


@pytest.mark.parametrize("name", sorted(PING_LOST))
def test_ping_each_missing_probe_is_one_lost_row(name):
    text = read(f"ping/{name}")
    rows = parse_ping(text).rows
    transmitted = int(re.search(r"^(\d+) packets transmitted", text, re.M).group(1))
    first = FIRST_SEQ[name.split("_")[0]]
    printed = printed_reply_seqs(text)
    missing = sorted(set(range(first, first + transmitted)) - set(printed))
    assert missing == list(PING_LOST[name])
    assert rows["seq"].tolist() == list(range(first, first + transmitted))  # one row per probe
    assert rows.loc[rows["ok"], "seq"].tolist() == printed
    lost = rows[~rows["ok"]]
    assert lost["seq"].tolist() == missing
    assert (lost["status"] == "no_reply").all() and lost["rtt_ms"].isna().all()


def test_busybox_rows_and_statistics():
    text = read("ping/busybox_loss.txt")
    result = parse_ping(text)
    ok = result.rows[result.rows["ok"]]
    written = [float(t) for t in re.findall(r"time=([\d.]+) ms", text)]
    assert ok["rtt_ms"].tolist() == written
    assert (ok["ttl"] == 64).all() and (ok["bytes"] == 64).all() and (ok["source"] == "198.18.1.2").all()
    summary = result.summary
    assert (summary["rtt_min_ms"], summary["rtt_max_ms"]) == (min(written), max(written))
    assert round(sum(written) / len(written), 3) == summary["rtt_avg_ms"]
    assert "rtt_mdev_ms" not in summary  # busybox prints none
    assert (summary["target_address"], summary["payload_bytes"]) == ("198.18.1.2", 56)


@pytest.mark.parametrize("name,header_bytes", [("busybox_loss_s.txt", 1200), ("inetutils_loss_s.txt", 1200),
                                               ("iputils_loss_s.txt", 1200)])
def test_ping_s_sets_the_payload_and_reply_size(name, header_bytes):
    result = parse_ping(read(f"ping/{name}"))
    assert result.summary["payload_bytes"] == header_bytes
    assert (result.rows.loc[result.rows["ok"], "bytes"] == header_bytes + 8).all()  # + the ICMP header


def test_ping_reply_in_a_locale_not_read_is_never_a_loss():
    text = read("ping/inetutils_loss_de_DE.txt")
    result = parse_ping(text)
    reply_lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if " bytes from " in line]
    assert len(reply_lines) == 18 and "time=10,236 ms" in reply_lines[0][1]
    assert result.unreadable_lines == reply_lines
    rows = result.rows
    assert len(rows) == 25 and not rows["ok"].any()
    assert (rows["status"] == "unknown").all() and result.counts["lost"] == 0
    assert (rows["error"] == "line 2 could not be read and may be its reply").all()
    # The statistics line with commas is unread too, but recognisably not a reply.
    assert result.counts["unrecognised"] == 19


@pytest.mark.parametrize("name", ["busybox_loss_q.txt", "iputils_loss_q.txt"])
def test_ping_quiet_output_is_not_read_as_losses(name):
    result = parse_ping(read(f"ping/{name}"))
    assert (result.summary["transmitted"], result.summary["received"]) == (25, 18)
    assert result.unreadable_lines == [] and result.counts["unread_replies"] == 18
    assert (result.rows["status"] == "unknown").all() and result.counts["lost"] == 0
    assert result.rows["error"].iloc[0] == "ping counted 18 replies but printed 0 (was it run with -q?)"


def test_ping_loopback_rtts_match_summary():
    result = parse_ping(read("ping/linux_lo.txt"))
    rtt = result.rows["rtt_ms"]
    assert len(result.rows) == 20 and result.rows["ok"].all()
    assert rtt.min() == result.summary["rtt_min_ms"]
    assert rtt.max() == result.summary["rtt_max_ms"]
    # iputils keeps µs and prints the average truncated (integer division) to µs.
    assert 0 <= rtt.mean() - result.summary["rtt_avg_ms"] < 0.001
    assert result.rows["t_utc_ns"].isna().all()  # no -D
    assert (result.rows["ttl"] == 64).all() and (result.rows["bytes"] == 64).all()


def test_ping_D_timestamps_are_exact_and_follow_the_interval():
    text = read("ping/linux_lo_D.txt")
    result = parse_ping(text)
    first = re.search(r"^\[(\d+)\.(\d+)\]", text, re.M)
    assert result.rows["t_utc_ns"].iloc[0] == int(first.group(1)) * 10**9 + int(first.group(2)) * 1000
    gaps = np.diff(result.rows["t_utc_ns"].astype("int64").to_numpy()) / 1e9
    assert len(gaps) == 19 and (gaps > 0.15).all() and (gaps < 0.5).all()  # -i 0.2


@pytest.mark.parametrize("name", ["linux_loss_O_D.txt", "linux_loss_plain.txt"])
def test_ping_losses_in_the_middle(name):
    result = parse_ping(read(f"ping/{name}"))
    rows = result.rows
    assert rows["seq"].tolist() == list(range(1, 26))
    assert rows.loc[~rows["ok"], "seq"].tolist() == list(range(8, 14))
    assert rows.loc[~rows["ok"], "rtt_ms"].isna().all()
    assert result.summary["loss_percent"] == 100 * 6 / 25
    expected_no_answer = 6 if "O_D" in name else 0
    assert result.counts["no_answer_lines"] == expected_no_answer


def test_ping_unreachable_rows_carry_the_icmp_error():
    result = parse_ping(read("ping/linux_unreachable.txt"))
    rows = result.rows
    assert rows["seq"].tolist() == list(range(1, 9)) and not rows["ok"].any()
    assert (rows["status"] == "error").all()
    assert (rows["error"] == "Destination Host Unreachable").all()
    assert (rows["source"] == "198.18.200.1").all()
    assert result.counts["error_lines"] == result.summary["errors"] == 8
    assert result.counts["no_answer_lines"] == 7
    assert result.summary["pipe"] == 8


def test_ping_broadcast_duplicates_without_dup_marker():
    text = read("ping/linux_broadcast_dup.txt")
    assert "DUP!" not in text
    rows = parse_ping(text).rows
    dups = rows[rows["duplicate"]]
    assert len(dups) == 9 and not dups["ok"].any() and (dups["status"] == "duplicate").all()
    first = rows[~rows["duplicate"]].set_index("seq")
    for _, dup in dups.iterrows():
        assert dup["source"] != first.loc[dup["seq"], "source"]  # the other namespace answered
    assert rows["ok"].sum() == 10


def test_ping_dup_marker_with_verbose():
    text = read("ping/linux_broadcast_dup_v.txt")
    result = parse_ping(text)
    rows = result.rows
    marked = [int(m) for m in re.findall(r"icmp_seq=(\d+) .*\(DUP!\)", text)]
    assert rows.loc[rows["duplicate"], "seq"].tolist() == marked == list(range(1, 10))
    # ping -v prints two debug lines labkit does not read: they are reported, and are plainly not replies.
    assert [n for n, _ in result.unrecognised_lines] == [1, 4]
    assert result.unreadable_lines == [] and result.counts["lost"] == 0


# --- iperf3 -J ------------------------------------------------------------------------


def test_iperf3_intervals_and_summary():
    text = read("iperf3/client_100M.json")
    raw = json.loads(text)
    result = parse_iperf3_json(text)
    rows, summary = result.rows, result.summary
    assert len(rows) == len(raw["intervals"]) == 2
    assert rows["bytes"].sum() == summary["sent_bytes"] == raw["end"]["sum_sent"]["bytes"]
    assert summary["error"] is None and result.counts["error"] == 0
    assert summary["target_bitrate"] == 100_000_000
    # -b 100M is honoured to within a few percent on loopback.
    assert summary["sent_bps"] == pytest.approx(1e8, rel=0.05)
    assert rows["rtt_ms"].tolist() == [s["streams"][0]["rtt"] / 1000 for s in raw["intervals"]]
    assert summary["min_rtt_ms"] <= summary["mean_rtt_ms"] <= summary["max_rtt_ms"]
    assert summary["sender_tcp_congestion"] == "bbr"
    assert summary["retransmits"] == rows["retransmits"].sum()


@pytest.mark.parametrize("name", ["client_refused.json", "testbed_refused.json"])
def test_iperf3_error_case(name):
    result = parse_iperf3_json(read(f"iperf3/{name}"))
    assert result.summary["error"] == "unable to connect to server: Connection refused"
    assert result.counts["error"] == 1 and result.rows.empty


@pytest.mark.parametrize("name", ["tcp_50M.json", "tcp_50M_R.json", "udp_10M_loss.json", "udp_10M_R_loss.json"])
def test_iperf3_end_summary_is_kept_whole(name):
    raw = json.loads(read(f"iperf3/{name}"))
    summary = parse_iperf3_json(read(f"iperf3/{name}")).summary
    end, reverse = raw["end"], bool(raw["start"]["test_start"]["reverse"])
    assert summary["reverse"] == reverse
    assert summary["sum_sent"] == end["sum_sent"] and summary["sum_received"] == end["sum_received"]
    assert summary["end_streams"] == end["streams"]
    assert (summary["sent_bytes"], summary["received_bytes"]) == (end["sum_sent"]["bytes"], end["sum_received"]["bytes"])
    assert summary["received_bps"] == end["sum_received"]["bits_per_second"]
    # iperf3's host is the client, which sends unless -R.
    cpu = end["cpu_utilization_percent"]
    client = {k: cpu[f"host_{k}"] for k in ("total", "user", "system")}
    server = {k: cpu[f"remote_{k}"] for k in ("total", "user", "system")}
    assert summary["sender_cpu_percent"] == (server if reverse else client)
    assert summary["receiver_cpu_percent"] == (client if reverse else server)


def test_iperf3_tcp_forward_and_reverse():
    forward = parse_iperf3_json(read("iperf3/tcp_50M.json"))
    assert forward.rows["sender"].all() and forward.rows["rtt_ms"].notna().all()
    assert forward.rows["bytes"].sum() == forward.summary["sent_bytes"]
    assert forward.summary["min_rtt_ms"] >= 10  # the testbed's 10 ms RTT
    assert forward.summary["sender_tcp_congestion"] == "cubic"
    # With -R the client receives: its intervals are the receiver's, without rtt, cwnd or retransmits.
    reverse = parse_iperf3_json(read("iperf3/tcp_50M_R.json"))
    assert not reverse.rows["sender"].any()
    assert reverse.rows[["rtt_ms", "snd_cwnd", "retransmits"]].isna().all().all()
    assert reverse.rows["bytes"].sum() == reverse.summary["received_bytes"]
    # iperf3 writes zeros for the rtt it did not measure; they are not kept as 0 ms.
    assert json.loads(read("iperf3/tcp_50M_R.json"))["end"]["streams"][0]["sender"]["min_rtt"] == 0
    assert reverse.summary["min_rtt_ms"] is None and reverse.summary["max_snd_cwnd"] is None


def test_iperf3_udp_losses():
    forward = parse_iperf3_json(read("iperf3/udp_10M_loss.json"))
    raw = json.loads(read("iperf3/udp_10M_loss.json"))
    rows, summary = forward.rows, forward.summary
    # The sender counts datagrams; only the receiver (the server here) measures jitter and loss.
    assert rows["packets"].sum() == raw["end"]["sum_sent"]["packets"] == 3551
    assert rows[["jitter_ms", "lost_packets", "lost_percent"]].isna().all().all()
    assert (summary["lost_packets"], summary["packets"]) == (891, 3551)  # README: 891 of 3551 lost
    assert summary["lost_percent"] == pytest.approx(100 * 891 / 3551)
    assert summary["jitter_ms"] == raw["end"]["sum_received"]["jitter_ms"] > 0
    # With -R the client receives: every interval has its jitter and losses, adding up to the end's.
    reverse = parse_iperf3_json(read("iperf3/udp_10M_R_loss.json"))
    rows, summary = reverse.rows, reverse.summary
    assert rows[["jitter_ms", "lost_packets", "packets", "lost_percent"]].notna().all().all()
    assert rows["lost_packets"].sum() == summary["lost_packets"] == 893
    assert rows["packets"].sum() == summary["packets"] == 3552
    assert rows["lost_percent"].tolist() == pytest.approx((100 * rows["lost_packets"] / rows["packets"]).tolist())


def test_iperf3_and_ghz_refuse_non_json():
    with pytest.raises(ParseError):
        parse_iperf3_json(read("ping/linux_lo.txt"))
    with pytest.raises(ParseError):
        parse_ghz_json(read("iperf3/client_100M.json"))


# --- ghz --format json ------------------------------------------------------------------


def test_ghz_ok_run():
    result = parse_ghz_json(read("ghz/echo_ok.json"))
    rows, summary = result.rows, result.summary
    assert len(rows) == summary["count"] == 200 and rows["ok"].all()
    assert rows["latency_ms"].min() == summary["fastest_ms"]
    assert rows["latency_ms"].max() == summary["slowest_ms"]
    assert rows["latency_ms"].mean() == pytest.approx(summary["average_ms"], abs=1e-6)
    assert sorted(summary["percentiles_ms"]) == [10, 25, 50, 75, 90, 95, 99]
    assert summary["options"]["call"] == "echo.EchoService/Echo"


@pytest.mark.parametrize("name", ["echo_ok.json", "echo_errors.json"])
def test_ghz_percentiles_are_order_statistics_of_the_ok_calls(name):
    result = parse_ghz_json(read(f"ghz/{name}"))
    ok = np.sort(result.rows.loc[result.rows["ok"], "latency_ms"].to_numpy())
    for p, value in result.summary["percentiles_ms"].items():
        assert value in ok
        below = np.mean(ok <= value)
        assert abs(below - p / 100) <= 1 / len(ok) + 0.01


def test_ghz_failures():
    result = parse_ghz_json(read("ghz/echo_errors.json"))
    rows = result.rows
    assert result.counts["ok"] == 180 and result.counts["failed"] == 20
    assert rows["status"].value_counts().to_dict() == result.summary["status_codes"]
    assert (~rows["ok"]).sum() == sum(result.summary["errors"].values()) == 20
    assert rows.loc[~rows["ok"], "error"].str.contains("ResourceExhausted").all()


def test_ghz_nothing_listening():
    result = parse_ghz_json(read("ghz/echo_refused.json"))
    assert result.summary["percentiles_ms"] == {}
    assert result.summary["status_codes"] == {"Unavailable": 20}
    assert not result.rows["ok"].any() and len(result.rows) == 20
    assert result.rows["error"].str.contains("connection refused").all()


# --- ss -tin ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["iperf3_sender.txt", "iperf3_receiver.txt"])
def test_ss_listing(name):
    text = read(f"ss/{name}")
    result = parse_ss(text)
    assert_every_line_accounted(result, text)
    assert result.counts["connections"] == 2 == text.count("ESTAB")
    assert result.counts["unparsed_tokens"] == 0
    rows = result.rows
    # ss computes "send" as cwnd * mss * 8 / srtt: an independent check of
    # four fields at once (ss rounds rtt to µs, hence the tolerance).
    implied = rows["cwnd"] * rows["mss"] * 8 / (rows["rtt_ms"] / 1000)
    assert np.allclose(implied, rows["send_bps"], rtol=0.02)


def test_ss_tcp_info_of_the_bulk_sender():
    text = read("ss/iperf3_sender.txt")
    block = [line for line in text.splitlines() if "bytes_acked:37486630" in line]
    assert len(block) == 1
    info = parse_ss_tcp_info(block[0])
    assert info["congestion_control"] == "bbr"
    assert (info["cwnd"], info["mss"], info["rto_ms"]) == (18, 65483, 204.0)
    assert (info["rtt_ms"], info["rttvar_ms"]) == (0.034, 0.008)
    assert info["bytes_acked"] == 37486630 and info["bytes_sent"] == 37486629
    assert (info["snd_wscale"], info["rcv_wscale"]) == (10, 10)
    assert info["bbr_bw_bps"] == 130966000000.0 and info["bbr_mrtt_ms"] == 0.004
    assert info["delivery_rate_bps"] == 130966000000.0
    assert info["app_limited"] is False and info["unparsed"] == []
    assert "ssthresh" not in info  # ss prints none before the first loss


# --- the idle-step client's output (stand-in client, see tests/data/README.md) -----------------


def test_idle_step_output():
    text = read("idle_step/standin_loopback.txt")
    result = parse_idle_step_output(text)
    assert_every_line_accounted(result, text)
    rows = result.rows
    assert result.counts["sizes"] == 4 and result.counts["calls"] == 12
    assert result.counts["calls_without_size"] == 0 and result.counts["unrecognised"] == 0
    assert rows["payload_bytes"].tolist() == [1000] * 3 + [14000] * 3 + [16000] * 3 + [100000] * 3
    assert rows["index_in_size"].tolist() == [0, 1, 2] * 4
    written = re.findall(r"Round trip time: (\S+)", text)
    assert rows["rtt_ms"].tolist() == [parse_go_duration_ns(w) / 1e6 for w in written]
    assert rows["t_utc"].isna().all()


def test_ss_with_owning_process():
    text = read("ss/iperf3_sender_p.txt")
    result = parse_ss(text)
    assert_every_line_accounted(result, text)
    rows = result.rows
    pids = re.findall(r"pid=(\d+),", text)
    assert len(rows) == 2 and len(pids) == 2
    for process, pid in zip(rows["process"], pids):
        assert process.startswith('users:(("iperf3",') and f"pid={pid}," in process
    assert rows["cwnd"].notna().all() and result.counts["unparsed_tokens"] == 0
