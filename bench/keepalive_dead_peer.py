#!/usr/bin/env python
"""How long a grpc-go client takes to notice a server silently gone, with the tuning article's keepalive and without.

The article (research brief §5) recommends client keepalive, a PING every 10 s with a 3 s timeout. This brings
up a testbed of its own (``--name``, 100 ms one way by default), deploys labkit on both hosts, and measures
(labkit.experiments.dead_peer.measure) ``--repeats`` times each case: ``labkit-go serve`` on b, ``labkit-go
dead-peer`` on a holding an EchoStream open with nothing outstanding, and a partition of the a-b link
``--partition-after`` seconds after the client's ready line. The detection time is the client's noticed time
minus the partition's start, as the link emulator recorded it. The cases:

- keepalive 10s/3s: expected between 13 s − (partition − last read) and 13 s;
- no keepalive: waits ``--wait`` (60 s) and says whether anything noticed; the ready line shows the socket's TCP
  keepalive (grpc-go's dialer turns it on with the kernel's timers) and TCP_USER_TIMEOUT;
- with ``--probes``: the same two with one Echo a second on the connection (application traffic), each with a
  5 s deadline: a call in flight then fails by its deadline, and with keepalive grpc-go's TCP_USER_TIMEOUT (the
  keepalive timeout) ends the connection once bytes stay unacknowledged that long.

Prints one line per measurement and a table per case (n, each value, min-max); ``--out FILE`` keeps every
measurement as JSON. Needs root (the testbed). Usage:
    .venv/bin/python bench/keepalive_dead_peer.py [--name ka-bench] [--repeats 3] [--wait 60] [--probes]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys

import labkit
from labkit.experiments.dead_peer import KEEPALIVE, measure

PROBE_EVERY_S, PROBE_TIMEOUT_S = 1.0, 5.0


def cases(probes: bool) -> list[tuple[str, tuple[str, ...], float | None]]:
    """(name, the client's grpc options, probe interval) of each case."""
    base = [("keepalive 10s/3s", KEEPALIVE, None), ("no keepalive", (), None)]
    if probes:
        base += [("keepalive 10s/3s + an Echo a second", KEEPALIVE, PROBE_EVERY_S),
                 ("no keepalive + an Echo a second", (), PROBE_EVERY_S)]
    return base


def describe(d) -> str:
    tcp = d.ready.get("tcp") or {}
    socket = (f"TCP keepalive {'on' if tcp.get('keepalive') else 'off'} (idle {tcp.get('keepidle_s')} s, "
              f"{tcp.get('keepcnt')} probes {tcp.get('keepintvl_s')} s apart), TCP_USER_TIMEOUT {tcp.get('user_timeout_ms')} ms")
    when = (f"noticed {d.detection_s:.3f} s after the partition ({d.code}: {d.detail})" if d.noticed
            else f"not noticed within {d.waited_s:g} s")
    probes = ""
    if "probes_ok" in d.end:
        first = d.end.get("first_probe_failure") or {}
        probes = (f"; probes {d.end['probes_ok']} ok, {d.end['probes_failed']} failed"
                  + (f", the first at +{(first['failed_t_ns'] - d.partition_t_ns) / 1e9:.3f} s ({first['code']})"
                     if first else ""))
    late = ", ".join(f"{k} {v:.0f} µs" for k, v in sorted(d.applied_late_us.items()))
    return (f"{when}; quiet {d.quiet_before_s:.3f} s before it; partition from the {d.partition_source}"
            f"{f' (applied late: {late})' if late else ''}; {socket}{probes}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="ka-bench", help="the testbed's name (brought up, and down at the end)")
    parser.add_argument("--one-way-delay", default="100ms")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--wait", type=float, default=60.0, help="seconds the client waits to notice")
    parser.add_argument("--partition-after", type=float, default=2.0,
                        help="seconds from the client's ready line to the partition (as the schedule's at)")
    parser.add_argument("--probes", action="store_true", help="also the cases with an Echo a second")
    parser.add_argument("--out", help="write every measurement here as JSON")
    args = parser.parse_args()
    say = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    results: dict[str, list] = {}
    with labkit.testbed(one_way_delay=args.one_way_delay, name=args.name, log=say) as lab:
        say(f"testbed {args.name}: {lab.link.describe()}; deploying")
        lab.deploy()
        for name, options, probe_every in cases(args.probes):
            for repeat in range(args.repeats):
                d = measure(lab.inventory, grpc_options=options, wait_s=args.wait,
                            partition_after_s=args.partition_after, probe_every_s=probe_every,
                            timeout_s=PROBE_TIMEOUT_S if probe_every else 20.0)
                results.setdefault(name, []).append(d)
                print(f"{name} #{repeat + 1}: {describe(d)}", flush=True)
    print()
    print(f"{'case':40} {'n':>2}  detection after the partition (s)")
    for name, measured in results.items():
        times = [d.detection_s for d in measured if d.noticed]
        missed = [d.waited_s for d in measured if not d.noticed]
        text = ", ".join(f"{t:.2f}" for t in times)
        if times:
            text += f" (min {min(times):.2f}, max {max(times):.2f}, median {statistics.median(times):.2f})"
        if missed:
            text += f"{'; ' if times else ''}{len(missed)} not noticed within {max(missed):g} s"
        print(f"{name:40} {len(measured):>2}  {text}")
    if args.out:
        with open(args.out, "w") as handle:
            json.dump({name: [{**dataclasses.asdict(d), "detection_s": d.detection_s, "quiet_before_s": d.quiet_before_s}
                              for d in measured] for name, measured in results.items()}, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
