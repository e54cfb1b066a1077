"""A testbed of three regions from a topology file: each pair its own link, a sweep over every pair at once.

Real parts throughout: `labkit testbed up --topology`, three sshds, the emulator, ping, and
`labkit sweep --mesh`, whose run records what the emulator did.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import tomllib

import pytest
import tomli_w

import labkit
from labkit.testbed.emulator import read_lines
from conftest import labkit as run_labkit, own_testbed_name, require_testbed

pytestmark = pytest.mark.testbed

# One way: us-eu 10 ms, eu-ap 20 ms; us->ap 5 ms but ap->us 15 ms (an asymmetric route).
REGIONS = """
[hosts.us]
[hosts.eu]
[hosts.ap]

[links.us-eu]
one_way_delay = "10ms"

[links.eu-ap]
one_way_delay = "20ms"

[links."us->ap"]
one_way_delay = "5ms"

[links."ap->us"]
one_way_delay = "15ms"
"""
RTT_MS = {("us", "eu"): 20, ("eu", "ap"): 40, ("us", "ap"): 20}


@pytest.fixture(scope="module")
def regions(tmp_path_factory):
    require_testbed()
    name = own_testbed_name("t-regions")
    topology = tmp_path_factory.mktemp("topology") / "regions.toml"
    topology.write_text(REGIONS)
    up = run_labkit("testbed", "up", "--name", name, "--topology", str(topology), "--rate", "none")
    assert up.returncode == 0, up.stderr
    try:
        yield json.loads(run_labkit("testbed", "status", "--name", name, "--json", "--no-ping", check=True).stdout)
    finally:
        down = run_labkit("testbed", "down", "--name", name)
        assert down.returncode == 0, down.stderr
        left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert f"labkit-{name}-" not in left


def _rtts(regions, src: str, dst: str) -> list[float]:
    hosts = regions["hosts"]
    out = subprocess.run(["ip", "netns", "exec", hosts[src]["netns"], "env", "LC_ALL=C", "ping", "-n", "-c", "5",
                          "-i", "0.05", hosts[dst]["data_address"]], capture_output=True, text=True, timeout=30).stdout
    return [float(part.split("=")[1]) for part in out.split() if part.startswith("time=")]


def test_each_pair_has_its_own_link_and_every_host_is_in_the_inventory(regions):
    assert regions["up"] and set(regions["hosts"]) == {"us", "eu", "ap"}
    assert len(regions["links"]) == 6 and "5 ms one way" in regions["links"]["us>ap"]["describe"]
    for (src, dst), rtt in RTT_MS.items():
        measured = statistics.median(_rtts(regions, src, dst))
        assert rtt <= measured <= rtt * 1.05 + 0.3, f"{src}->{dst}: {measured} ms, configured {rtt} ms"
    inventory = tomllib.loads(open(regions["inventory"]).read())
    assert set(inventory["hosts"]) == {"us", "eu", "ap"}
    assert len({h["data_address"] for h in inventory["hosts"].values()}) == 3
    assert set(inventory["testbed"]["links"]) == set(regions["links"])
    # Each host its own sshd, reached by its alias.
    for host in ("us", "ap"):
        proc = subprocess.run(["ssh", "-F", regions["ssh_config"], "-o", "BatchMode=yes", regions["hosts"][host]["ssh_alias"],
                               "ip", "-o", "-4", "addr", "show", "dev", "lkdata"], capture_output=True, text=True, timeout=30)
        assert regions["hosts"][host]["data_address"] in proc.stdout, proc.stderr


def test_a_mesh_sweep_runs_every_pair_and_records_the_emulator(regions, tmp_path):
    # The hosts are driven in their namespaces from here (ssh = "local"), not over their sshds: no deploy
    # needed (the sweep over SSH is tests/test_sweep.py's), and the run still knows its testbed.
    data = tomllib.loads(open(regions["inventory"]).read())
    data["hosts"] = {name: {"ssh": "local", "netns": h["netns"], "data_address": h["data_address"]}
                     for name, h in data["hosts"].items()}
    inventory = tmp_path / "inventory.toml"
    inventory.write_text(tomli_w.dumps(data))
    run = labkit.sweep(str(inventory), mesh=True, sizes=[100], gaps_s=[0.0], repeats=2, name="regions",
                       ping_count=2, iperf_seconds=1, runs_dir=tmp_path / "runs", quiet=True)
    pairs = run.samples().groupby(["src", "dst"]).size().to_dict()
    assert pairs == {(a, b): 2 for a in ("us", "eu", "ap") for b in ("us", "eu", "ap") if a != b}
    (window,) = run.manifest["emulator"]["windows"]
    assert window["testbed"] == regions["name"] and set(window["directions"]) <= set(regions["links"])
    lines = read_lines(window["stats_file"], window["start_utc_ns"], window["end_utc_ns"])
    for key, d in window["directions"].items():
        # Every packet went out or was dropped, but for those on the wire at the window's edges: every delay here is
        # under a second, so a packet counted out in the window's first second may have come in before it, and one
        # still on the wire at its end came in during its last second (a fixed tolerance of 1 % failed when the
        # run's last second was busy: 94 packets in flight). The window's seconds are the first of the file's lines
        # that add up to its counts (the file has grown since the run read it).
        seconds = [line["d"].get(key, {}) for line in lines]
        summed = next(n for n in range(1, len(seconds) + 1)
                      if sum(second.get("in", 0) for second in seconds[:n]) == d["in"]
                      and sum(second.get("out", 0) for second in seconds[:n]) == d["out"])
        first, last = seconds[0], seconds[summed - 1]
        unaccounted = d["in"] - d["out"] - sum(d["drops"].values())
        assert d["in"] > 0 and -first.get("out", 0) <= unaccounted <= last.get("in", 0), (key, unaccounted)
        assert d["lateness_p99_us"] is not None and d["late"] == (d["lateness_p99_us"] > d["late_threshold_us"])
    # The per-pair RTTs of the sweep's echo calls follow the topology (a call is at least one RTT).
    rtt = run.samples().groupby(["src", "dst"])["rtt_ns"].min() / 1e6
    assert rtt[("us", "ap")] >= 20 and rtt[("eu", "ap")] >= 40 and rtt[("us", "eu")] < 40
