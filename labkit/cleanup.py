"""`labkit runs cleanup`: finish what a killed run left on its hosts, and nothing a run directory merely asks for.

A run killed by SIGKILL (or power loss) leaves processes on its hosts, kernel settings changed, its hosts' knob
locks held and, with ``--capture``, tcpdump's files in a directory on each host. Its manifest and
``processes.json`` say what, and :func:`cleanup_run` puts it right.

A run directory is only a directory: one copied into the runs directory, or edited, would have cleanup run its
values through sudo on its hosts. So before anything is changed, :func:`check_run` refuses
(:class:`labkit.hosts.kernel.ManifestRefused`, one line naming the run and the field) whatever labkit itself would
not have recorded: a run made on another machine (unless ``force``), a host not in the run's inventory, a kernel
value outside its knob's domain, a route not of the form the testbed and the sweep write, a process whose command
line is not of a kind labkit starts, a lock or capture directory not named as labkit names them. Then, host by host,
:func:`check_on_hosts` checks what only the host can tell (a route's device, its congestion control).
"""

from __future__ import annotations

import json
import re
import time
from typing import Callable

from labkit.errors import LabkitError
from labkit.experiments.capture import check_leftover, collect_leftovers
from labkit.hosts.claims import CLAIM_PATH, controller_alive, release_claim
from labkit.hosts.facts import looks_like_labkits, not_the_process
from labkit.hosts.inventory import load_inventory, open_host
from labkit.hosts.kernel import (ManifestRefused, check_originals, check_route_on_host, conditions_from_manifest,
                                 restore_from_manifest)
from labkit.testbed.lab import LinksChanged, Testbed

#: A knob lock's directory as labkit.hosts.kernel.KnobLock names it: its prefix and the network namespace's inode.
_KNOB_LOCK = re.compile(r"^/tmp/labkit-knobs-[0-9]{1,20}$")
#: `labkit load`'s work directory on its client host, as Host.make_temp_dir("labkit-load.") names it (in /tmp, or a
#: local host's $TMPDIR): its tools' request bodies and outputs.
_LOAD_WORKDIR = re.compile(r"^(/[A-Za-z0-9_.-]+)*/labkit-load\.[A-Za-z0-9_]{1,32}$")


def unrestored(run) -> dict:
    """The kernel settings a run changed and did not put back: all of them for a run that never ended (killed), those
    its end could not restore (a host that had gone away) for one that failed or was interrupted."""
    originals = run.manifest.get("kernel_originals") or {}
    if not isinstance(originals, dict):
        return {"": originals}  # not what labkit writes: check_run refuses it
    if run.status == "running":
        return {key: value for key, value in originals.items() if not isinstance(value, dict)
                or value.get("restored") is not True}
    return {key: value for key, value in originals.items() if isinstance(value, dict) and value.get("restored") is False}


def unrestored_links(run) -> dict | None:
    """The testbed links a run changed and did not put back (``testbed_links``: the testbed, its per-link overrides
    before the run and each the run set): any a killed run changed, or those a run's end could not restore."""
    links = run.manifest.get("testbed_links")
    if links is None:
        return None
    if not isinstance(links, dict):
        return {"": links}  # not what labkit writes: check_run refuses it
    restored = links.get("restored")
    return links if restored is False or (run.status == "running" and restored is not True) else None


def needs_cleanup(run) -> bool:
    return (run.status == "running" or bool(run.processes()) or bool(unrestored(run)) or bool(unrestored_links(run))
            or bool(run.manifest.get("knob_locks")) or bool(run.manifest.get("capture_dirs"))
            or bool(run.manifest.get("host_claims")))


def run_peers(inventory) -> dict[str, str | None]:
    """Each host of the inventory -> the address its peers use, as a run's session asks for it (None where the
    inventory cannot say)."""
    peers: dict[str, str | None] = {}
    for name in inventory.hosts:
        try:
            peers[name] = inventory.peer_address(name)
        except LabkitError:
            peers[name] = None
    return peers


