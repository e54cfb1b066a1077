"""irtt as a `labkit series` probe beside ping and the warm gRPC echo, across a testbed of its own with an
asymmetric link (30 ms a -> b, 70 ms b -> a), over SSH to a deployed labkit.

The controller starts irtt's server on b (bound to b's data address) and irtt's client on a, with the agent's
ticks; each irtt round trip is a row of its tick, split by direction by irtt's server's stamps. The testbed's hosts
are namespaces of one kernel and read one clock, so each way's delay is exact and must be the link's.
"""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from conftest import deployed_inventory, labkit as run_labkit, leftover_processes, own_testbed
from labkit.parsers.irtt import parse_irtt
from labkit.store import Run
from labkit.testbed.topology import Topology

pytestmark = pytest.mark.testbed

OUT_MS, BACK_MS = 30.0, 70.0
TICKS = 30  # 3 s of 100 ms ticks


@pytest.fixture(scope="module")
def lab():
    topology = Topology(links={"a>b": {"one_way_delay_s": OUT_MS / 1e3}, "b>a": {"one_way_delay_s": BACK_MS / 1e3}})
    with own_testbed("irtt-asym", OUT_MS / 1e3, topology=topology) as state:
        yield state


@pytest.fixture(scope="module")
def series_run(lab, tmp_path_factory):
    inventory = deployed_inventory(lab, tmp_path_factory.mktemp("irtt-inventory"))
    runs = tmp_path_factory.mktemp("irtt-runs")
    proc = run_labkit("series", str(inventory), "--client", "a", "--server", "b", "--duration", "3s",
                      "--interval", "100ms", "--cell", "3s", "--timeout", "1s", "--probes", "ping,echo-warm,irtt",
                      "--name", "irtt", "--runs-dir", str(runs), "--quiet", timeout=180)
    assert proc.returncode == 0, proc.stderr
    return Run.open(next(runs.glob("*-irtt")))


def test_irtt_has_a_row_for_every_tick_split_into_the_links_two_ways(series_run):
    samples = series_run.samples()
    assert set(samples["probe"]) == {"ping", "echo-warm", "irtt"}
    irtt = samples[samples["probe"] == "irtt"].sort_values("seq")
    assert list(irtt["seq"]) == list(range(TICKS))
    ok = irtt[irtt["ok"]]
    # No loss on the link; a tick irtt's send loop skipped (its send before came late) is a row that says so.
    assert len(ok) >= TICKS - 5 and set(irtt.loc[~irtt["ok"], "error"]) <= {
        "not sent: irtt skipped this interval (its previous send was late)"}
    assert ok[["server_recv_utc_ns", "server_send_utc_ns", "rtt_ms"]].notna().all().all()
    assert (ok["payload_bytes"] == 60).all() and (ok["unit"] == "ns").all() and not irtt["cold"].any()
    out_ms = (ok["server_recv_utc_ns"] - ok["t_utc_ns"]).astype(float) / 1e6
    back_ms = (ok["t_utc_ns"] - ok["server_send_utc_ns"]).astype(float) / 1e6 + ok["rtt_ms"]
    # The hosts share one clock: each way at least its link's delay, at the median within 1 ms of it.
    assert (out_ms >= OUT_MS).all() and (back_ms >= BACK_MS).all()
    assert abs(out_ms.median() - OUT_MS) < 1 and abs(back_ms.median() - BACK_MS) < 1, (out_ms.median(),
                                                                                        back_ms.median())
    # irtt's ticks are the agent's: its first send within a tick of the first ping's.
    first_ping = samples.loc[(samples["probe"] == "ping") & (samples["seq"] == 0), "t_utc_ns"].iat[0]
    assert abs(int(irtt["t_utc_ns"].iat[0]) - int(first_ping)) < 1e9


def test_the_raw_json_is_kept_and_its_own_delays_are_the_rows(series_run):
    """irtt's JSON in raw/, named in each row; the rows' one-way delays are irtt's own send and receive delays."""
    samples = series_run.samples()
    irtt = samples[samples["probe"] == "irtt"]
    [source] = set(irtt["source_file"])
    raw_path = series_run.raw_dir / source
    text = gzip.open(raw_path, "rt").read() if raw_path.suffix == ".gz" else raw_path.read_text()
    data = json.loads(text)
    delays = {trip["seqno"]: trip["delay"] for trip in data["round_trips"] if trip["lost"] in (False, "false")}
    by_send = {trip["timestamps"]["client"]["send"]["wall"]: trip["seqno"] for trip in data["round_trips"]}
    ok = irtt[irtt["ok"]]
    seqnos = [by_send[t] for t in ok["t_utc_ns"]]
    # To the µs: samples() reads the stamps' nullable columns as float64, whose 53 bits keep an epoch in ns to 256 ns
    # (the parser's rows are exact: tests/test_irtt.py).
    out_ms = (ok["server_recv_utc_ns"] - ok["t_utc_ns"]) / 1e6
    assert np.allclose(out_ms, [delays[seq]["send"] / 1e6 for seq in seqnos], rtol=0, atol=1e-3)
    back_ms = (ok["t_utc_ns"] - ok["server_send_utc_ns"]).astype(float) / 1e6 + ok["rtt_ms"]
    assert np.allclose(back_ms, [delays[seq]["receive"] / 1e6 for seq in seqnos], rtol=0, atol=1e-3)
    assert len(parse_irtt(text).rows) == len(data["round_trips"])


def test_irtt_is_recorded_and_leaves_nothing_running(series_run, lab):
    manifest = series_run.manifest
    assert manifest["status"] == "complete"
    [server] = manifest["irtt_servers"].values()
    assert server["host"] == "b" and server["address"] == lab.hosts["b"].data_address and server["port"] > 0
    assert all(manifest["hosts"][name]["tools"]["irtt"].startswith("irtt version") for name in ("a", "b"))
    # The agent ran the other probes, irtt none of them.
    assert all("irtt" not in agent["probes"] for agent in manifest["agents"])
    assert leftover_processes(lab, ("irtt ",)) == []
