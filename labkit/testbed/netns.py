"""Network-namespace plumbing for the testbed: `ip` commands, entering a namespace, TUN devices.

Everything here shells out to iproute2 with argument lists (never a shell
string) and raises :class:`LabkitError` with the command's own stderr when a
step fails, so a user sees why `testbed up` stopped.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import shutil
import struct
import subprocess
from contextlib import contextmanager
from pathlib import Path

from labkit.errors import LabkitError, TestbedUnavailable

NETNS_DIR = Path("/var/run/netns")
CLONE_NEWNET = 0x40000000
# From <linux/if_tun.h>: _IOW('T', 202, int), and the flags for a layer-3
# device without the 4-byte packet-information header.
TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000


def run(argv: list[str], *, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
    """Run ``argv`` and return the completed process; raise LabkitError on failure when ``check``."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError as exc:
        raise LabkitError(f"{argv[0]} is not installed (needed by the testbed)") from exc
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise LabkitError(f"`{' '.join(argv)}` failed: {detail[-1] if detail else f'exit {proc.returncode}'}")
    return proc


def ip(*args: str, netns: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``ip [-n NETNS] ARGS...``."""
    prefix = ["ip", "-n", netns] if netns else ["ip"]
    return run([*prefix, *args], check=check)


def exec_argv(netns: str, argv: list[str]) -> list[str]:
    """Return an argv that runs ``argv`` inside ``netns``."""
    return ["ip", "netns", "exec", netns, *argv]


def list_netns() -> list[str]:
    """Names of all network namespaces known to iproute2."""
    proc = ip("netns", "list", check=False)
    return [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]


def netns_pids(netns: str) -> list[int]:
    """PIDs of every process whose network namespace is ``netns``."""
    proc = ip("netns", "pids", netns, check=False)
    return [int(pid) for pid in proc.stdout.split() if pid.isdigit()]


def check_can_host_testbed() -> None:
    """Raise TestbedUnavailable naming the first missing prerequisite of the testbed."""
    if os.geteuid() != 0:
        raise TestbedUnavailable("the local testbed needs root (network namespaces and TUN devices)")
    for tool in ("ip", "ssh-keygen", "ping"):
        if shutil.which(tool) is None:
            raise TestbedUnavailable(f"the testbed needs `{tool}`; run `make bootstrap` or apt-get install it")
    if find_sshd() is None:
        raise TestbedUnavailable("the testbed needs sshd; apt-get install openssh-server")
    if not os.path.exists("/dev/net/tun"):
        raise TestbedUnavailable("/dev/net/tun is missing: this kernel or container has no TUN support")
    if not os.path.exists("/proc/self/ns/net"):
        raise TestbedUnavailable("this kernel has no network namespaces")


def find_sshd() -> str | None:
    """Absolute path of sshd, which Debian keeps in /usr/sbin (not on every PATH)."""
    return shutil.which("sshd") or next(
        (p for p in ("/usr/sbin/sshd", "/usr/local/sbin/sshd") if os.access(p, os.X_OK)), None
    )


_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    # Python 3.11 has no os.setns; libc's is a thin syscall wrapper.
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


@contextmanager
def inside_netns(netns: str):
    """Run the body of the ``with`` in network namespace ``netns``, then return to the current one.

    Only the calling thread moves; sockets and devices opened inside keep
    belonging to ``netns`` after the thread returns.
    """
    original = os.open("/proc/self/ns/net", os.O_RDONLY)
    try:
        target = os.open(NETNS_DIR / netns, os.O_RDONLY)
        try:
            _setns(target)
        finally:
            os.close(target)
        try:
            yield
        finally:
            _setns(original)
    finally:
        os.close(original)


def open_tun(netns: str, ifname: str) -> int:
    """Create TUN device ``ifname`` inside ``netns`` and return its non-blocking fd.

    The device is not persistent: it disappears when the fd is closed, so a
    crashed forwarder cannot leave devices behind.
    """
    with inside_netns(netns):
        fd = os.open("/dev/net/tun", os.O_RDWR)
        try:
            fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", ifname.encode(), IFF_TUN | IFF_NO_PI))
        except OSError:
            os.close(fd)
            raise
    os.set_blocking(fd, False)
    return fd
