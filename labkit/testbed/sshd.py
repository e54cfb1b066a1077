"""One sshd per testbed namespace, so labkit reaches testbed hosts over SSH like any remote VM.

Each sshd gets its own generated host key, accepts only the testbed's generated
client key, and runs in a private mount namespace with a tmpfs on /run: Debian's
sshd insists on its privilege-separation directory /run/sshd, and creating it
privately leaves the host's /run untouched.

A host with a root of its own (:class:`HostRoot`, a Debian minbase root from
:mod:`labkit.testbed.rootfs`) runs that root's sshd chrooted into it: in the same
private mount namespace, the host's tree is mounted (an overlay over the cached
root, or a copy of it), then /proc, /sys, /dev (with its /dev/pts), a private /run
and /dev/shm, and the host's key directory; every SSH session is the chrooted sshd's
child, so everything started over SSH runs in the root. Those mounts belong to the
namespace alone: they go when its last process ends (`testbed down` ends them all),
and the machine's mount table never holds them, even after a kill.
"""

from __future__ import annotations

import shlex
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from labkit.errors import LabkitError
from labkit.testbed.netns import exec_argv, find_sshd, run

SSH_PORT = 22


def generate_key(path: Path, comment: str) -> None:
    """Create an ed25519 key pair at ``path`` (and ``path.pub``) unless it exists."""
    if path.exists():
        return
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)])


def public_key(path: Path) -> str:
    """The ``type base64`` part of an OpenSSH public key file (without its comment)."""
    key_type, blob, *_ = Path(f"{path}.pub").read_text().split()
    return f"{key_type} {blob}"


def write_sshd_config(path: Path, *, host_key: Path, authorized_keys: Path, listen: list[str],
                      login_user: str | None = None) -> None:
    """Key-only login for the testbed's client key: as root, or with ``login_user`` as that user only.

    sshd reads authorized keys with the user's own rights, so a login user's key
    sits in its home (see :mod:`labkit.testbed.login`), not in the root-only state directory.
    """
    if login_user:
        who = ["AuthorizedKeysFile .ssh/authorized_keys", "PermitRootLogin no", f"AllowUsers {login_user}"]
    else:
        who = [f"AuthorizedKeysFile {authorized_keys}", "PermitRootLogin prohibit-password"]
    lines = [
        f"# Written by labkit testbed up; key-only login as {login_user or 'root'} for the testbed's client key.",
        f"Port {SSH_PORT}",
        *(f"ListenAddress {address}" for address in listen),
        f"HostKey {host_key}",
        *who,
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        # The key files live in the testbed's own 0700 state directory, which may sit
        # under a world-writable parent such as /tmp; StrictModes would refuse that path.
        "StrictModes no",
        # labkit drives hosts through direct-tcpip channels (ProxyJump) and SFTP (deploy).
        "AllowTcpForwarding yes",
        "Subsystem sftp internal-sftp",
        "PidFile none",
        "LogLevel ERROR",
        "ClientAliveInterval 15",
        # Bash, started by sshd for a command, reads ~/.bashrc when it believes it is sshd's top-level shell
        # (SHLVL unset). The testbed's hosts share this machine's accounts, so a developer's ~/.bashrc ran for
        # every command labkit sent: with `pyenv init` in root's, ~100 processes and 0.12 CPU-s each, a third of
        # the test suite's CPU. With SHLVL=1 bash skips it, as a fresh VM's account would have nothing there;
        # the host's PATH is then the system's (labkit adds the sbin directories itself).
        "SetEnv SHLVL=1",
    ]
    path.write_text("\n".join(lines) + "\n")


