"""A testbed that loses part of what `up` made (a flapped device, its data routes) says so and is put back in place."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import labkit, own_testbed


@pytest.fixture(scope="module")
def flap():
    with own_testbed("t-flap", 0.002) as state:
        yield state


def _in(host, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", "netns", "exec", host.netns, *argv], capture_output=True, text=True, timeout=60)


def _flap(host, ifname: str) -> None:
    """Take a device down and up again inside a host's namespace, as a user or a flaky driver would."""
    for state in ("down", "up"):
        subprocess.run(["ip", "-n", host.netns, "link", "set", ifname, state], check=True)


def _pings(src, dst) -> int:
    """How many of 3 pings from ``src`` reach ``dst``'s data address (a deadline of its own: a dead route fails)."""
    out = _in(src, "env", "LC_ALL=C", "ping", "-n", "-c", "3", "-i", "0.2", "-w", "10", dst.data_address).stdout
    return sum(1 for word in out.split() if word.startswith("time="))


def _status(name: str) -> tuple[int, dict, str]:
    text = labkit("testbed", "status", "--name", name, "--no-ping")
    info = json.loads(labkit("testbed", "status", "--name", name, "--no-ping", "--json").stdout)
    return text.returncode, info, text.stdout


def test_status_names_a_flapped_links_lost_route_and_repair_puts_it_back(flap):
    a, b = flap.hosts["a"], flap.hosts["b"]
    assert _status(flap.name)[0] == 0
    _flap(b, "lkdata")
    subprocess.run(["ip", "-n", a.netns, "link", "set", "mgmt0", "down"], check=True)
    assert _pings(b, a) == 0  # the flap took b's data route with it
    code, info, text = _status(flap.name)
    assert code == 1
    assert f"b: no route to a's data address {a.data_address} (via lkdata)" in info["problems"]
    assert "a: mgmt0 is down" in info["problems"]
    assert len(info["problems"]) == 2, info["problems"]
    assert f"fault: b: no route to a's data address {a.data_address} (via lkdata)" in text.splitlines()
    assert f"labkit testbed repair --name {flap.name}" in text

    pids_before = (info["parts"], json.loads((flap.dir / "state.json").read_text())["forwarder_pid"])
    repaired = labkit("testbed", "repair", "--name", flap.name)
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert "repairing" in repaired.stdout and f"no route to a's data address" in repaired.stdout
    code, info, text = _status(flap.name)
    assert (code, info["problems"]) == (0, [])
    assert "fault:" not in text
    # Repaired in place: the same emulator, not a rebuilt testbed.
    assert json.loads((flap.dir / "state.json").read_text())["forwarder_pid"] == pids_before[1]
    assert _pings(b, a) == 3 and _pings(a, b) == 3


def test_up_with_the_same_parameters_repairs_a_flapped_link_instead_of_saying_already_up(flap):
    from labkit.testbed.lab import LinkConfig, Testbed

    a, b = flap.hosts["a"], flap.hosts["b"]
    _flap(a, "lkdata")
    assert _pings(a, b) == 0
    said: list[str] = []
    Testbed(flap.name, log=said.append).up(LinkConfig(one_way_delay_s=0.002, rate_bps=None, emulator="tun"))
    assert any("repairing" in line and f"a: no route to b's data address {b.data_address}" in line for line in said), said
    assert _status(flap.name)[1]["problems"] == []
    assert _pings(a, b) == 3


def test_repair_of_a_healthy_testbed_changes_nothing_and_of_a_missing_one_is_one_line(flap, tmp_path):
    healthy = labkit("testbed", "repair", "--name", flap.name)
    assert healthy.returncode == 0 and "nothing to repair" in healthy.stdout
    missing = labkit("testbed", "repair", "--name", "bnone")
    # Also where no testbed was ever brought up (no state directory at all).
    never = labkit("testbed", "repair", "--name", "bnone", env={**os.environ, "LABKIT_STATE_HOME": str(tmp_path)})
    for refused in (missing, never):
        assert refused.returncode == 2
        assert refused.stderr.strip().count("\n") == 0 and "testbed bnone is not up" in refused.stderr, refused.stderr


def _recorded(name: str):
    from conftest import DATA

    return json.loads((DATA / "iproute" / name).read_text())


def test_the_comparison_finds_exactly_what_a_recorded_flap_lost():
    """On `ip -json` output recorded in host b of testbed index 1 before and after its lkdata went down and up."""
    from labkit.testbed.health import Fault, host_faults
    from labkit.testbed.lab import HostInfo

    b = HostInfo(name="b", netns="labkit-brec-b", ssh_alias="brec-b", mgmt_address="198.19.1.6", root_veth="lk1b",
                 root_address="198.19.1.5", data_address="198.18.1.2")
    peers = {"a": "198.18.1.1"}
    healthy = (_recorded("addr-json-testbed-healthy.json"), _recorded("route-json-testbed-healthy.json"))
    flapped = (_recorded("addr-json-testbed-flapped.json"), _recorded("route-json-testbed-flapped.json"))
    assert host_faults(b, peers, "cubic", *healthy) == []
    # The flap keeps the device up and its address, and loses the one route `up` added.
    assert host_faults(b, peers, "cubic", *flapped) == [
        Fault("b: no route to a's data address 198.18.1.1 (via lkdata)", repairable=True)]
    assert host_faults(b, peers, "bbr", *healthy) == [
        Fault("b: the route to a's data address 198.18.1.1 has congestion control cubic, not bbr", repairable=True)]
    moved = HostInfo(**{**b.__dict__, "data_address": "198.18.1.9", "mgmt_address": "198.19.1.10"})
    assert [fault.text for fault in host_faults(moved, peers, "cubic", *healthy)] == [
        "b: mgmt0 lacks its address 198.19.1.10/30", "b: lkdata lacks its address 198.18.1.9/32",
        "b: the route to a's data address 198.18.1.1 goes via lkdata from 198.18.1.2, not via lkdata from 198.18.1.9"]
