#!/usr/bin/env python
"""Record what labkit-go link exports, for tests/test_testbed_links.py (run as root from the repository root).

    .venv/bin/python tests/data/tools/record_emulator.py [OUTDIR]   (default tests/data/emulator)

Three testbeds of its own (named rec-emu-*), each taken down again; for each, OUTDIR/NAME holds the
emulator's config (link.json), its per-second export (link-stats.jsonl), its last status
(link-status.json) and window.json (the UTC window of the traffic, and the command that made it):

- ping:      1 ms one way, no rate; ping -i 0.01 -c 300 a -> b;
- saturated: 1 ms one way, no rate; one iperf3 stream a -> b for 3 s (the emulator's writer at its limit);
- partition: 2 ms one way; a 1 s partition of a-b at 1 s (the schedule); ping -i 0.01 -c 300.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from labkit.testbed import emulator
from labkit.testbed.lab import LinkConfig, Testbed
from labkit.testbed.schedule import parse_inline


def record(out: Path, name: str, link: LinkConfig, argv_of, schedule=None) -> None:
    lab = Testbed(f"rec-emu-{name}"[:16], log=lambda message: None)
    state = lab.up(link, schedule=schedule)
    try:
        a, b = state.hosts["a"], state.hosts["b"]
        server = None
        if name == "saturated":
            server = subprocess.Popen(["ip", "netns", "exec", b.netns, "iperf3", "-s", "-1", "-B", b.data_address],
                                      stdout=subprocess.DEVNULL)
            time.sleep(0.3)
        argv = ["ip", "netns", "exec", a.netns, *argv_of(b.data_address)]
        start = time.time_ns()
        subprocess.run(argv, check=True, capture_output=True, env={"LC_ALL": "C", "PATH": "/usr/bin:/bin:/usr/sbin"})
        end = time.time_ns()
        if server:
            server.wait(10)
        emulator.status_after(state.dir, end + 1_000_000_000)
        target = out / name
        target.mkdir(parents=True, exist_ok=True)
        for file in ("link.json", emulator.STATS_FILE, emulator.STATUS_FILE):
            shutil.copy(state.dir / file, target / file)
        (target / "window.json").write_text(json.dumps(
            {"start_utc_ns": start, "end_utc_ns": end, "argv": argv, "link": link.describe(),
             "schedule_origin_utc_ns": state.schedule_origin_utc_ns}, indent=1) + "\n")
    finally:
        lab.down(quiet=True)


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data/emulator")
    ping = lambda address: ["ping", "-n", "-c", "300", "-i", "0.01", address]  # noqa: E731
    record(out, "ping", LinkConfig(one_way_delay_s=0.001, rate_bps=None), ping)
    record(out, "saturated", LinkConfig(one_way_delay_s=0.001, rate_bps=None),
           lambda address: ["iperf3", "-c", address, "-t", "3"])
    record(out, "partition", LinkConfig(one_way_delay_s=0.002, rate_bps=None), ping,
           schedule=[parse_inline("at=1s,for=1s,partition,label=cut")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
