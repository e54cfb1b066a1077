"""One sshd per testbed namespace, so labkit reaches testbed hosts over SSH like any remote VM.

Each sshd gets its own generated host key, accepts only the testbed's generated
client key, and runs in a private mount namespace with a tmpfs on /run: Debian's
sshd insists on its privilege-separation directory /run/sshd, and creating it
privately leaves the host's /run untouched.
"""

from __future__ import annotations

import shlex
import socket
import subprocess
import time
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


def sshd_argv(netns: str, config: Path, binds: list[tuple[str, str]] = ()) -> list[str]:
    """The command that starts sshd in the foreground inside ``netns`` with a private /run.

    ``binds``: (source, target) paths bind-mounted in sshd's private mount
    namespace first (a login user's private /etc files and /home).
    """
    sshd = find_sshd()
    if sshd is None:
        raise LabkitError("sshd is not installed; apt-get install openssh-server")
    # The inner command is a shell line because mount, mkdir and exec must run in
    # sequence inside the new mount namespace; every word is quoted.
    inner = " && ".join(
        [
            *(shlex.join(["mount", "--bind", source, target]) for source, target in binds),
            shlex.join(["mount", "-t", "tmpfs", "-o", "mode=755", "labkit-run", "/run"]),
            shlex.join(["mkdir", "-p", "/run/sshd"]),
            "exec " + shlex.join([sshd, "-D", "-e", "-f", str(config)]),
        ]
    )
    return exec_argv(netns, ["unshare", "--mount", "--propagation", "private", "sh", "-c", inner])


def start_sshd(netns: str, config: Path, log: Path, binds: list[tuple[str, str]] = ()) -> int:
    """Start sshd in ``netns`` detached from this process; return its pid (sshd's own, via exec)."""
    with open(log, "ab") as log_file:
        proc = subprocess.Popen(
            sshd_argv(netns, config, binds),
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
