"""A remote machine driven over SSH (paramiko), with the same interface as :class:`LocalHost`.

One paramiko transport per host carries every channel: command executions,
SFTP and the ``direct-tcpip`` channels of hosts that jump through this one.
A dropped transport is reopened on next use, with backoff, and logged.

Remote commands are argv lists. sshd hands the command string to the user's
login shell, so every argv goes through :func:`shlex.join` and arrives word
for word, whatever quotes, ``$(...)`` or newlines it contains. Each command
runs as::

    sh -c 'echo LABKIT_PID=$$; PATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin exec "$@" </dev/null' sh env LC_ALL=C ARGV...

sshd makes each exec channel's command a session leader and the login shell
execs a simple command, so ``$$`` is the process group of everything the
command starts; :meth:`SSHProcess.stop` signals that group over a new channel,
even after a reconnect. ``LC_ALL=C`` because tools such as ping print
locale-dependent decimal separators. The sbin directories go on the end of
PATH because sshd gives a user other than root a PATH without them (Debian),
and sysctl, which labkit reads state with, lives in /usr/sbin. stdin is
/dev/null, as ``subprocess.DEVNULL`` locally, and labkit sends no EOF on the
channel instead: a command that ends first closes its channel, and sshd drops
the whole connection (every command on it) on an EOF for a channel it has
closed ("ieof packet referred to nonexistent channel"), which a busy client
sent one time in many.
"""

from __future__ import annotations

import getpass
import logging
import os
import secrets
import select
import shlex
import socket
import stat
import threading
import time
from pathlib import Path

import paramiko

from labkit.errors import LabkitError
from labkit.files import read_file, read_text_file
from labkit.hosts.known_hosts import read_known_hosts
from labkit.hosts.local import BackgroundProcess, Result
from labkit.hosts.privilege import Becomes
from labkit.limits import MAX_PEM_BYTES

log = logging.getLogger(__name__)
# paramiko logs failed handshakes with tracebacks from its transport thread;
# without a handler Python would print them to stderr through its last-resort
# handler. labkit reports each failure as one line instead.
logging.getLogger("paramiko").addHandler(logging.NullHandler())

PID_PREFIX = "LABKIT_PID="
# Printed first by every remote command so it can be signalled later; see the module docstring.
_WRAPPER = f'echo {PID_PREFIX}$$; PATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin exec "$@" </dev/null'
DEFAULT_CONNECT_TIMEOUT_S = 10.0
DEFAULT_KEEPALIVE_S = 15
# Waits before each reconnection attempt after a transport has dropped.
RECONNECT_BACKOFF_S = (0.0, 0.5, 1.0, 2.0, 4.0)
# How long a command waits for the SSH server to accept one more channel on a live connection. sshd allows
# MaxSessions (10 by default) at once per connection; a run's threads (facts read in parallel, servers, samplers,
# the commands that stop them) can ask for more, and a refused channel is not a dropped connection.
SESSION_WAIT_S = 60.0
# OpenSSH's default MaxSessions; see _open_session.
SSHD_MAX_SESSIONS = 10
# How often a command refused a channel asks again when none of labkit's own channels on the host has closed
# meanwhile (a process that ends by itself closes its channel from the server's side, unseen).
SESSION_RETRY_S = 0.2


def _refused(transport: paramiko.Transport, exc: BaseException) -> bool:
    """Whether a failed channel open was the server saying no on a connection that is still alive.

    paramiko raises ChannelException for the server's refusal, but keeps it in one slot per transport that
    any thread's next wait may take first; the thread that asked then gets a bare "Unable to open channel."
    """
    if not transport.is_active():
        return False
    return isinstance(exc, paramiko.ChannelException) or str(exc) == "Unable to open channel."


class HostUnreachable(LabkitError):
    """The host's name does not resolve, or nothing answers SSH at its address."""


class HostKeyRejected(LabkitError):
    """The host's key is unknown (and not to be accepted) or differs from the recorded one."""


class AuthenticationFailed(LabkitError):
    """The SSH server refused every key offered."""


def remote_command(argv: list[str]) -> str:
    """The exact command string sent to sshd for ``argv`` (see the module docstring)."""
    if not argv:
        raise LabkitError("cannot run an empty command")
    return shlex.join(["sh", "-c", _WRAPPER, "sh", "env", "LC_ALL=C", *[str(arg) for arg in argv]])


