"""The testbed's link parameters, topology files, schedules and traces, and what the emulator exports.

Pure functions on text and on recorded files: no testbed needed. The emulator's exports are
real ones (tests/data/emulator/, recorded with tests/data/tools/record_emulator.py).
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import replace

import pytest

from conftest import DATA, REPO
from labkit.errors import LabkitError
from labkit.testbed import emulator
from labkit.testbed.linkspec import (LinkSpec, emulator_params, parse_aqm, parse_jitter, parse_loss, parse_queue,
                                     parse_reorder)
from labkit.testbed.schedule import Change, expand, parse_inline, read_schedule
from labkit.testbed.topology import Topology, parse_topology
from labkit.testbed.traces import read_delay_trace, read_jitter_table, read_rate_trace

ORCA_PING = REPO / "data" / "external" / "orca-2016" / "ping.txt.gz"
EMULATOR = DATA / "emulator"


# -- netem's value syntax ---------------------------------------------------------------------------
def test_netem_values_read_as_netem_means_them():
    assert parse_jitter("5ms 25%") == (0.005, 0.25)
    assert parse_jitter("200us") == (pytest.approx(0.0002), 0.0)
    assert parse_loss("0.1% 25%", "random") == {"model": "random", "p": 0.001, "correlation": 0.25}
    # tc-netem(8): gemodel p alone is Bernoulli (r = 1 - p, 1-h = 100 %, 1-k = 0 %).
    assert parse_loss("1%", "gemodel") == {"model": "gemodel", "p": 0.01, "r": 0.99, "bad_loss": 1.0, "good_loss": 0.0}
    assert parse_loss("1% 25%", "gemodel")["r"] == 0.25
    assert parse_loss("1% 25% 50% 2%", "gemodel") == {"model": "gemodel", "p": 0.01, "r": 0.25, "bad_loss": 0.5,
                                                       "good_loss": 0.02}
    assert parse_reorder("25% 50% gap 5") == (0.25, 0.5, 5)
    assert parse_reorder("10%") == (0.1, 0.0, 1)
    assert parse_queue("bdp") == ("bdp", 1.0) and parse_queue("2.5bdp") == ("bdp", 2.5)
    assert parse_queue("1000") == ("packets", 1000) and parse_queue("64p") == ("packets", 64)
    assert parse_queue("1.5mb") == ("bytes", 1.5e6) and parse_queue("64kib") == ("bytes", 65536)
    assert parse_aqm("codel target 2ms interval 50ms") == {"aqm": "codel", "codel_target_ns": 2_000_000,
                                                           "codel_interval_ns": 50_000_000}


@pytest.mark.parametrize("call, message", [
    (lambda: parse_loss("5", "random"), "not a percentage"),
    (lambda: parse_loss("120%", "random"), "more than 100%"),
    (lambda: parse_loss("1% 100%", "random"), "correlation must be below 100%"),
    (lambda: parse_loss("1% 2% 3% 4% 5%", "gemodel"), "p [r [1-h [1-k]]]"),
    (lambda: parse_loss("1%", "markov"), "--loss-model"),
    (lambda: parse_jitter("5ms 25% 1"), "JITTER [CORRELATION]"),
    (lambda: parse_reorder("25% gap x"), "gap needs a whole number"),
    (lambda: parse_queue("lots"), "not a queue limit"),
    (lambda: parse_aqm("codel target"), "needs a value"),
    (lambda: parse_aqm("pie"), "droptail or codel"),
])
def test_bad_values_say_which_option(call, message):
    with pytest.raises(LabkitError, match=message.replace("[", r"\[").replace("]", r"\]")):
        call()


def test_emulator_params_size_a_bdp_queue_from_the_links_rtt():
    spec = LinkSpec(one_way_delay_s=0.1, rate_bps=100e6, loss="1%")
    params = emulator_params(spec, spec, mtu=1460)
    assert params["queue_bytes"] == 2_500_000 and params["queue_packets"] == 0  # 100 Mbit/s x 200 ms
    assert params["delay_ns"] == 100_000_000 and params["loss"]["p"] == 0.01 and params["mtu"] == 1460
    # An asymmetric link's RTT is both directions' delays.
    assert emulator_params(spec, replace(spec, one_way_delay_s=0.3), 1460)["queue_bytes"] == 5_000_000
    # A tiny queue still holds a burst; no rate, no queue.
    short = replace(spec, one_way_delay_s=0.0001)
    assert emulator_params(short, short, 1460)["queue_bytes"] == 16 * 1460
    assert emulator_params(replace(spec, rate_bps=None), spec, 1460)["queue_bytes"] == 0
    with pytest.raises(LabkitError, match="--reorder needs a delay"):
        emulator_params(replace(spec, one_way_delay_s=0, reorder="5%"), spec, 1460)


def test_describe_shows_what_was_given():
    spec = LinkSpec(one_way_delay_s=0.04, rate_bps=1e9, jitter="5ms", jitter_distribution="normal",
                    loss="1% 25%", loss_model="gemodel", aqm="codel")
    assert spec.describe() == "40 ms one way, 1000 Mbit/s, queue bdp codel, jitter 5ms normal, loss 1% 25% (gemodel)"


# -- topology files -----------------------------------------------------------------------------------
REGIONS = """
[hosts.us]
[hosts.eu]
[hosts.ap]

