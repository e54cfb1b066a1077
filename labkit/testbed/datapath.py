"""The testbed's data path: the link emulator process (``labkit-go link``), its config, its life.

This kernel has no netem (/work/shared/testbed-notes.md), so every packet between the
testbed's hosts crosses user space: ``labkit-go link`` (go/internal/linkpath) owns a TUN
device ``lkdata`` in each host's namespace, reads what a host sends, hands it to the link
model of its direction (go/internal/link: delay, jitter, loss, duplication, reordering, rate
and queue, traces, the schedule) and writes it into the destination's device when it is due.

It reads ``STATE/link.json``, written here from the testbed's state: the hosts, and for each
direction its parameters and its timeline (the schedule, expanded). ``SIGHUP`` makes it
re-read the file; it answers in ``link-status.json`` with the config generation in effect.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import time
from pathlib import Path

from labkit.errors import LabkitError, TestbedUnavailable
from labkit.hosts.layout import local_tool
from labkit.testbed import emulator, schedule
from labkit.testbed.linkspec import LinkSpec, emulator_params
from labkit.testbed.topology import direction_key

DATA_IFNAME = "lkdata"
CONFIG_FILE = "link.json"
LOG_FILE = "link.log"
#: Busy-wait this long before a due time (within a budget of 5 % of a CPU per direction):
#: a sleeping thread wakes 30-125 µs late (p5-p95) on this kind of machine, whose guest
#: kernel does not poll before halting an idle CPU (haltpoll.guest_halt_poll_ns=0). 50 µs
#: left the idle lateness p99 at 68-100 µs; 200 µs gives 25-34 µs, for some 2 % of a CPU
#: at 50 packets a second each way.
SPIN_NS = 200_000
READY_TIMEOUT_S = 10.0


def emulator_argv(state) -> list[str]:
    binary = local_tool("labkit-go")
    if binary is None:
        raise TestbedUnavailable("the testbed's link emulator is labkit-go, which is not built here: run `make bootstrap`")
    return [str(binary), "link", "--config", str(state.dir / CONFIG_FILE)]


def direction_specs(state) -> dict[str, LinkSpec]:
    """Each direction's LinkSpec: the command line's values under the topology's tables."""
    return {direction_key(src, dst): state.topology.spec(state.link, src, dst) for src, dst in state.topology.directions()}


def _timeline(state, src: str, dst: str, spec: LinkSpec, reverse: LinkSpec) -> list[dict]:
    changes = schedule.from_records(state.schedule)
    return [
        {"at_ns": round(t * 1e9), "label": label,
         "params": emulator_params(dataclasses.replace(spec, **fields), reverse, state.link.mtu)}
        for t, label, fields in schedule.expand(changes, src, dst)
    ]


def build_config(state, generation: int) -> dict:
    """The emulator's config for ``state``; every link value is checked on the way (LabkitError)."""
    specs = direction_specs(state)
    directions = []
    for src, dst in state.topology.directions():
        spec, reverse = specs[direction_key(src, dst)], specs[direction_key(dst, src)]
        directions.append({"from": src, "to": dst, "params": emulator_params(spec, reverse, state.link.mtu),
                           "timeline": _timeline(state, src, dst, spec, reverse)})
    return {
        "generation": generation, "seed": state.link.seed, "offload": True, "spin_ns": SPIN_NS, "realtime": True,
        "stats_path": str(state.dir / emulator.STATS_FILE), "status_path": str(state.dir / emulator.STATUS_FILE),
        "schedule_origin_utc_ns": state.schedule_origin_utc_ns,
        "hosts": [{"name": h.name, "netns": f"/var/run/netns/{h.netns}", "ifname": DATA_IFNAME,
                   "address": h.data_address} for h in state.hosts.values()],
        "directions": directions,
    }


def write_config(state, config: dict) -> None:
    tmp = state.dir / f"{CONFIG_FILE}.tmp"
    tmp.write_text(json.dumps(config))
    os.replace(tmp, state.dir / CONFIG_FILE)


def start(state) -> int:
    """Start the emulator for ``state`` (config written); return its pid once its devices exist."""
    log_path = state.dir / LOG_FILE
    # asyncpreemptoff: the data path's threads block in raw system calls, holding their Ps, so the runtime's monitor
    # took them for goroutines running too long and signalled each every 10 ms (SIGURG), interrupting its wait:
    # an idle emulator spent 2.4 % of a CPU on that, 1.0 % without, with testbeds side by side in the test suite. The
    # collector, the one thing that needs them stopped, is off (cmd/labkit-go/link.go).
    godebug = ",".join(filter(None, (os.environ.get("GODEBUG"), "asyncpreemptoff=1")))
    with open(log_path, "ab") as log_file:
        proc = subprocess.Popen(emulator_argv(state), stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file,
                                start_new_session=True, env={**os.environ, "GODEBUG": godebug})
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if '"ready"' in log_path.read_text(errors="replace"):
            return proc.pid
        if proc.poll() is not None:
            tail = log_path.read_text(errors="replace").strip().splitlines()[-1:]
            raise LabkitError(f"the link emulator exited at start: {tail[0] if tail else 'no output'}")
        time.sleep(0.02)
    raise LabkitError(f"the link emulator did not become ready within {READY_TIMEOUT_S:.0f} s")


def reload(state, generation: int, timeout_s: float = 5.0) -> None:
    """Make the running emulator take the written config; wait until its status says it did."""
    os.kill(state.forwarder_pid, signal.SIGHUP)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = emulator.read_status(state.dir) or {}
        if status.get("generation") == generation:
            return
        if status.get("reload_error"):
            raise LabkitError(f"the link emulator refused the change: {status['reload_error']}")
        time.sleep(0.02)
    raise LabkitError(f"the link emulator did not take the change within {timeout_s:.0f} s")


def emulator_pids(state_dir: Path) -> list[int]:
    """Emulator processes of a testbed, found by their command line (survives a lost state.json)."""
    config = str(Path(state_dir) / CONFIG_FILE)
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                args = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            except OSError:
                continue
            if "link" in args and config in args:
                pids.append(int(entry.name))
    return pids