def check_run(run, inventory, force: bool = False) -> None:
    """Refuse (ManifestRefused) a run whose cleanup would act on what labkit did not record; nothing on a host is
    read or changed here."""
    if not force and not run.made_here():
        made = run.manifest.get("machine") or {}
        raise ManifestRefused("machine", f"the run was made on {made.get('hostname') or 'a machine it does not name'}"
                                         f" (machine id {made.get('machine_id')}), not on this one; clean it up where "
                                         "it was made, or give --force if its hosts are yours to change from here")
    hosts = inventory.hosts
    for field, kind in (("kernel_originals", dict), ("knob_locks", dict), ("host_claims", dict), ("capture_dirs", list)):
        if not isinstance(run.manifest.get(field) or kind(), kind):
            raise ManifestRefused(field, f"is not {'an object' if kind is dict else 'a list'}")
    if not isinstance(run.processes(), list):
        raise ManifestRefused("processes.json", "is not a list")
    for key, originals in unrestored(run).items():
        check_originals(key, originals, run_peers(inventory))
    for index, entry in enumerate(run.processes()):
        field = f"processes.json[{index}]"
        if not isinstance(entry, dict) or entry.get("host") not in hosts:
            raise ManifestRefused(f"{field}.host", "is not a host of the run's inventory")
        if not isinstance(entry.get("pid"), int) or isinstance(entry["pid"], bool) or entry["pid"] <= 1:
            raise ManifestRefused(f"{field}.pid", f"{str(entry.get('pid'))[:20]!r} is not a process id")
        if not looks_like_labkits(entry.get("argv")):
            raise ManifestRefused(f"{field}.argv", f"{str(entry.get('argv'))[:60]} is not a command labkit starts")
    for name, path in (run.manifest.get("knob_locks") or {}).items():
        if name not in hosts or not isinstance(path, str) or not _KNOB_LOCK.match(path):
            raise ManifestRefused(f"knob_locks[{name[:40]!r}]", f"{str(path)[:60]!r} on {name[:40]} is not a lock "
                                                                "labkit takes")
    for name, path in (run.manifest.get("host_claims") or {}).items():
        if name not in hosts or not isinstance(path, str) or not CLAIM_PATH.match(path) \
                or not path.endswith(f"/{run.run_id}.json"):
            raise ManifestRefused(f"host_claims[{name[:40]!r}]", f"{str(path)[:60]!r} on {name[:40]} is not this run's "
                                                                 "claim as labkit writes it")
    for index, entry in enumerate(run.manifest.get("capture_dirs") or []):
        check_leftover(entry, index, hosts)
    if (links := unrestored_links(run)) is not None:
        _check_links(links, inventory)
    if (workdir := _left_workdir(run)) is not None:
        client = (run.manifest.get("config") or {}).get("client")
        if client not in hosts:
            raise ManifestRefused("config.client", f"{str(client)[:40]!r} is not a host of the run's inventory")
        if not isinstance(workdir, str) or not _LOAD_WORKDIR.match(workdir) or "/../" in f"{workdir}/":
            raise ManifestRefused("client_workdir", f"{str(workdir)[:60]!r} is not a directory labkit load works in")


def _check_links(links: dict, inventory) -> None:
    """Refuse ``testbed_links`` a run would not have recorded: another testbed than the run's inventory names, or
    overrides that are not per-link tables of its hosts' links (the emulator checks each value as it reloads)."""
    testbed = (getattr(inventory, "testbed", None) or {}).get("name")
    if not testbed or links.get("testbed") != testbed:
        raise ManifestRefused("testbed_links.testbed", f"{str(links.get('testbed'))[:40]!r} is not the testbed of the "
                                                       "run's inventory")
    keys = {f"{a}{sep}{b}" for a in inventory.hosts for b in inventory.hosts if a != b for sep in (">", "-")}
    written = links.get("written")
    if not isinstance(written, list) or not 0 < len(written) <= 64:
        raise ManifestRefused("testbed_links.written", "is not the settings of a run's cells")
    for field, overrides in (("before", links.get("before")), *((f"written[{i}]", w) for i, w in enumerate(written))):
        if not isinstance(overrides, dict) or not all(key in keys and isinstance(value, dict)
                                                      for key, value in overrides.items()):
            raise ManifestRefused(f"testbed_links.{field}", "is not per-link overrides of the run's hosts")


def _left_workdir(run):
    """The work directory a killed `labkit load` left on its client host (a run that ended removed its own), or None."""
    return run.manifest.get("client_workdir") if run.status == "running" else None