def remote_path(path: str | os.PathLike) -> str:
    """``~/x`` as a path the SSH server understands: relative paths start in the login directory.

    Both exec channels and the SFTP server start in the user's home, so ``~/x``
    becomes ``x``; no shell is involved to expand ``~``.
    """
    text = os.fspath(path)
    if text == "~":
        return "."
    if text.startswith("~/"):
        return text[2:] or "."
    return text


def _fingerprint(key: paramiko.PKey) -> str:
    return f"{key.get_name()} {key.fingerprint}"


def _refuse_revoked(host: "SSHHost", known, hostname: str, key: paramiko.PKey) -> None:
    """A key an ``@revoked`` line names is never accepted, not even with --accept-new-host-keys (as OpenSSH)."""
    line = known.revoked(hostname, key)
    if line is not None:
        raise HostKeyRejected(f"{host.name}: the host key of {hostname} ({_fingerprint(key)}) is marked @revoked in "
                              f"{host.known_hosts} line {line.number}; refusing to connect")


class _RefuseUnknownKey(paramiko.MissingHostKeyPolicy):
    def __init__(self, host: "SSHHost", known):
        self.host = host
        self.known = known

    def missing_host_key(self, client, hostname, key):
        _refuse_revoked(self.host, self.known, hostname, key)
        authority = self.known.authority(hostname)
        if authority is not None:
            raise HostKeyRejected(
                f"{self.host.name}: host key of {hostname} ({_fingerprint(key)}) is not in {self.host.known_hosts}, "
                f"whose line {authority.number} trusts a certificate authority for it; labkit checks host keys, not "
                "host certificates: record the host's own key (rerun with --accept-new-host-keys)"
            )
        raise HostKeyRejected(
            f"{self.host.name}: host key of {hostname} ({_fingerprint(key)}) is not in {self.host.known_hosts}; "
            "check the fingerprint and rerun with --accept-new-host-keys to record it"
        )


class _RecordNewKey(paramiko.MissingHostKeyPolicy):
    """Accept a key seen for the first time and append it to the known_hosts file, loudly.

    Only unknown hosts reach this policy: a key that differs from a recorded one
    is refused by paramiko before any policy is asked.
    """

    def __init__(self, host: "SSHHost", known):
        self.host = host
        self.known = known

    def missing_host_key(self, client, hostname, key):
        _refuse_revoked(self.host, self.known, hostname, key)
        path = self.host.known_hosts
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        prefix = ""
        if path.exists() and path.stat().st_size and not path.read_bytes().endswith(b"\n"):
            prefix = "\n"
        with open(path, "a") as handle:
            handle.write(f"{prefix}{hostname} {key.get_name()} {key.get_base64()}\n")
        client.get_host_keys().add(hostname, key.get_name(), key)
        log.warning("%s: recorded new host key of %s (%s) in %s", self.host.name, hostname, _fingerprint(key), path)


def _parse_jump(spec: str) -> tuple[str, str | None, int | None]:
    """``[ssh://][user@]host[:port]`` -> (host, user, port)."""
    text = spec.strip()
    if text.startswith("ssh://"):
        text = text[len("ssh://"):]
    user = None
    if "@" in text:
        user, text = text.rsplit("@", 1)
    port = None
    if text.startswith("["):  # [v6addr]:port
        host, _, rest = text[1:].partition("]")
        if rest.startswith(":"):
            port = int(rest[1:])
        return host, user, port
    if text.count(":") == 1:
        text, port_text = text.split(":")
        port = int(port_text)
    return text, user, port


def _load_ssh_config(path: str | os.PathLike | None) -> tuple[paramiko.SSHConfig, Path | None]:
    if path is None:
        default = Path("~/.ssh/config").expanduser()
        if not default.exists():
            return paramiko.SSHConfig(), None
        path = default

    path = Path(path).expanduser()
    text = read_text_file(path, "ssh config")
    try:
        return paramiko.SSHConfig.from_text(text), path
    except (paramiko.ConfigParseError, ValueError) as exc:
        raise LabkitError(f"cannot read ssh config {path}: {exc}") from None


