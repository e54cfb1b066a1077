"""What every run records so it can be trusted and repeated: versions, git state, UTC times."""

from __future__ import annotations

import platform
import socket
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from labkit.version import __version__

REPO_ROOT = Path(__file__).resolve().parent.parent


def utc_now() -> str:
    """The current UTC time as ISO 8601 with microseconds and a Z suffix."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def utc_stamp() -> str:
    """A UTC timestamp safe for directory names, e.g. 20261122T093015Z."""
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def git_state(repo: Path = REPO_ROOT) -> dict:
    """Commit and dirty flag of the labkit checkout, or nulls when not run from git."""

    def git(*args: str) -> str | None:
        try:
            proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return proc.stdout.strip() if proc.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None}
    return {"commit": commit, "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}


def labkit_provenance() -> dict:
    """Versions of labkit, Python and the libraries that shape a measurement."""
    from importlib.metadata import PackageNotFoundError, version

    libraries = {}
    for package in ("grpcio", "protobuf", "paramiko", "pandas", "pyarrow"):
        try:
            libraries[package] = version(package)
        except PackageNotFoundError:
            libraries[package] = None
    return {
        "labkit_version": __version__,
        "git": git_state(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "libraries": libraries,
    }


def this_machine() -> dict:
    """Which machine this is: its systemd machine id (/etc/machine-id, stable across reboots and distinct between
    installs) and host name. A run records the machine that made it, so `labkit runs cleanup` can tell a run
    directory copied from elsewhere, whose hosts and kernel values are not this machine's to act on."""
    try:
        machine_id = Path("/etc/machine-id").read_text().strip() or None
    except OSError:
        machine_id = None
    return {"machine_id": machine_id, "hostname": socket.gethostname()}
