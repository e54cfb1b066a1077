"""This machine's static tools (:data:`labkit.hosts.layout.TOOLS`) onto a host, where and when they are needed.

A tool goes into the host's ``labkit_dir/bin`` (where :func:`labkit.hosts.layout.host_tool_candidates` looks
first) the first time something run there needs it: an experiment, for the tools its plan states
(``Plan.tools``, sent as its session opens the hosts, before anything is measured), or ``labkit deploy --tools``.
A copy already there with the same SHA-256 is not sent again, so each later run costs one command per host.
A local host runs this machine's own copies and gets nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import threading
from pathlib import Path
from typing import Callable, Iterable

from labkit.errors import LabkitError
from labkit.hosts.inventory import HostEntry
from labkit.hosts.layout import TOOLS, host_path, local_tool

# Run by the host's interpreter: its machine, and name -> SHA-256 of each named file in a directory.
_TOOLS_SCRIPT = """
import hashlib, json, os, platform, sys
d, found = sys.argv[1], {}
for name in sys.argv[2:]:
    path = os.path.join(d, name)
    if os.path.isfile(path):
        with open(path, "rb") as f:
            found[name] = hashlib.file_digest(f, "sha256").hexdigest()
print(json.dumps({"machine": platform.machine(), "files": found}))
"""

_digest_lock = threading.Lock()
_digests: dict[tuple, str] = {}  # (path, size, mtime_ns) -> SHA-256: each local tool is hashed once per process


def _sha256(path: Path) -> str:
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    with _digest_lock:
        if key not in _digests:
            with open(path, "rb") as source:
                _digests[key] = hashlib.file_digest(source, "sha256").hexdigest()
        return _digests[key]


def send_tools(host, entry: HostEntry, names: Iterable[str], step: Callable[[str], None] = lambda text: None) -> list[str]:
    """Copy each tool of ``names`` this machine has into the host's ``labkit_dir/bin`` unless the same file is there.

    What happened, as notes for a person ("labkit-go sent (22.8 MB)", "no ghz here to send", a host of another
    machine type): a tool that was not sent is not an error here; the experiment that looks for it says what to do.
    ``step`` hears what is being done, for a progress display.
    """
    names = list(dict.fromkeys(names))
    unknown = [name for name in names if name not in TOOLS]
    if unknown:
        raise LabkitError(f"{unknown[0]} is not a tool labkit sends to hosts ({', '.join(TOOLS)})")
    if entry.is_local or not names:
        return []  # a local host runs this machine's own copies
    local = {name: local_tool(name) for name in names}
    wanted = [name for name, path in local.items() if path is not None]
    notes = [f"no {name} here to send" for name, path in local.items() if path is None]
    if not wanted:
        return notes
    bin_dir = f"{host_path(entry, entry.labkit_dir)}/bin"
    step("checking tools")
    result = host.run([entry.python, "-c", _TOOLS_SCRIPT, bin_dir, *wanted], timeout=120)
    if not result.ok:
        detail = (result.stderr or result.stdout).strip().splitlines()
        raise LabkitError(f"{entry.name}: checking the tools failed: {detail[-1] if detail else f'exit {result.returncode}'}")
    there = json.loads(result.stdout)
    if there["machine"] != platform.machine():
        return notes + [f"{name} not sent (built for {platform.machine()}, host is {there['machine']})" for name in wanted]
    for name in wanted:
        if there["files"].get(name) == _sha256(local[name]):
            continue
        step(f"sending {name}")
        host.make_dir(bin_dir)
        # Written beside it and renamed, so a running copy is never half replaced; named by this process, so two runs
        # sharing a host (--share-hosts) never write into one partial file.
        partial = f"{bin_dir}/.{name}.{os.getpid()}.partial"
        host.put(local[name], partial, mode=0o755)
        host.rename(partial, f"{bin_dir}/{name}")
        notes.append(f"{name} sent ({local[name].stat().st_size / 1e6:.1f} MB)")
    return notes
