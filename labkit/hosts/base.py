"""The interface every host implements, local or over SSH (after httpx's ``_transports/base.py``).

Experiments, probes and deploy hand a host argv lists and paths; they never
build shell commands. :class:`labkit.hosts.local.LocalHost` does this with
subprocess and the local filesystem (optionally inside a network namespace),
:class:`labkit.hosts.ssh.SSHHost` with paramiko exec channels and SFTP.

Paths may start with ``~/`` (the login directory of the host's user). Commands
that change the kernel go through :meth:`Host.run_privileged`, which adds
``sudo -n --`` on hosts whose inventory entry says ``become = "sudo"``
(:mod:`labkit.hosts.privilege`).
"""

from __future__ import annotations

import os
from typing import Protocol, runtime_checkable

from labkit.hosts.local import BackgroundProcess, Result


@runtime_checkable
class Host(Protocol):
    """A machine labkit can use."""

    name: str
    become: str | None  # "sudo": commands that need root go through `sudo -n --` (labkit.hosts.privilege)

    # -- commands ------------------------------------------------------------------------
    def run(self, argv: list[str], *, timeout: float = 60, check: bool = False) -> Result:
        """Run ``argv`` to completion; ``check`` raises LabkitError (one line) when it fails."""

    def start(self, argv: list[str]) -> BackgroundProcess:
        """Start ``argv`` in the background in its own process group; stop it with its ``stop()``."""

    def run_privileged(self, argv: list[str], *, timeout: float = 60, check: bool = False) -> Result:
        """Run ``argv`` as root (through ``sudo -n`` when ``become`` says so); PrivilegeRefused if sudo refuses."""

    def logs_in_as_root(self) -> bool: ...

    def read_sysctl(self, key: str) -> str:
        """Never through sudo: reading state needs no privilege."""

    def write_sysctl(self, key: str, value: str) -> None:
        """Through :meth:`run_privileged`."""

    # -- files ---------------------------------------------------------------------------
    def put(self, local: str | os.PathLike, remote: str, *, mode: int | None = None) -> None:
        """Copy a local file to the host (``mode``: its permission bits, set before any byte is written)."""

    def get(self, remote: str, local: str | os.PathLike) -> None:
        """Copy a file from the host."""

    def read_bytes(self, path: str) -> bytes:
        """A file's content (also /proc files, which report size 0); LabkitError if it cannot be read."""

    def exists(self, path: str) -> bool: ...

    def make_dir(self, path: str, *, private: bool = False) -> None:
        """``mkdir -p``; ``private`` makes the last directory mode 0700, also when it already existed."""

    def make_temp_dir(self, prefix: str) -> str:
        """A new private (0700) directory under the host's temporary directory; its path."""

    def chmod(self, path: str, mode: int) -> None: ...

    def rename(self, source: str, target: str) -> None:
        """Move ``source`` over ``target`` (replacing it)."""

    def remove(self, path: str) -> None:
        """Remove a file or a whole directory tree; nothing happens if it does not exist."""

    def close(self) -> None: ...