class SSHHost(Becomes):
    """A machine reached over SSH: run, start, read/write sysctls, put and get files.

    ``ssh`` is an alias of the ssh config (or a hostname); ``user``, ``port`` and
    ``identity_file`` override the config. ``known_hosts`` overrides the config's
    UserKnownHostsFile (default ``~/.ssh/known_hosts``). ``become="sudo"``: the
    commands that need root run as ``sudo -n -- ARGV`` unless the user is root.
    Nothing connects until the first command.
    """

    def __init__(
        self,
        name: str,
        *,
        ssh: str | None = None,
        ssh_config: str | os.PathLike | paramiko.SSHConfig | None = None,
        known_hosts: str | os.PathLike | None = None,
        user: str | None = None,
        port: int | None = None,
        identity_file: str | os.PathLike | None = None,
        accept_new_host_keys: bool = False,
        connect_timeout: float | None = None,
        keepalive_s: int | None = None,
        proxy_jump: str | None = None,
        become: str | None = None,
    ):
        self.name = name
        self.become = become
        self.alias = ssh or name
        if isinstance(ssh_config, paramiko.SSHConfig):
            self._config, self.ssh_config = ssh_config, None
        else:
            self._config, self.ssh_config = _load_ssh_config(ssh_config)
        options = self._config.lookup(self.alias)
        self.hostname: str = options["hostname"]
        self.port = int(port or options.get("port", 22))
        self.user = user or options.get("user") or getpass.getuser()
        self.identity_files = [str(Path(identity_file).expanduser())] if identity_file else []
        self.identity_files += [str(Path(path).expanduser()) for path in options.get("identityfile", [])]
        self.identities_only = options.get("identitiesonly", "no").lower() == "yes"
        if known_hosts is not None:
            self.known_hosts = Path(known_hosts).expanduser()
        elif options.get("userknownhostsfile"):
            self.known_hosts = Path(options["userknownhostsfile"].split()[0]).expanduser()
        else:
            self.known_hosts = Path("~/.ssh/known_hosts").expanduser()
        self.accept_new_host_keys = accept_new_host_keys
        self.connect_timeout = float(connect_timeout or options.get("connecttimeout", DEFAULT_CONNECT_TIMEOUT_S))
        self.keepalive_s = int(keepalive_s or options.get("serveraliveinterval", DEFAULT_KEEPALIVE_S))
        jump = proxy_jump if proxy_jump is not None else options.get("proxyjump")
        self.proxy_jump = None if not jump or jump.lower() == "none" else jump
        command = options.get("proxycommand")
        # OpenSSH uses whichever of ProxyJump and ProxyCommand it meets first; paramiko's
        # lookup returns both, and ProxyJump is the one labkit documents.
        self.proxy_command = None if self.proxy_jump or not command or command.lower() == "none" else command
        self._lock = threading.RLock()
        self._client: paramiko.SSHClient | None = None
        self._sftp: paramiko.SFTPClient | None = None
        # One SFTP operation at a time: paramiko's SFTPClient answers concurrent requests from several threads out
        # of turn, and two reads at once (a host's facts, read in parallel) each waited for the other's reply, for good.
        self._sftp_lock = threading.Lock()
        self._sftp_transport: paramiko.Transport | None = None
        self._jump: SSHHost | None = None
        # Notified whenever labkit closes a channel on this host: a command the server refused a channel waits on it.
        self._channel_closed = threading.Condition()
        self._channels: set[paramiko.Channel] = set()  # session channels open, for the MaxSessions reserve
        self.connects = 0  # transports opened so far (1 unless it had to reconnect)
        self.sessions_opened = 0  # exec channels opened; bench/sweep_overhead.py counts them per call

    def __repr__(self) -> str:
        return f"SSHHost({self.name!r}, {self.describe()})"

    def describe(self) -> str:
        """``user@host:port`` and how it is reached."""
        text = f"{self.user}@{self.hostname}:{self.port}"
        if self.proxy_jump:
            text += f" via {self.proxy_jump}"
        elif self.proxy_command:
            text += f" via ProxyCommand {self.proxy_command}"
        return text

    # -- the transport -------------------------------------------------------------------
    def transport(self) -> paramiko.Transport:
        """The one live transport to this host; (re)connects when there is none."""
        with self._lock:
            current = self._client.get_transport() if self._client else None
            if current is not None and current.is_active():
                return current
            if self._client is None:
                self._connect()
            else:
                log.warning("%s: the SSH connection to %s dropped; reconnecting", self.name, self.describe())
                self._close_client()
                self._reconnect()
            return self._client.get_transport()

    def _reconnect(self) -> None:
        last: LabkitError | None = None
        for attempt, delay in enumerate(RECONNECT_BACKOFF_S, start=1):
            if delay:
                log.warning("%s: reconnecting in %g s (attempt %d of %d): %s",
                            self.name, delay, attempt, len(RECONNECT_BACKOFF_S), last.message if last else "")
                time.sleep(delay)
            try:
                self._connect()
            except HostUnreachable as exc:
                last = exc
                continue
            log.warning("%s: reconnected to %s", self.name, self.describe())
            return
        raise last

    def _open_socket(self):
        """A socket-like object to the SSH server: direct TCP, a ProxyCommand, or a jump host's channel."""
        target = f"{self.hostname}:{self.port}"
        if self.proxy_jump:
            jump = self._jump_host()
            try:
                return jump.transport().open_channel(
                    "direct-tcpip", (self.hostname, self.port), ("127.0.0.1", 0), timeout=self.connect_timeout
                )
            except paramiko.ChannelException as exc:
                raise HostUnreachable(
                    f"{self.name}: jump host {jump.name} could not connect to {target}: {exc.text}"
                ) from None
            except (paramiko.SSHException, EOFError, OSError) as exc:
                raise HostUnreachable(f"{self.name}: jump host {jump.name} could not connect to {target}: {exc}") from None
        if self.proxy_command:
            try:
                return paramiko.ProxyCommand(self.proxy_command)
            except (OSError, paramiko.SSHException) as exc:
                raise HostUnreachable(f"{self.name}: ProxyCommand `{self.proxy_command}` failed: {exc}") from None
        try:
            sock = socket.create_connection((self.hostname, self.port), timeout=self.connect_timeout)
        except socket.gaierror:
            where = f" (not a Host in {self.ssh_config} either)" if self.ssh_config else ""
            raise HostUnreachable(f"{self.name}: unknown host {self.hostname!r}: the name does not resolve{where}") from None
        except (socket.timeout, TimeoutError):
            raise HostUnreachable(f"{self.name}: cannot reach {target}: timed out after {self.connect_timeout:g} s") from None
        except OSError as exc:
            raise HostUnreachable(f"{self.name}: cannot reach {target}: {exc.strerror or exc}") from None
        # SSH requests are small messages that each wait for a reply; with Nagle's
        # algorithm and the server's delayed ACK every channel open would cost ~40 ms.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def _jump_host(self) -> "SSHHost":
        if self._jump is None:
            # ProxyJump a,b,c: c is the last hop before this host and is itself reached through a,b.
            *earlier, last = [part for part in self.proxy_jump.split(",") if part.strip()]
            host, user, port = _parse_jump(last)
            self._jump = SSHHost(
                f"{self.name} (jump host {host})",
                ssh=host,
                ssh_config=self._config,
                known_hosts=self.known_hosts,
                user=user,
                port=port,
                accept_new_host_keys=self.accept_new_host_keys,
                connect_timeout=self.connect_timeout,
                keepalive_s=self.keepalive_s,
                proxy_jump=",".join(earlier) or "none",
            )
            self._jump.ssh_config = self.ssh_config
        return self._jump

    def _connect(self) -> None:
        client = paramiko.SSHClient()
        try:
            known = read_known_hosts(self.known_hosts)
        except LabkitError as exc:
            raise HostKeyRejected(f"{self.name}: {exc.message}") from None
        # The keys of this host only (paramiko names it so), without revoked ones, which reach the policy.
        name = self.hostname if self.port == 22 else f"[{self.hostname}]:{self.port}"
        client.get_host_keys().update(known.host_keys(name))
        policy = _RecordNewKey(self, known) if self.accept_new_host_keys else _RefuseUnknownKey(self, known)
        client.set_missing_host_key_policy(policy)
        self._check_identity_files()
        sock = self._open_socket()
        target = f"{self.user}@{self.hostname}:{self.port}"
        try:
            client.connect(
                self.hostname,
                port=self.port,
                username=self.user,
                key_filename=self.identity_files or None,
                # IdentitiesOnly: offer the configured keys only, as ssh(1) does.
                look_for_keys=not self.identities_only,
                allow_agent=not self.identities_only,
                sock=sock,
                timeout=self.connect_timeout,
                banner_timeout=self.connect_timeout,
                auth_timeout=self.connect_timeout,
            )
        except BaseException as exc:
            client.close()
            sock.close()
            raise self._connect_error(exc, target) from None
        transport = client.get_transport()
        # Keepalives keep NAT and firewall state alive during long idle gaps, and
        # notice a dead peer.
        transport.set_keepalive(self.keepalive_s)
        self._client = client
        self.connects += 1
        log.debug("%s: connected to %s", self.name, self.describe())

    def _check_identity_files(self) -> None:
        """paramiko reads a key file whole: one that is a device (/dev/zero) or far too large is refused first."""
        for path in self.identity_files:
            if os.path.lexists(path):  # a missing one is skipped, as ssh(1) and paramiko skip it
                try:
                    read_file(path, "identity_file", max_bytes=MAX_PEM_BYTES)
                except LabkitError as exc:
                    raise AuthenticationFailed(f"{self.name}: {exc.message}") from None

    def _connect_error(self, exc: BaseException, target: str) -> BaseException:
        if isinstance(exc, LabkitError):
            return exc
        if isinstance(exc, paramiko.BadHostKeyException):
            return HostKeyRejected(
                f"{self.name}: the host key of {exc.hostname} ({_fingerprint(exc.key)}) does not match the one "
                f"recorded in {self.known_hosts}; refusing to connect (if the host was reinstalled, remove the old "
                f"key with `ssh-keygen -R {exc.hostname} -f {self.known_hosts}`)"
            )
        if isinstance(exc, paramiko.PasswordRequiredException):
            return AuthenticationFailed(f"{self.name}: a key for {target} is passphrase-protected; add it to ssh-agent")
        if isinstance(exc, paramiko.AuthenticationException):
            keys = ", ".join(self.identity_files) or "none configured"
            agent = "" if self.identities_only else " and the ssh-agent/default keys"
            return AuthenticationFailed(f"{self.name}: authentication failed for {target} (keys: {keys}{agent})")
        if isinstance(exc, (socket.timeout, TimeoutError)) or "banner" in str(exc).lower():
            return HostUnreachable(f"{self.name}: no SSH server answered at {target} within {self.connect_timeout:g} s")
        if isinstance(exc, (paramiko.SSHException, EOFError, OSError)):
            return HostUnreachable(f"{self.name}: SSH to {target} failed: {exc or type(exc).__name__}")
        return exc

    def _open_session(self, *, reserved: bool = False) -> paramiko.Channel:
        """A new session channel on the host's transport.

        sshd accepts MaxSessions (10 by default) session channels per connection and refuses
        the next. Ordinary commands leave one of the ten to ``reserved`` ones, the commands
        that stop processes, so a run holding nine can still stop them; whichever is refused
        on a live transport waits for a channel to close: closing the transport, as for a
        dead one, would kill every command running on it. A transport that died between the
        liveness check and the open is closed and the open retried once through transport(),
        which reconnects.
        """
        waiting_since: float | None = None
        dead = 0
        while True:
            if not reserved and self._live_channels() >= SSHD_MAX_SESSIONS - 1:
                waiting_since = self._wait_for_a_channel(waiting_since, "labkit holds the others")
                continue
            transport = self.transport()
            try:
                channel = transport.open_session(timeout=self.connect_timeout)
            except (paramiko.SSHException, EOFError, OSError) as exc:
                if _refused(transport, exc):
                    waiting_since = self._wait_for_a_channel(waiting_since, f"the server refused one: {exc}")
                    continue
                dead += 1
                if dead >= 2:
                    raise HostUnreachable(f"{self.name}: cannot open an SSH channel: {exc}") from None
                transport.close()
                continue
            self.sessions_opened += 1
            with self._channel_closed:
                self._channels.add(channel)
            return channel

    def _live_channels(self) -> int:
        """Session channels labkit opened on this host and neither side has closed yet."""
        with self._channel_closed:
            self._channels = {channel for channel in self._channels if not channel.closed}
            return len(self._channels)

    def _wait_for_a_channel(self, since: float | None, why: str) -> float:
        """Wait a little for a channel on this host to close; fail after SESSION_WAIT_S in all."""
        now = time.monotonic()
        if since is None:
            since = now
            log.debug("%s: waiting for an SSH channel to close (%s)", self.name, why)
        elif now - since > SESSION_WAIT_S:
            raise HostUnreachable(
                f"{self.name}: no SSH channel free for {SESSION_WAIT_S:g} s ({why}; sshd allows "
                f"MaxSessions channels per connection)"
            )
        with self._channel_closed:
            self._channel_closed.wait(SESSION_RETRY_S)
        return since

    def _close_channel(self, channel: paramiko.Channel) -> None:
        """Close a channel labkit opened, and wake any command waiting for a free one."""
        channel.close()
        with self._channel_closed:
            self._channels.discard(channel)
            self._channel_closed.notify_all()

    def _exec(self, argv: list[str], *, reserved: bool = False) -> paramiko.Channel:
        channel = self._open_session(reserved=reserved)
        channel.exec_command(remote_command(argv))
        return channel

    def _close_client(self) -> None:
        if self._sftp is not None:
            try:
                self._sftp.close()
            except Exception:  # noqa: BLE001 - the transport may already be gone
                pass
            self._sftp = None
        if self._client is not None:
            self._client.close()
            self._client = None

    def close(self) -> None:
        """Close the transport (and a jump host's); the next command would reconnect."""
        with self._lock:
            self._close_client()
            if self._jump is not None:
                self._jump.close()
                self._jump = None

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    # -- commands ----------------------------------------------------------------------
    def run(self, argv: list[str], *, timeout: float = 60, check: bool = False) -> Result:
        """Run ``argv`` to completion on the host."""
        return self._run(argv, timeout=timeout, check=check)

    def _run(self, argv: list[str], *, timeout: float, check: bool, reserved: bool = False) -> Result:
        channel = self._exec(argv, reserved=reserved)
        out, err = bytearray(), bytearray()
        deadline = time.monotonic() + timeout
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self._kill_after_timeout(bytes(out))
                    raise LabkitError(f"`{shlex.join(argv)}` on {self.name} took longer than {timeout:g} s")
                # channel.fileno() is a pipe paramiko sets when either stream has data or at EOF.
                select.select([channel], [], [], min(remaining, 1.0))
                while channel.recv_ready():
                    out += channel.recv(65536)
                while channel.recv_stderr_ready():
                    err += channel.recv_stderr(65536)
                if channel.eof_received and not channel.recv_ready() and not channel.recv_stderr_ready():
                    break
                if channel.closed:
                    break
            if not channel.status_event.wait(max(0.0, deadline - time.monotonic())):
                raise LabkitError(f"`{shlex.join(argv)}` on {self.name} took longer than {timeout:g} s")
            status = channel.exit_status
            if status == -1 and not channel.get_transport().is_active():
                raise HostUnreachable(f"{self.name}: the SSH connection dropped while running `{shlex.join(argv)}`")
        finally:
            self._close_channel(channel)
        stdout = out.decode(errors="replace")
        if stdout.startswith(PID_PREFIX):
            stdout = stdout.split("\n", 1)[1] if "\n" in stdout else ""
        result = Result(list(argv), status, stdout, err.decode(errors="replace"))
        if status == 127 and result.stderr.startswith("env: ") and "No such file" in result.stderr:
            raise LabkitError(f"{argv[0]} is not installed on {self.name}")
        if check and not result.ok:
            detail = (result.stderr or result.stdout).strip().splitlines()
            raise LabkitError(f"`{shlex.join(argv)}` failed on {self.name}: {detail[-1] if detail else status}")
        return result

    def _kill_after_timeout(self, stdout: bytes) -> None:
        first = stdout.split(b"\n", 1)[0].decode(errors="replace")
        if first.startswith(PID_PREFIX):
            self.signal_group(int(first[len(PID_PREFIX):]), "KILL")

    def signal_group(self, pgid: int, signal_name: str) -> bool:
        """Send SIG``signal_name`` to process group ``pgid`` on the host; False if no such group."""
        # On the reserved channel: stopping what holds the others must not wait for them.
        return self._run(["kill", f"-{signal_name}", "--", f"-{pgid}"], timeout=30, check=False, reserved=True).ok

    def start(self, argv: list[str], ready_timeout: float = 30) -> "SSHProcess":
        """Start ``argv`` in the background; returns once the host has reported its process group."""
        process = SSHProcess(self, self._exec(argv), list(argv))
        process._wait_for_pid(ready_timeout)
        return process

    def read_sysctl(self, key: str) -> str:
        return self.run(["sysctl", "-n", key], check=True).stdout.strip()

    def write_sysctl(self, key: str, value: str) -> None:
        self.run_privileged(["sysctl", "-q", "-w", f"{key}={value}"], check=True)

    def logs_in_as_root(self) -> bool:
        return self.user == "root"

    # -- files ---------------------------------------------------------------------------
    def sftp(self) -> paramiko.SFTPClient:
        """An SFTP client on the host's one transport (reopened after a reconnect)."""
        with self._lock:
            transport = self.transport()
            if self._sftp is None or self._sftp_transport is not transport:
                try:
                    # SFTPClient.from_transport, through the channel open that waits out sshd's MaxSessions.
                    channel = self._open_session()
                    channel.invoke_subsystem("sftp")
                    self._sftp = paramiko.SFTPClient(channel)
                except (paramiko.SSHException, EOFError) as exc:
                    raise LabkitError(f"{self.name}: the SSH server offers no SFTP: {exc}") from None
                self._sftp_transport = channel.get_transport()
            return self._sftp

    def _sftp_call(self, what: str, call):
        """Run an SFTP operation; an OSError becomes one line: ``cannot <what>: <reason>``."""
        try:
            with self._sftp_lock:
                return call(self.sftp())
        except OSError as exc:
            raise LabkitError(f"cannot {what}: {exc.strerror or exc}") from None

    def put(self, local: str | os.PathLike, remote: str | os.PathLike, *, mode: int | None = None) -> None:
        """Upload a file; ``~/`` at the start of ``remote`` is the login directory.

        With ``mode`` the file is created with those permission bits before
        any byte is written, so a private key is never readable by others.
        """
        target = remote_path(remote)

        def upload(sftp: paramiko.SFTPClient) -> None:
            if mode is not None:
                with sftp.open(target, "wb") as handle:
                    handle.chmod(mode)
            sftp.put(os.fspath(local), target)

        self._sftp_call(f"upload {local} to {self.name}:{os.fspath(remote)}", upload)

    def get(self, remote: str | os.PathLike, local: str | os.PathLike) -> None:
        """Download a file; ``~/`` at the start of ``remote`` is the login directory."""
        self._sftp_call(f"download {self.name}:{os.fspath(remote)} to {local}",
                        lambda sftp: sftp.get(remote_path(remote), os.fspath(local)))

    def read_bytes(self, path: str) -> bytes:
        """A file's content; read to the end, since /proc files report a size of 0."""

        def read(sftp: paramiko.SFTPClient) -> bytes:
            with sftp.open(remote_path(path), "rb") as handle:
                chunks = []
                while chunk := handle.read(32768):
                    chunks.append(chunk)
                return b"".join(chunks)

        return self._sftp_call(f"read {self.name}:{path}", read)

    def exists(self, path: str) -> bool:
        try:
            with self._sftp_lock:
                self.sftp().lstat(remote_path(path))
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise LabkitError(f"cannot look at {self.name}:{path}: {exc.strerror or exc}") from None
        return True

    def make_dir(self, path: str, *, private: bool = False) -> None:
        target = remote_path(path)

        def make(sftp: paramiko.SFTPClient) -> None:
            parts = target.split("/")
            for end in range(1, len(parts) + 1):
                prefix = "/".join(parts[:end])
                if not prefix or prefix == ".":
                    continue
                try:
                    sftp.stat(prefix)
                except FileNotFoundError:
                    try:
                        sftp.mkdir(prefix, 0o700 if private and end == len(parts) else 0o777)
                    except OSError:
                        # Made meanwhile by another session on a filesystem two hosts share (the testbed's
                        # namespaces, a shared home), deploying in parallel: SFTP says only "Failure".
                        if not self._is_dir(sftp, prefix):
                            raise
            if private:
                sftp.chmod(target, 0o700)

        self._sftp_call(f"create the directory {self.name}:{path}", make)

    @staticmethod
    def _is_dir(sftp: paramiko.SFTPClient, path: str) -> bool:
        try:
            return stat.S_ISDIR(sftp.stat(path).st_mode)
        except OSError:
            return False

    def make_temp_dir(self, prefix: str) -> str:
        base = "/tmp"  # POSIX guarantees it; no shell is run to read $TMPDIR
        for _ in range(10):
            path = f"{base}/{prefix}{secrets.token_hex(6)}"
            try:
                with self._sftp_lock:
                    self.sftp().mkdir(path, 0o700)
            except OSError:
                continue  # taken (or not writable: the last attempt reports it)
            return path
        raise LabkitError(f"cannot create a temporary directory in {self.name}:{base}")

    def chmod(self, path: str, mode: int) -> None:
        self._sftp_call(f"change the mode of {self.name}:{path}", lambda sftp: sftp.chmod(remote_path(path), mode))

    def rename(self, source: str, target: str) -> None:
        self._sftp_call(f"move {self.name}:{source} to {target}",
                        lambda sftp: sftp.posix_rename(remote_path(source), remote_path(target)))

    def remove(self, path: str) -> None:
        def remove_tree(sftp: paramiko.SFTPClient, target: str) -> None:
            try:
                attributes = sftp.lstat(target)
            except FileNotFoundError:
                return
            if stat.S_ISDIR(attributes.st_mode or 0):
                for entry in sftp.listdir_attr(target):
                    remove_tree(sftp, f"{target}/{entry.filename}")
                sftp.rmdir(target)
            else:
                sftp.remove(target)

        self._sftp_call(f"remove {self.name}:{path}", lambda sftp: remove_tree(sftp, remote_path(path)))


