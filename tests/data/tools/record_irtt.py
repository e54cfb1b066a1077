#!/usr/bin/env python
"""Record irtt client runs (its JSON), for tests/test_irtt.py (run as root from the repository root).

    .venv/bin/python tests/data/tools/record_irtt.py [OUTDIR]   (default tests/data/irtt)

Each run is Debian's irtt 0.9.0 started with labkit's own argv builders (labkit.parsers.irtt): the server bound to
one address, the client asking for both server stamps on both clocks, 100 ms apart, 60-byte packets. For each,
OUTDIR/NAME.json is the client's stdout and OUTDIR/NAME.txt what made it (the two argv, the link):

- loopback:   server and client on 127.0.0.1, 3 s (30 packets);
- loopback_comp: the same for 10 s with irtt's default timer (--timer=comp), whose early wake-ups make its send loop
              skip an interval now and then: fewer than 100 packets, the later ones an interval or more behind their
              seqno;
- asymmetric: a testbed of its own (ir-rec-asym), 30 ms a -> b and 70 ms b -> a, no rate limit; server in b on its
              data address, client in a, 5 s (50 packets);
- loss:       a testbed of its own (ir-rec-loss), 10 ms each way with 10 % random loss each way (emulator seed 7);
              server in b, client in a, 8 s (80 packets), so some are lost on the way out and some on the way back.

The testbeds' names start with ir- and are taken down again, also on failure.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from labkit.parsers.irtt import irtt_client_argv, irtt_server_argv, parse_irtt_listening
from labkit.testbed.lab import LinkConfig, Testbed
from labkit.testbed.topology import Topology

INTERVAL_S, PAYLOAD = 0.1, 60


def run_pair(out: Path, name: str, server_ns: str | None, client_ns: str | None, address: str, duration_s: float,
             link: str, timer: str = "simple") -> None:
    """irtt's server in ``server_ns`` on ``address``, its client in ``client_ns``; the client's JSON kept."""
    def inside(netns: str | None, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", netns, *argv] if netns else argv

    server_argv = irtt_server_argv(address, 0, max_duration_s=duration_s, min_interval_s=INTERVAL_S,
                                   max_length=PAYLOAD)
    server = subprocess.Popen(inside(server_ns, server_argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    try:
        port = None
        for line in server.stdout:
            found = parse_irtt_listening(line)
            if found:
                port = found[1]
                break
        if port is None:
            raise SystemExit(f"{name}: irtt's server did not start")
        client_argv = irtt_client_argv(address, port, INTERVAL_S, duration_s, PAYLOAD, wait_s=1.0, timer=timer)
        client = subprocess.run(inside(client_ns, client_argv), capture_output=True, text=True, timeout=duration_s + 30)
        if client.returncode != 0:
            raise SystemExit(f"{name}: irtt client exited {client.returncode}: {client.stderr.strip()}")
    finally:
        server.terminate()
        server.wait(10)
    (out / f"{name}.json").write_text(client.stdout)
    (out / f"{name}.txt").write_text(f"link: {link}\nserver: {' '.join(server_argv)}\n"
                                     f"client: {' '.join(client_argv)}\n")
    print(f"{name}: {len(client.stdout)} bytes", file=sys.stderr)


def on_testbed(out: Path, name: str, testbed: str, link: LinkConfig, topology: Topology | None, duration_s: float,
               described: str) -> None:
    lab = Testbed(testbed, log=lambda message: None)
    state = lab.up(link, topology=topology)
    try:
        a, b = state.hosts["a"], state.hosts["b"]
        run_pair(out, name, b.netns, a.netns, b.data_address, duration_s, described)
    finally:
        lab.down(quiet=True)


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data/irtt")
    out.mkdir(parents=True, exist_ok=True)
    run_pair(out, "loopback", None, None, "127.0.0.1", 3.0, "loopback")
    run_pair(out, "loopback_comp", None, None, "127.0.0.1", 10.0, "loopback; irtt's default timer", timer="comp")
    asym = Topology(links={"a>b": {"one_way_delay_s": 0.030}, "b>a": {"one_way_delay_s": 0.070}})
    on_testbed(out, "asymmetric", "ir-rec-asym", LinkConfig(one_way_delay_s=0.030, rate_bps=None), asym, 5.0,
               "testbed, 30 ms a -> b, 70 ms b -> a, no rate limit; client in a, server in b")
    on_testbed(out, "loss", "ir-rec-loss", LinkConfig(one_way_delay_s=0.010, rate_bps=None, loss="10%", seed=7), None,
               8.0, "testbed, 10 ms each way, 10 % random loss each way (seed 7), no rate limit; "
               "client in a, server in b")
    return 0


if __name__ == "__main__":
    sys.exit(main())