def check_on_hosts(run, host_of: Callable) -> None:
    """What only the hosts can tell (ManifestRefused): a recorded route's device and congestion control, and that
    each knob the run wrote is now either as it was before the run or as the run set it (anything else is someone
    else's change, which cleanup leaves alone)."""
    if (links := unrestored_links(run)) is not None:
        try:
            Testbed(links["testbed"]).restore_links(links["before"], own=links["written"], check_only=True)
        except LinksChanged as exc:
            raise ManifestRefused("testbed_links", exc.message) from None
    for key, originals in unrestored(run).items():
        host = host_of(originals["host"])
        check_route_on_host(host, originals, f"kernel_originals[{key!r}].route_to_peer")
        try:
            conditions_from_manifest(host, originals).restore_steps()
        except ManifestRefused as exc:
            raise ManifestRefused(f"kernel_originals[{key!r}].{exc.field}", exc.reason) from None


def cleanup_run(run, host_of: Callable, say: Callable[[str], None]) -> None:
    """Stop the run's processes, keep its captures, restore its kernel settings, release its locks, mark it
    interrupted; ``run`` passed :func:`check_run` and :func:`check_on_hosts`."""
    _stop_processes(run, host_of, say)
    collect_leftovers(run, host_of, say)  # after its tcpdump stopped: the file is closed
    if (workdir := _left_workdir(run)) is not None:  # after the tools that wrote into it stopped
        client = run.manifest["config"]["client"]
        host_of(client).remove(workdir)
        say(f"{run.run_id}: removed {client}:{workdir}")
    _restore_kernel(run, host_of, say)
    if (links := unrestored_links(run)) is not None:
        testbed = Testbed(links["testbed"], log=lambda message: None)
        testbed.restore_links(links["before"], own=links["written"])
        links["restored"] = True
        run.save_manifest()
        say(f"{run.run_id}: " + (f"restored testbed {links['testbed']}'s links" if testbed.load_state() is not None
                                 else f"testbed {links['testbed']} is down: its links need no restoring"))
    for name, path in list((run.manifest.get("host_claims") or {}).items()):
        release_claim(host_of(name), path)
        run.manifest["host_claims"].pop(name)
        run.save_manifest()
    for name, path in list((run.manifest.get("knob_locks") or {}).items()):
        if not unrestored(run) and _release_knob_lock(host_of(name), path, run.run_id):
            run.manifest["knob_locks"].pop(name)
            run.save_manifest()


def _stop_processes(run, host_of: Callable, say: Callable[[str], None]) -> None:
    for entry in run.processes():
        target = host_of(entry["host"])
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


def _restore_kernel(run, host_of: Callable, say: Callable[[str], None]) -> None:
    for key, originals in unrestored(run).items():
        problems = restore_from_manifest(host_of(originals["host"]), originals)
        originals["restored"] = not problems
        run.save_manifest()
        say(f"{run.run_id}: restored kernel settings on {key}" + (f" ({'; '.join(problems)})" if problems else ""))


def _release_knob_lock(host, path: str, run_id: str) -> bool:
    """Remove a run's lock on a host's kernel knobs (labkit.hosts.kernel.KnobLock) if the run still holds it."""
    try:
        owner = json.loads(host.read_bytes(f"{path}/owner.json"))
    except (LabkitError, ValueError):
        return True  # gone already
    if not isinstance(owner, dict) or owner.get("run_id") != run_id:
        return True  # another run's now
    host.remove(path)
    return True


def clean_up(run, accept_new_host_keys: bool = False, force: bool = False, say: Callable[[str], None] = print) -> None:
    """All of a run's cleanup, for `labkit runs cleanup` and for ``--resume`` before it continues the run: refused
    (LabkitError) while its controller still measures it, refused (ManifestRefused) by :func:`check_run` and
    :func:`check_on_hosts` with nothing changed, else :func:`cleanup_run`; each host opened once, when first needed."""
    if controller_alive(run.manifest):
        raise LabkitError(f"{run.run_id} is still being measured by pid {run.manifest['controller']['pid']}; "
                          "stop that first")
    inventory = load_inventory((run.manifest.get("config") or {}).get("inventory") or "")
    hosts: dict = {}

    def host(name):
        if name not in hosts:
            hosts[name] = open_host(inventory, name, accept_new_host_keys=accept_new_host_keys)
        return hosts[name]

    try:
        check_run(run, inventory, force)
        check_on_hosts(run, host)
        cleanup_run(run, host, say)
    finally:
        for opened in hosts.values():
            getattr(opened, "close", lambda: None)()