class SSHProcess(BackgroundProcess):
    """A command running in the background on an SSH host; ``pid`` is its process group there."""

    def __init__(self, host: SSHHost, channel: paramiko.Channel, argv: list[str]):
        super().__init__(argv)
        self.host = host
        self.channel = channel
        self._pid: int | None = None
        self._pid_seen = threading.Event()
        self._stopped = False
        self._start_readers()

    def _pump_stdout(self) -> None:
        for line in self._read_lines(self.channel.recv):
            if self._pid is None and not self._pid_seen.is_set() and line.startswith(PID_PREFIX):
                self._pid = int(line[len(PID_PREFIX):])
                self._pid_seen.set()
                continue
            self._lines.put(line)
        self._pid_seen.set()
        self._lines.put(None)  # end of output

    def _pump_stderr(self) -> None:
        for line in self._read_lines(self.channel.recv_stderr):
            self.stderr_lines.append(line)

    @staticmethod
    def _read_lines(recv):
        pending = b""
        while True:
            try:
                chunk = recv(65536)
            except (OSError, EOFError, paramiko.SSHException):
                chunk = b""
            if not chunk:
                break
            pending += chunk
            *complete, pending = pending.split(b"\n")
            for line in complete:
                yield line.decode(errors="replace")
        if pending:
            yield pending.decode(errors="replace")

    def _wait_for_pid(self, timeout: float) -> None:
        if not self._pid_seen.wait(timeout) or self._pid is None:
            self.host._close_channel(self.channel)
            detail = self.stderr_lines[-1] if self.stderr_lines else "no process id reported"
            raise LabkitError(f"`{shlex.join(self.argv)}` did not start on {self.host.name}: {detail}")

    @property
    def pid(self) -> int:
        """The remote process id, which is also its process group id."""
        return self._pid

    def poll(self) -> int | None:
        # paramiko records exit-status only; a process killed by a signal reports -1.
        return self.channel.exit_status if self.channel.exit_status_ready() else None

    def wait(self, timeout: float | None = None) -> int:
        if not self.channel.status_event.wait(timeout):
            raise LabkitError(f"`{shlex.join(self.argv)}` on {self.host.name} did not end within {timeout:g} s")
        self._join_readers()
        return self.channel.exit_status

    def stop(self, grace_s: float = 3.0) -> int | None:
        """SIGTERM the process group, SIGKILL it after ``grace_s``; return the exit status.

        Works from the group id alone, so a process whose channel was lost with a
        dropped connection is still stopped (through the new one). The status is
        -1 when the process died of a signal (paramiko records exit-status only).
        """
        if not self._stopped:
            self._stopped = True
            lost = self.channel.closed  # e.g. the connection dropped: the channel says nothing more
            # TERM succeeds only while some process of the group exists.
            if self.host.signal_group(self._pid, "TERM") and not self._wait_gone(grace_s, lost):
                self.host.signal_group(self._pid, "KILL")
                self._wait_gone(5, lost)
            # Whatever of the group stopped holding stdout (and so the channel) open goes too.
            self.host.signal_group(self._pid, "KILL")
            for reader in self._readers:
                reader.join(timeout=1)
            self.host._close_channel(self.channel)
        return self.poll()

    def _wait_gone(self, timeout: float, lost: bool) -> bool:
        """Wait until the channel closes: every process holding its stdout/stderr has exited.

        For a channel already lost, ask the host whether the group still exists
        (a zombie still counts, so this may wait out the timeout).
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if lost:
                if not self.host.signal_group(self._pid, "0"):
                    return True
                time.sleep(0.1)
            elif self.channel.closed:
                return True
            else:
                self.channel.status_event.wait(0.05)
        return False