[links.us-eu]
one_way_delay = "42ms"
rate = "1gbit"

[links.ap-eu]
one_way_delay = "120ms"

[links."ap->us"]
loss = "0.1%"
"""


def test_a_topology_names_hosts_and_overrides_the_defaults_per_pair_and_direction():
    topology = parse_topology(REGIONS)
    assert topology.hosts == ("us", "eu", "ap") and len(topology.directions()) == 6
    default = LinkSpec(one_way_delay_s=0.1, rate_bps=100e6)
    assert topology.spec(default, "eu", "us").one_way_delay_s == 0.042
    assert topology.spec(default, "eu", "us").rate_bps == 1e9
    assert topology.spec(default, "eu", "ap").one_way_delay_s == 0.12  # "ap-eu" names both directions
    assert topology.spec(default, "ap", "us").loss == "0.1%" and topology.spec(default, "us", "ap").loss == "0%"
    assert topology.spec(default, "ap", "us").one_way_delay_s == 0.1  # no pair table: the defaults
    assert Topology.from_dict(topology.to_dict()) == topology


@pytest.mark.parametrize("text, message", [
    ("[hosts.a]\n", "needs 2 to 16"),
    ("[hosts.a]\n[hosts.B]\n", "host name 'B'"),
    ("[hosts.a]\nrate = '1gbit'\n[hosts.b]\n", "takes no keys"),
    ("[hosts.a]\n[hosts.b]\n[links.a-c]\n", "no [hosts.c] table"),
    ("[hosts.a]\n[hosts.b]\n[links.a-a]\n", "itself"),
    ("[hosts.a]\n[hosts.b]\n[links.a-b]\n[links.b-a]\n", "given twice"),
    ("[hosts.a]\n[hosts.b]\n[links.a-b]\nspeed = '1gbit'\n", "unknown key 'speed'"),
    ("[hosts.a]\n[hosts.b]\n[links.a-b]\nrate = 'fast'\n", "not a rate"),
    ("[hosts.a]\n[hosts.b]\n[regions]\n", "unknown table"),
    ("[hosts.a\n", "not valid TOML"),
])
def test_topology_mistakes_are_one_line(text, message):
    with pytest.raises(LabkitError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_topology(text)


# -- schedules -----------------------------------------------------------------------------------------
def test_a_partition_a_step_and_a_flap_expand_into_per_direction_timelines(tmp_path):
    file = tmp_path / "schedule.toml"
    file.write_text("""
[[change]]
at = "30s"
for = "5s"
link = "a-b"
partition = true
label = "cut"

[[change]]
at = "60s"
one_way_delay = "150ms"

