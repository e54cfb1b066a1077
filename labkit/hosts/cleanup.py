"""What a run that ended without cleaning up (SIGKILL, power loss) left on its hosts, stopped and put back.

`labkit runs cleanup` does it for any such run, and ``--resume`` for the run it is about to continue (a killed run's
echo server must not answer the resumed run's calls, nor a changed kernel knob be taken for the original): the
processes the run registered (each its own process group) are stopped, the kernel settings it changed and did not
restore are restored, and its locks on the hosts' knobs released.
"""

from __future__ import annotations

import json
import time
from typing import Callable

from labkit.errors import LabkitError


def controller_alive(manifest: dict) -> bool:
    """Whether the process that measures a run (its controller) still runs, on this machine."""
    import socket

    from labkit.echo.cputime import start_ticks_of

    controller = manifest.get("controller") or {}
    if controller.get("host") != socket.gethostname() or not controller.get("pid"):
        return False
    started = start_ticks_of(controller["pid"])
    if started is None:
        return False
    # A run recorded before start times were: any process with the pid counts (the old, cautious answer).
    return controller.get("start_ticks") in (None, started)


def unrestored(run) -> dict:
    """The kernel settings a run changed and did not put back: all of them for a run that never ended (killed), those
    its end could not restore (a host that had gone away) for one that failed or was interrupted."""
    originals = run.manifest.get("kernel_originals", {})
    if run.status == "running":
        return {key: value for key, value in originals.items() if value.get("restored") is not True}
    return {key: value for key, value in originals.items() if value.get("restored") is False}


def _release_knob_lock(host, path: str, run_id: str) -> bool:
    """Remove a run's lock on a host's kernel knobs (labkit.hosts.kernel.KnobLock) if the run still holds it."""
    try:
        owner = json.loads(host.read_bytes(f"{path}/owner.json"))
    except (LabkitError, ValueError):
        return True  # gone already
    if owner.get("run_id") != run_id:
        return True  # another run's now
    host.remove(path)
    return True


def needs_cleanup(run) -> bool:
    return (run.status == "running" or bool(run.processes()) or bool(unrestored(run))
            or bool(run.manifest.get("knob_locks")) or bool(run.manifest.get("host_claims")))


def _stop_processes(run, host, say: Callable[[str], None]) -> None:
    from labkit.hosts.facts import not_the_process

    for entry in run.processes():
        target = host(entry["host"])
        what = f"process group {entry['pid']} on {entry['host']} ({' '.join(entry['argv'][-6:])})"
        if reason := not_the_process(target, entry):
            run.unregister_process(entry["host"], entry["pid"])
            say(f"{run.run_id}: left {what} alone: {reason}")
            continue
        # The recorded pid leads its own process group (a session started for it).
        target.run(["kill", "-TERM", "--", f"-{entry['pid']}"])
        time.sleep(1)  # the grace period a clean stop would have given it
        target.run(["kill", "-KILL", "--", f"-{entry['pid']}"])
        run.unregister_process(entry["host"], entry["pid"])
        say(f"{run.run_id}: stopped {what}")


def cleanup_run(run, accept_new_host_keys: bool = False, say: Callable[[str], None] = print) -> None:
    """Stop what ``run`` left running on its hosts, restore the kernel settings it changed and release its knob locks;
    ``say`` is told each step in one line. Refused (LabkitError) while the run's controller still measures it."""
    from labkit.hosts.claims import release_claim
    from labkit.hosts.inventory import load_inventory, open_host
    from labkit.hosts.kernel import restore_from_manifest

    if controller_alive(run.manifest):
        raise LabkitError(f"{run.run_id} is still being measured by pid {run.manifest['controller']['pid']}; "
                          "stop that first")
    inventory = load_inventory(run.manifest["config"]["inventory"])
    hosts: dict = {}

    def host(name):
        if name not in hosts:
            hosts[name] = open_host(inventory, name, accept_new_host_keys=accept_new_host_keys)
        return hosts[name]

    try:
        _stop_processes(run, host, say)
        for key, originals in unrestored(run).items():
            problems = restore_from_manifest(host(originals["host"]), originals)
            originals["restored"] = not problems
            run.save_manifest()
            say(f"{run.run_id}: restored kernel settings on {key}" + (f" ({'; '.join(problems)})" if problems else ""))
        for name, path in list(run.manifest.get("host_claims", {}).items()):
            release_claim(host(name), path)
            run.manifest["host_claims"].pop(name)
            run.save_manifest()
        for name, path in list(run.manifest.get("knob_locks", {}).items()):
            if not unrestored(run) and _release_knob_lock(host(name), path, run.run_id):
                run.manifest["knob_locks"].pop(name)
                run.save_manifest()
    finally:
        for opened in hosts.values():
            getattr(opened, "close", lambda: None)()
