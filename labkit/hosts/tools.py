"""This machine's static tools (:data:`labkit.hosts.layout.TOOLS`) onto a host, where and when they are needed.

A tool goes into the host's ``labkit_dir/bin`` (where :func:`labkit.hosts.layout.host_tool_candidates` looks
first) the first time something run there needs it: an experiment, for the tools its plan states
(``Plan.tools``, sent as its session opens the hosts, before anything is measured), or ``labkit deploy --tools``.
A copy already there with the same SHA-256 is not sent again, so each later run costs one command per host.
A local host runs this machine's own copies and gets nothing.

Each host gets the builds for its own machine (what ``uname -m`` says there): x86_64 the amd64 builds, aarch64 the
arm64 ones. This machine's own builds are where :func:`labkit.hosts.layout.local_tool` finds them (the venv's
``bin/``); those of the other architecture beside them, in ``bin/linux_ARCH/`` (``.venv/bin/linux_arm64/ghz``: the
directory ``go install`` itself uses for a cross-compiled tool), which scripts/bootstrap.sh builds with
``CGO_ENABLED=0 GOARCH=...``. A host of any other machine is refused in one line.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
from pathlib import Path
from typing import Callable, Iterable

from labkit.errors import LabkitError
from labkit.hosts.inventory import HostEntry
from labkit.hosts.layout import TOOLS, host_path, local_tool

# Run by the host's interpreter: its machine (uname -m's word), and name -> SHA-256 of each named file in a
# directory. Python 3.9's hashlib has no file_digest: the file is read in blocks.
_TOOLS_SCRIPT = """
import hashlib, json, os, sys
d, found = sys.argv[1], {}
for name in sys.argv[2:]:
    path = os.path.join(d, name)
    if os.path.isfile(path):
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        found[name] = digest.hexdigest()
print(json.dumps({"machine": os.uname().machine, "files": found}))
"""

#: ``uname -m`` -> the Go architecture labkit builds its tools for.
GOARCH = {"x86_64": "amd64", "aarch64": "arm64"}
#: The ELF header's e_machine of each: what a build for it says it is.
ELF_MACHINE = {"amd64": 62, "arm64": 183}


def goarch(machine: str, host: str = "this machine") -> str:
    """The Go architecture of a ``uname -m`` word; a one-line refusal for a machine labkit builds no tools for."""
    try:
        return GOARCH[machine]
    except KeyError:
        raise LabkitError(f"{host} is {machine}: labkit's tools are built for x86_64 (amd64) and aarch64 (arm64) "
                          "only") from None


def elf_arch(path: Path) -> str | None:
    """The Go architecture an ELF executable was built for (its header's e_machine), None for anything else."""
    with open(path, "rb") as handle:
        header = handle.read(20)
    if len(header) < 20 or header[:4] != b"\x7fELF":
        return None
    machine = int.from_bytes(header[18:20], "little" if header[5] == 1 else "big")
    return next((arch for arch, number in ELF_MACHINE.items() if number == machine), None)


def local_tool_for(name: str, arch: str) -> Path | None:
    """This machine's build of ``name`` for Go architecture ``arch``: its own copy (:func:`local_tool`) when that is
    this machine's architecture, else the cross-compiled one in ``linux_ARCH/`` beside where that copy would be."""
    own = local_tool(name)
    if arch == goarch(os.uname().machine):
        return own

    subdir = f"linux_{arch}"
    candidates = [Path(sys.executable).parent / subdir / name, Path(sys.prefix).parent / "bin" / subdir / name,
                  Path.home() / "go" / "bin" / subdir / name]
    if own is not None:
        candidates.insert(0, own.parent / subdir / name)
    for candidate in candidates:
        if os.access(candidate, os.X_OK) and candidate.is_file() and elf_arch(candidate) == arch:
            return candidate
    return None

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
    bin_dir = f"{host_path(entry, entry.labkit_dir)}/bin"
    step("checking tools")
    # Every tool is asked after: which exist here is known only once the host's architecture is.
    result = host.run([entry.python, "-c", _TOOLS_SCRIPT, bin_dir, *names], timeout=120)
    if not result.ok:
        detail = (result.stderr or result.stdout).strip().splitlines()
        raise LabkitError(f"{entry.name}: checking the tools failed: {detail[-1] if detail else f'exit {result.returncode}'}")
    there = json.loads(result.stdout)
    arch = goarch(there["machine"], f"host {entry.name}")
    local = {name: local_tool_for(name, arch) for name in names}
    wanted = [name for name, path in local.items() if path is not None]
    notes = [f"no {name} here to send" + ("" if arch == goarch(os.uname().machine) else
                                          f" for {there['machine']} (scripts/bootstrap.sh builds it into "
                                          f".venv/bin/linux_{arch})")
             for name, path in local.items() if path is None]
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
        notes.append(f"{name} sent ({local[name].stat().st_size / 1e6:.1f} MB" +
                     ("" if arch == goarch(os.uname().machine) else f", {arch}") + ")")
    return notes