@dataclass(frozen=True)
class HostRoot:
    """The root a host's sshd runs chrooted into: ``tree``, a copy of the cached root ``lower`` or, with ``upper``
    and ``work`` (directories of the host's own), an overlay of them mounted there; ``keys`` is the host's
    directory of this machine (its host key and sshd_config), seen inside the root at :attr:`keys_inside`; ``tag``
    names its mounts (``labkit-proc-TAG``...), so they can be told apart in any process's mount table."""

    lower: str
    tree: str
    keys: str
    upper: str | None = None
    work: str | None = None
    tag: str = "host"

    @property
    def keys_inside(self) -> str:
        # Under the root's private /run, at the machine's own path: nothing is written into the root's tree for it,
        # and sshd's command line names the testbed's state directory (which `down` looks for).
        return "/run" + self.keys

    def mounts(self) -> list[list[str]]:
        """The commands, in order, that make the root's tree ready for its sshd (in a private mount namespace)."""
        tree = self.tree
        steps = []
        if self.upper:
            steps.append(["mount", "-t", "overlay", f"labkit-root-{self.tag}", "-o",
                          f"lowerdir={self.lower},upperdir={self.upper},workdir={self.work}", tree])
        steps += [
            ["mount", "-t", "proc", f"labkit-proc-{self.tag}", f"{tree}/proc"],
            # A sysfs of its own: mounted inside the host's network namespace, it shows that namespace's devices.
            ["mount", "-t", "sysfs", f"labkit-sys-{self.tag}", f"{tree}/sys"],
            ["mount", "--rbind", "/dev", f"{tree}/dev"],  # with /dev/pts, for the sessions' terminals
            # Not shared between hosts.
            ["mount", "-t", "tmpfs", "-o", "mode=1777", f"labkit-shm-{self.tag}", f"{tree}/dev/shm"],
            ["mount", "-t", "tmpfs", "-o", "mode=755", f"labkit-run-{self.tag}", f"{tree}/run"],
            ["mkdir", "-p", f"{tree}/run/sshd", f"{tree}{self.keys_inside}"],
            ["mount", "--bind", "-o", "ro", self.keys, f"{tree}{self.keys_inside}"],
        ]
        return steps


def sshd_argv(netns: str, config: Path, binds: list[tuple[str, str]] = (), root: HostRoot | None = None) -> list[str]:
    """The command that starts sshd in the foreground inside ``netns`` with a private /run.

    ``binds``: (source, target) paths bind-mounted in sshd's private mount
    namespace first (a login user's private /etc files and /home). ``root``: the
    host's own root, whose sshd runs chrooted into it with ``config`` (a path inside it).
    """
    if root is not None:
        steps = [*(["mount", "--bind", source, target] for source, target in binds), *root.mounts()]
        command = ["chroot", root.tree, "/usr/sbin/sshd", "-D", "-e", "-f", str(config)]
    else:
        sshd = find_sshd()
        if sshd is None:
            raise LabkitError("sshd is not installed; apt-get install openssh-server")
        steps = [
            *(["mount", "--bind", source, target] for source, target in binds),
            ["mount", "-t", "tmpfs", "-o", "mode=755", "labkit-run", "/run"],
            ["mkdir", "-p", "/run/sshd"],
        ]
        command = [sshd, "-D", "-e", "-f", str(config)]
    # The inner command is a shell line because mount, mkdir and exec must run in
    # sequence inside the new mount namespace; every word is quoted.
    inner = " && ".join([*(shlex.join(step) for step in steps), "exec " + shlex.join(command)])
    return exec_argv(netns, ["unshare", "--mount", "--propagation", "private", "sh", "-c", inner])


def start_sshd(netns: str, config: Path, log: Path, binds: list[tuple[str, str]] = (), root: HostRoot | None = None) -> int:
    """Start sshd in ``netns`` detached from this process; return its pid (sshd's own, via exec)."""
    with open(log, "ab") as log_file:
        proc = subprocess.Popen(
            sshd_argv(netns, config, binds, root),
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=log_file,
            start_new_session=True,
        )
    return proc.pid


def wait_for_port(address: str, port: int = SSH_PORT, timeout: float = 10.0) -> None:
    """Wait until a TCP connection to ``address:port`` succeeds and an SSH banner arrives."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((address, port), timeout=1.0) as sock:
                if sock.recv(64).startswith(b"SSH-"):
                    return
        except OSError as exc:
            last_error = exc
        time.sleep(0.05)
    raise LabkitError(f"sshd at {address}:{port} did not come up within {timeout:.0f}s ({last_error})")
