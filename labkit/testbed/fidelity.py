"""What a configured link should do to probes, stated from netem's definitions, not from the emulator's code.

Pure functions that tests/test_link_fidelity.py and bench/testbed_fidelity.py compare
measurements with (measurements from :mod:`labkit.testbed.probe` and ping):

- :func:`netem_quantile`: netem's delay distributions (iproute2's tables) as quantile functions;
- :func:`reference_delays`: the one-way delays probes sent at given times should see through a
  link with that jitter, packets keeping their order;
- :func:`expected_trace_rtts`: what ping should measure through a link replaying a delay trace;
- :func:`loss_bursts` and :func:`binomial_interval` for loss.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

#: iproute2's tables stop at 32767 / 8192 standard units.
TABLE_CAP = 32767 / 8192


def _pareto(u):
    # iproute2 netem/pareto.c: X ~ Pareto(alpha 3, x_m 1), shifted and scaled, (X - 1.5) * 4/3.
    return np.minimum(TABLE_CAP, ((1 - u) ** (-1 / 3) - 1.5) * 4 / 3)


def netem_quantile(name: str, u, table=None):
    """The standardized value at quantile ``u`` of netem's distribution ``name`` (or of ``table``)."""
    u = np.asarray(u, dtype=float)
    if name == "uniform":
        return 2 * u - 1
    if name == "normal":
        return stats.norm.ppf(u)
    if name == "pareto":
        return _pareto(u)
    if name == "paretonormal":  # iproute2 netem/paretonormal.c: (normal + 3 * pareto) / 4 at the same quantile
        return (stats.norm.ppf(u) + 3 * _pareto(u)) / 4
    values = np.asarray(table)
    return values[np.minimum((u * len(values)).astype(int), len(values) - 1)]


def reference_delays(name: str, base_s: float, jitter_s: float, sent_ns, table=None, repeats: int = 100,
                     seed: int = 4) -> np.ndarray:
    """One-way delays of probes sent at ``sent_ns`` through a link of ``base_s`` plus jitter drawn from
    ``name``, each held back behind the probe ahead (order is kept); ``repeats`` draws per send."""
    rng = np.random.default_rng(seed)
    sent = (np.asarray(sent_ns, dtype=np.int64) - int(sent_ns[0])) / 1e9
    out = []
    for _ in range(repeats):
        delays = np.maximum(base_s + jitter_s * netem_quantile(name, rng.random(len(sent)), table), 0)
        out.append(np.maximum.accumulate(sent + delays) - sent)
    return np.concatenate(out)


def expected_trace_rtts(trace: dict, origin_ns: int, sent_ns, measured_ms=None, uncertainty_ns: int = 0) -> np.ndarray:
    """RTTs (ms) ping should measure through a link replaying ``trace`` (the emulator's delay trace, from
    ``origin_ns``) both ways: a packet's one-way delay is the trace's value when it enters the link, and
    it never overtakes the one before it.

    ping stamps a reply when it prints it, so a send time taken as that stamp less the RTT may be late by
    up to ``uncertainty_ns``. Near a step of the trace that decides which step's delay the packet got,
    hundreds of ms apart in a real trace, and a packet held wrongly holds the ones behind it; so each send
    is placed, within its uncertainty, where the RTT is closest to ``measured_ms``. Away from the steps
    every place gives the same RTT."""
    times, delays, period = np.array(trace["t_ns"]), np.array(trace["delay_ns"]), trace["period_ns"]

    def delay(at: int) -> int:
        return int(delays[max(np.searchsorted(times, (at - origin_ns) % period, side="right") - 1, 0)])

    def through(sent: int, out: int, back: int) -> tuple[float, int, int]:
        out = max(sent + delay(sent), out)
        back = max(out + delay(out), back)
        return (back - sent) / 1e6, out, back

    out = back = 0
    rtts = []
    for i, stamped in enumerate(sent_ns):
        rtt, out_i, back_i = through(stamped, out, back)
        if measured_ms is not None and uncertainty_ns:
            rtt, out_i, back_i = min((rtt, out_i, back_i), through(stamped - uncertainty_ns, out, back),
                                     key=lambda c: abs(c[0] - measured_ms[i]))
        out, back = out_i, back_i
        rtts.append(rtt)
    return np.array(rtts)


def loss_bursts(lost, count: int) -> list[int]:
    """Lengths of the runs of consecutive lost sequence numbers among ``count`` probes."""
    lost = set(lost)
    runs, run = [], 0
    for seq in range(count + 1):
        if seq in lost:
            run += 1
        elif run:
            runs.append(run)
            run = 0
    return runs


def binomial_interval(n: int, p: float, level: float = 0.99) -> tuple[float, float]:
    """Where the number of successes of ``n`` trials of probability ``p`` falls with probability ``level``."""
    return stats.binom.interval(level, n, p)
