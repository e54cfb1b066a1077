"""Machines labkit can use: run an argv, start a long-running argv, stop it, read facts.

A probe never knows how a host is reached; it hands the host an argv.
:class:`LocalHost` is this machine (optionally inside a network namespace),
:class:`SSHHost` a remote one; an inventory file names them
(:func:`load_inventory`, :func:`open_host`).
"""

from labkit.hosts.inventory import HostEntry, Inventory, load_inventory, open_host, peer_address
from labkit.hosts.local import BackgroundProcess, LocalHost, Process, Result

__all__ = [
    "BackgroundProcess",
    "HostEntry",
    "Inventory",
    "LocalHost",
    "Process",
    "Result",
    "SSHHost",
    "SSHProcess",
    "load_inventory",
    "open_host",
    "peer_address",
]


def __getattr__(name):
    # paramiko is imported only by code that uses SSH, so `labkit --version` stays fast.
    if name in ("SSHHost", "SSHProcess"):
        from labkit.hosts import ssh

        return getattr(ssh, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
