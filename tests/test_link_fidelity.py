"""Does the emulated link do what it is configured to do? Judged on the real testbed by the emulator's own record.

Probes are UDP packets whose send and arrival the kernel stamps (labkit.testbed.probe). What a test asks here does not
change with the machine's load: which packets the emulator lost, duplicated or sent ahead (its random decisions are
seeded with ``testbed up --seed``, so the same packets draw the same decisions in every run), whether what the probes
saw is what the emulator counted, cause by cause, and when a scheduled change took effect on the emulator's clock.
How faithfully it keeps time (the jitter's shapes, a replayed trace, a partition's edges by the wall clock) is
physics: bench/link_fidelity.py measures it, and go/internal/link's tests check the model itself on a virtual clock.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from conftest import require_testbed, own_testbed_name
from labkit.testbed import emulator, probe
from labkit.testbed.fidelity import binomial_interval, loss_bursts
from labkit.testbed.lab import LinkConfig, Testbed
from labkit.testbed.topology import Topology

pytestmark = pytest.mark.testbed


def _testbed(name: str, link: LinkConfig, topology: Topology | None = None, schedule=None):
    require_testbed()
    lab = Testbed(own_testbed_name(name), log=lambda message: None)
    return lab, lab.up(link, topology=topology, schedule=schedule)


def _flow(state, src: str, dst: str, count: int, interval_s: float) -> probe.Flow:
    s, d = state.hosts[src], state.hosts[dst]
    return probe.Flow(s.netns, s.data_address, d.netns, d.data_address, count, interval_s)


def _binomial_ok(k: int, n: int, p: float) -> bool:
    low, high = binomial_interval(n, p)
    return low <= k <= high


def test_loss_gilbert_elliott_duplication_and_reordering():
    n = 5000
    topology = Topology(links={"a>b": {"loss": "5%"}, "b>a": {"loss": "10% 40%", "loss_model": "gemodel"}})
    lab, state = _testbed("t-loss", LinkConfig(one_way_delay_s=0.002, rate_bps=None), topology)
    try:
        random_loss, ge = probe.run([_flow(state, "a", "b", n, 0.0004), _flow(state, "b", "a", n, 0.0004)])
        counters = emulator.status_after(state.dir, time.time_ns())["directions"]
        # The same testbed changed live: duplication one way, reordering the other.
        changed = Topology(links={"a>b": {"duplicate": "5%"}, "b>a": {"reorder": "10%"}})
        state = lab.up(LinkConfig(one_way_delay_s=0.002, rate_bps=None), topology=changed)
        dup, reorder = probe.run([_flow(state, "a", "b", n, 0.0004), _flow(state, "b", "a", n, 0.0004)])
        changed_counters = emulator.status_after(state.dir, time.time_ns())["directions"]
    finally:
        lab.down(quiet=True)
    lost, ge_lost = set(random_loss.lost()), set(ge.lost())
    bursts = loss_bursts(ge_lost, n)
    copies = sum(len(times) - 1 for times in dup.received_ns.values())
    sent_ahead = changed_counters["b>a"]["totals"]["reordered"]
    assert _binomial_ok(len(lost), n, 0.05), f"{len(lost)} of {n} lost at 5 %"
    # What the probes saw is what the emulator counted, cause by cause.
    assert counters["a>b"]["totals"]["drop_loss"] == len(lost)
    assert counters["b>a"]["totals"]["drop_loss"] == len(ge_lost)
    assert changed_counters["a>b"]["totals"]["duplicated"] == copies
    # Gilbert-Elliott p 10 %, r 40 %, every packet lost in the bad state: bursts of 1/r = 2.5 on average.
    assert abs(np.mean(bursts) - 2.5) / 2.5 < 0.10, f"mean burst {np.mean(bursts):.3f} over {len(bursts)} bursts"
    assert _binomial_ok(len(ge_lost), n, 0.1 / (0.1 + 0.4))
    assert not dup.lost() and _binomial_ok(copies, n, 0.05), f"{copies} duplicates of {n}"
    # A packet sent ahead skips the 2 ms the others wait: the probes arrive out of their order, none lost.
    order = np.array(reorder.arrival_order)
    assert (order[1:] < np.maximum.accumulate(order)[:-1]).any() and not reorder.lost()
    assert _binomial_ok(sent_ahead, n, 0.10), f"{sent_ahead} of {n} sent ahead"


def test_a_scheduled_partition_loses_one_unbroken_run_of_packets_and_the_emulator_counts_them():
    from labkit.testbed.schedule import parse_inline

    # 2 s before the cut and 2 s of probes after it: the flow spans the partition even when a loaded machine is slow
    # to start it after the testbed is up.
    lab, state = _testbed("t-part", LinkConfig(one_way_delay_s=0.002, rate_bps=None),
                          schedule=[parse_inline("at=2s,for=1s,partition,link=a-b,label=cut")])
    start, end = state.schedule_origin_utc_ns + 2_000_000_000, state.schedule_origin_utc_ns + 3_000_000_000
    try:
        (flow,) = probe.run([_flow(state, "a", "b", 5000, 0.001)])
        status = emulator.status_after(state.dir, time.time_ns())
        lines = emulator.read_lines(state.dir / emulator.STATS_FILE, start - 10**9, end + 10**9)
    finally:
        lab.down(quiet=True)
    lost = flow.lost()
    received = sorted(flow.received_ns)
    # The emulator enters packets in the order they were sent, so what it dropped from the cut to its end is one
    # unbroken run of sequence numbers, with probes delivered on both sides of it.
    assert lost, "the partition lost nothing"
    assert lost == list(range(lost[0], lost[-1] + 1)), f"lost probes are not one run: {lost[:10]} ... {lost[-10:]}"
    assert received[0] < lost[0] and received[-1] > lost[-1]
    # Every probe lost is one the emulator counted as dropped by the partition, and nothing else was dropped.
    totals = status["directions"]["a>b"]["totals"]
    assert totals["drop_partition"] == len(lost)
    assert totals["drop_loss"] == totals["drop_queue"] == totals["drop_aqm"] == 0
    # The cut and its end took effect on the emulator's clock when the schedule said.
    events = [e for line in lines for e in line.get("events", []) if e["direction"] == "a>b"]
    assert [e["label"] for e in events] == ["cut", "cut ends"]
    assert [e["due_utc_ns"] for e in events] == [start, end]