[[change]]
at = "0s"
every = "10s"
for = "2s"
until = "30s"
link = "b->a"
loss = "100%"
""")
    changes = read_schedule([str(file)])
    a_to_b = expand(changes, "a", "b")
    assert [(t, label) for t, label, _ in a_to_b] == [(30.0, "cut"), (35.0, "cut ends"), (60.0, "one_way_delay_s=0.15")]
    assert a_to_b[0][2] == {"partition": True} and a_to_b[1][2] == {} and a_to_b[2][2] == {"one_way_delay_s": 0.15}
    b_to_a = expand(changes, "b", "a")
    flaps = [t for t, label, fields in b_to_a if fields.get("loss") == "100%"]
    assert flaps == [0.0, 10.0, 20.0]  # until 30 s, exclusive
    # Overlaps stack in the order they started: at 30 s the partition comes on over the flap's gap.
    assert dict((t, f) for t, _, f in b_to_a)[30.0] == {"partition": True}


def test_inline_changes_and_their_mistakes():
    change = parse_inline("at=30s,for=5s,partition,link=b-a")
    assert change == Change(at_s=30.0, fields={"partition": True}, for_s=5.0, link="a-b")
    assert parse_inline("at=1s,link=b->a,loss=5%").link == "b>a"
    for text, message in [("for=5s,partition", "needs at"), ("at=1s", "changes nothing"),
                          ("at=1s,colour=red", "unknown key 'colour'"), ("at=1s,until=5s,partition", "until goes with every"),
                          ("at=soon,partition", "not a duration"), ("at=0s,every=1s,for=2s,partition", "overlap")]:
        with pytest.raises(LabkitError, match=message):
            parse_inline(text)


# -- traces --------------------------------------------------------------------------------------------
def test_a_ping_log_becomes_a_delay_trace_of_half_its_rtts():
    trace = read_delay_trace(str(ORCA_PING), "10ms")
    # The 2016 log: seq 0 at 13.215 ms, seq 1 at 11.645 ms; lost probes leave no point.
    assert trace["t_ns"][:2] == [0, 10_000_000] and trace["delay_ns"][:2] == [6_607_500, 5_822_500]
    assert len(trace["t_ns"]) == 3593 and trace["period_ns"] == trace["t_ns"][-1] + 10_000_000
    # Without a step a log without timestamps is one probe a second (ping's default).
    assert read_delay_trace(str(ORCA_PING))["t_ns"][1] == 1_000_000_000
    # With -D, the timestamps say when.
    stamped = read_delay_trace(str(DATA / "ping" / "linux_lo_D.txt"))
    assert stamped["t_ns"][0] == 0 and 150_000_000 < stamped["t_ns"][1] < 250_000_000


def test_a_trace_in_several_gzip_members_reads_as_the_one_text_they_make(tmp_path):
    # As gzip(1) reads `cat a.gz b.gz`: the 2016 log cut into members at line ends, empty ones between them.
    lines = gzip.decompress(ORCA_PING.read_bytes()).splitlines(keepends=True)
    cuts = [0, 1, 1000, 1001, 2500, len(lines)]
    members = [gzip.compress(b"".join(lines[a:b])) + gzip.compress(b"") for a, b in zip(cuts, cuts[1:])]
    split = tmp_path / "ping.txt.gz"
    split.write_bytes(b"".join(members))
    assert read_delay_trace(str(split), "10ms") == read_delay_trace(str(ORCA_PING), "10ms")
    split.write_bytes(b"".join(members)[:-5])
    with pytest.raises(LabkitError, match="damaged gzip file"):
        read_delay_trace(str(split))


def test_jitter_and_rate_are_refused_where_no_packet_would_get_through():
    spec = LinkSpec(one_way_delay_s=0.01)
    for bad, message in ((replace(spec, jitter="10001ms"), "--jitter: '10001ms' is more than 10 s"),
                         (replace(spec, rate_bps=0.0), "rate must be more than 0, not 0 bit/s; give 'none'")):
        with pytest.raises(LabkitError, match=re.escape(message)):
            emulator_params(bad, spec, 1460)
    assert emulator_params(replace(spec, jitter="10s"), spec, 1460)["jitter_ns"] == 10_000_000_000


def test_two_column_traces_rate_traces_and_jitter_tables(tmp_path):
    plain = tmp_path / "steps.txt"
    plain.write_text("# a delay step\n0 40\n1.5 80ms\n3s 40\n")
    trace = read_delay_trace(str(plain))
    assert trace == {"t_ns": [0, 1_500_000_000, 3_000_000_000], "delay_ns": [40_000_000, 80_000_000, 40_000_000],
                     "period_ns": 4_500_000_000}
    rate = tmp_path / "link.up"
    rate.write_text("1\n1\n2\n5\n")
    assert read_rate_trace(str(rate)) == {"ms": [1, 1, 2, 5]}
    rate.write_text("5\n2\n")
    with pytest.raises(LabkitError, match="must not decrease"):
        read_rate_trace(str(rate))
    table = read_jitter_table(str(ORCA_PING))  # a ping log's RTTs, standardized
    assert abs(sum(table) / len(table)) < 1e-9 and table == sorted(table)
    dist = tmp_path / "flat.dist"
    dist.write_text("-8192 0 8192 16384\n")
    assert read_jitter_table(str(dist)) == [-1.0, 0.0, 1.0, 2.0]


# -- what the emulator exported (recorded) -----------------------------------------------------------------
def _recorded(name: str) -> tuple[dict, dict]:
    window = json.loads((EMULATOR / name / "window.json").read_text())
    config = json.loads((EMULATOR / name / "link.json").read_text())
    delays = {f"{d['from']}>{d['to']}": d["params"]["delay_ns"] for d in config["directions"]}
    return window, emulator.window_summary(EMULATOR / name / emulator.STATS_FILE, window["start_utc_ns"],
                                           window["end_utc_ns"], delays)


def test_a_window_summary_accounts_for_every_packet():
    for name in ("ping", "saturated", "partition"):
        _, summary = _recorded(name)
        for key, d in summary["directions"].items():
            # Without duplication every packet that entered left or was dropped for a cause.
            assert d["in"] == d["out"] + sum(d["drops"].values()), (name, key)
            assert d["lateness_n"] > 0 and d["lateness_p50_us"] <= d["lateness_p99_us"] <= d["max_us"] + 1
    _, ping = _recorded("ping")
    assert ping["directions"]["a>b"]["in"] == 300 and ping["directions"]["b>a"]["in"] == 300


def test_the_partition_is_in_the_record_and_a_saturated_emulator_is_flagged():
    window, partition = _recorded("partition")
    cut = partition["directions"]["a>b"]
    assert cut["drops"]["partition"] > 0 and partition["directions"]["b>a"]["drops"]["partition"] == 0
    origin = window["schedule_origin_utc_ns"]
    assert sorted({(e["label"], e["due_utc_ns"] - origin) for e in partition["events"]}) == [
        ("cut", 1_000_000_000), ("cut ends", 2_000_000_000)]
    _, saturated = _recorded("saturated")
    # One iperf3 stream at the writer's limit: packets left milliseconds late, far over max(50 µs, 1 % of 1 ms).
    assert "a>b" in saturated["late_directions"]
    assert saturated["directions"]["a>b"]["late_threshold_us"] == 50.0
    messages = emulator.late_messages({"emulator": {"windows": [saturated, partition]}})
    assert messages and all("late on" in m for m in messages) and not any("partition" in m for m in messages)
    assert "a->b" in messages[0] and "µs allowed" in messages[0]


def test_a_run_on_a_testbed_inventory_records_its_window(tmp_path):
    window, _ = _recorded("partition")
    table = {"name": "rec", "link_stats": str(EMULATOR / "partition" / emulator.STATS_FILE),
             "state_dir": str(EMULATOR / "partition"), "links": {"a>b": "2 ms one way"}}
    recorded = emulator.run_window(table, window["start_utc_ns"], window["end_utc_ns"])
    assert recorded["testbed"] == "rec" and set(recorded["directions"]) == {"a>b", "b>a"}
    assert recorded["directions"]["a>b"]["late_threshold_us"] == 50.0
    assert emulator.run_window({"name": "not a testbed"}, 0, 1) is None and emulator.run_window(None, 0, 1) is None


def test_quantiles_of_a_histogram_are_bucket_upper_bounds():
    hist = {0: 90, 1: 5, 150: 4, 2000: 1}
    assert emulator.hist_quantile_us(hist, 0.5) == 1.0
    assert emulator.hist_quantile_us(hist, 0.99) == 160.0  # [150, 160) µs
    assert emulator.hist_quantile_us(hist, 1.0, max_us=2050.0) == 2050.0
    assert emulator.hist_quantile_us({}, 0.5) is None
    assert emulator.late_threshold_us(100_000_000) == 1000.0 and emulator.late_threshold_us(1_000_000) == 50.0


def test_the_rtts_a_replayed_trace_should_give_hold_packets_in_order_and_resolve_an_uncertain_send_time():
    from labkit.testbed.fidelity import expected_trace_rtts

    ms = 1_000_000
    # One-way delay 95 ms for the first 10 ms of every 40, then 5 ms.
    trace = {"t_ns": [0, 10 * ms], "delay_ns": [95 * ms, 5 * ms], "period_ns": 40 * ms}
    # Sent at 1 ms: 95 ms out (arrives at 96 ms, in a 5 ms step), 5 ms back: 100 ms. Sent at 12 ms: 5 ms out
    # would arrive at 17 ms, before the first one, so it waits for it (96 ms) and is back at 101 ms: 89 ms.
    assert expected_trace_rtts(trace, 0, [1 * ms, 12 * ms]).tolist() == [100.0, 89.0]
    # Stamped at 10.5 ms, perhaps 1 ms late: it may have left at 9.5 ms, in the 95 ms step, and the measured
    # RTT says it did. Without a measurement, the stamp decides.
    assert expected_trace_rtts(trace, 0, [int(10.5 * ms)], measured_ms=[100.1], uncertainty_ns=ms).tolist() == [100.0]
    assert expected_trace_rtts(trace, 0, [int(10.5 * ms)], uncertainty_ns=ms).tolist() == [10.0]
    # Away from a step the uncertainty changes nothing, whatever was measured.
    assert expected_trace_rtts(trace, 0, [20 * ms], measured_ms=[50.0], uncertainty_ns=ms).tolist() == [10.0]
