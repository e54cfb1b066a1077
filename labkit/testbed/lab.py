"""The local testbed: two network namespaces joined by an emulated WAN link, each with its own sshd.

Layout of testbed NAME with index N (allocated so several testbeds coexist)::

    root ns ── lkNa (198.19.N.1/30) ══ mgmt0 (198.19.N.2) ── ns labkit-NAME-a ── lkdata 198.18.N.1
    root ns ── lkNb (198.19.N.5/30) ══ mgmt0 (198.19.N.6) ── ns labkit-NAME-b ── lkdata 198.18.N.2
                                  data link: lkdata(a) ⇄ delay line process ⇄ lkdata(b)

The management veths carry SSH with no added delay; experiments use the data
addresses, whose traffic crosses the delay line. All addresses are in the
RFC 2544 benchmarking range 198.18.0.0/15.

State lives in ``$LABKIT_STATE_HOME/testbeds/NAME`` (default
``~/.local/state/labkit``): ``state.json`` (what `up` built), ``link.json``
(read by the delay line), ``ssh_config``, ``known_hosts``, the client key and
``inventory.toml``.

The hosts log in as root, or (``--login-user NAME``) as a user that exists
only inside the testbed's sshds, with or without passwordless sudo, so the
testbed plays a cloud VM; see :mod:`labkit.testbed.login`.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import tomli_w

from labkit.errors import LabkitError
from labkit.testbed import netns as ns
from labkit.testbed import sshd
from labkit.testbed.login import LoginFiles, LoginUser

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,15}$")
NETNS_PREFIX = "labkit-"
DATA_IFNAME = "lkdata"
MGMT_IFNAME = "mgmt0"
HOSTS = ("a", "b")
CONGESTION_CONTROLS = ("cubic", "bbr", "reno")
EMULATORS = ("auto", "tun", "netem")
MAX_INDEX = 250
# TUN releases the sender's socket accounting, so TCP small queues cannot pace a
# sender; a deep ring keeps slow-start bursts from overflowing it.
TUN_TXQUEUELEN = 10000


def state_home() -> Path:
    base = os.environ.get("LABKIT_STATE_HOME")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_STATE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "state") / "labkit"


def testbeds_dir() -> Path:
    return state_home() / "testbeds"


@dataclass(frozen=True)
class LinkConfig:
    """The parameters of the emulated WAN link that `testbed up` accepts."""

    one_way_delay_s: float = 0.100
    rate_bps: float | None = 100e6
    mtu: int = 1460
    cc: str = "cubic"
    emulator: str = "auto"

    def describe(self) -> str:
        rate = f"{self.rate_bps / 1e6:g} Mbit/s" if self.rate_bps else "no rate limit"
        return (
            f"{self.one_way_delay_s * 1e3:g} ms one way (RTT {2 * self.one_way_delay_s * 1e3:g} ms), "
            f"{rate}, MTU {self.mtu}, congestion control {self.cc}"
        )

    def validate(self) -> None:
        if not 0 <= self.one_way_delay_s <= 10:
            raise LabkitError(f"one-way delay must be between 0 and 10 s, not {self.one_way_delay_s:g} s")
        if not 576 <= self.mtu <= 65535:
            raise LabkitError(f"MTU must be between 576 and 65535, not {self.mtu}")
        if self.cc not in CONGESTION_CONTROLS:
            raise LabkitError(f"congestion control must be one of {', '.join(CONGESTION_CONTROLS)}")
        if self.emulator not in EMULATORS:
            raise LabkitError(f"emulator must be one of {', '.join(EMULATORS)}")


@dataclass
class HostInfo:
    name: str
    netns: str
    ssh_alias: str
    mgmt_address: str
    root_veth: str
    root_address: str
    data_address: str


@dataclass
class TestbedState:
    """Everything `up` built, written to state.json so `down` and `status` can find it."""

    __test__ = False

    name: str
    index: int
    link: LinkConfig
    emulator: str
    state_dir: str
    hosts: dict[str, HostInfo] = field(default_factory=dict)
    forwarder_pid: int | None = None
    sshd_pids: dict[str, int] = field(default_factory=dict)
    created_utc: str = ""
    login_user: str | None = None  # None: the hosts log in as root
    login_sudo: bool = False
    login_uid: int | None = None

    @property
    def login(self) -> LoginUser | None:
        return LoginUser(self.login_user, self.login_sudo) if self.login_user else None

    @property
    def dir(self) -> Path:
        return Path(self.state_dir)

    @property
    def ssh_config(self) -> Path:
        return self.dir / "ssh_config"

    @property
    def known_hosts(self) -> Path:
        return self.dir / "known_hosts"

    @property
    def identity_file(self) -> Path:
        return self.dir / "id_ed25519"

    @property
    def inventory(self) -> Path:
        return self.dir / "inventory.toml"

    def save(self) -> None:
        tmp = self.dir / "state.json.tmp"
        tmp.write_text(json.dumps(asdict(self), indent=2))
        os.replace(tmp, self.dir / "state.json")

    @classmethod
    def load(cls, state_dir: Path) -> "TestbedState":
        data = json.loads((state_dir / "state.json").read_text())
        data["link"] = LinkConfig(**data["link"])
        data["hosts"] = {key: HostInfo(**value) for key, value in data["hosts"].items()}
        return cls(**data)


def validate_name(name: str) -> str:
    if not NAME_RE.match(name):
        raise LabkitError(f"testbed name {name!r} must be 1-16 characters of a-z, 0-9 and '-'")
    return name


def netns_name(name: str, host: str) -> str:
    return f"{NETNS_PREFIX}{name}-{host}"


def netem_available() -> bool:
    """Whether this kernel offers the netem qdisc (tried on a throwaway namespace's loopback)."""
    probe = f"{NETNS_PREFIX}netem-probe-{os.getpid()}"
    try:
        ns.ip("netns", "add", probe)
        result = ns.run(["tc", "-n", probe, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"], check=False)
        return result.returncode == 0
    except LabkitError:
        return False
    finally:
        ns.ip("netns", "del", probe, check=False)


def _pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is not alive for our purposes.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _forwarder_pids(state_dir: Path) -> list[int]:
    """Delay-line processes of this testbed, found by their command line (survives a lost state.json)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            args = _cmdline(int(entry.name))
            if "labkit.testbed.delayline" in args and str(state_dir) in args:
                pids.append(int(entry.name))
    return pids


def _terminate(pids: list[int], grace_s: float = 3.0) -> None:
    """SIGTERM ``pids``, then SIGKILL whatever is still alive after ``grace_s``."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(_pid_alive(pid) for pid in pids):
        time.sleep(0.05)
    for pid in pids:
        if _pid_alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for pid in pids:
        # Reap our own children so they do not linger as zombies.
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


class Testbed:
    """Bring a named local testbed up, change it, inspect it, and tear it down."""

    __test__ = False

    def __init__(self, name: str = "labkit", log=None):
        self.name = validate_name(name)
        self.state_dir = testbeds_dir() / name
        self.log = log or (lambda message: print(message, file=sys.stderr))

    # -- discovery -----------------------------------------------------------------
    def load_state(self) -> TestbedState | None:
        try:
            return TestbedState.load(self.state_dir)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def existing_namespaces(self) -> list[str]:
        """This testbed's namespaces that exist now (exact names: testbed "x" must not claim "x-y")."""
        ours = {netns_name(self.name, host) for host in HOSTS}
        return [name for name in ns.list_netns() if name in ours]

    def _allocate_index(self) -> int:
        taken = set()
        for other in testbeds_dir().glob("*/state.json"):
            if other.parent.name == self.name:
                continue
            try:
                taken.add(json.loads(other.read_text())["index"])
            except (OSError, ValueError, KeyError):
                continue
        # Root-side veth names embed the index; an existing one means it is in use.
        existing_links = ns.ip("-o", "link", "show").stdout
        for index in range(MAX_INDEX):
            if index not in taken and f"lk{index}a@" not in existing_links and f"lk{index}a:" not in existing_links:
                return index
        raise LabkitError(f"all {MAX_INDEX} testbed slots are in use; run `labkit testbed down --all`")

    # -- up --------------------------------------------------------------------------
    def up(self, link: LinkConfig, login: LoginUser | None = None) -> TestbedState:
        """Create the testbed, or bring an existing one to ``link``'s parameters and ``login``'s user."""
        link.validate()
        ns.check_can_host_testbed()
        if login is not None:
            login.validate()
        testbeds_dir().mkdir(parents=True, exist_ok=True)
        with open(testbeds_dir() / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            state = self.load_state()
            if state is not None:
                problems = self.health(state)["problems"]
                if not problems and (state.login_user == (login.name if login else None)):
                    self._change_sudo(state, login)
                    return self._change_link(state, link)
                self.log(f"testbed {self.name} is broken ({'; '.join(problems)}); rebuilding it" if problems else
                         f"testbed {self.name} logs in as {state.login_user or 'root'}; rebuilding it for "
                         f"{login.name if login else 'root'}")
                self.down(quiet=True)
            elif self.existing_namespaces():
                self.log(f"testbed {self.name} has leftovers from a crash; removing them first")
                self.down(quiet=True)
            emulator = self._pick_emulator(link.emulator)
            state = TestbedState(
                name=self.name,
                index=self._allocate_index(),
                link=link,
                emulator=emulator,
                state_dir=str(self.state_dir),
                created_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                login_user=login.name if login else None,
                login_sudo=bool(login and login.sudo),
            )
            self.state_dir.mkdir(parents=True, exist_ok=True)
            os.chmod(self.state_dir, 0o700)
            state.save()
            try:
                self._build(state)
            except BaseException:
                # Never leave half a testbed behind: a failed or interrupted `up` undoes itself.
                self.down(quiet=True)
                raise
            return state

    def _pick_emulator(self, requested: str) -> str:
        if requested == "tun":
            return "tun"
        has_netem = netem_available()
        if requested == "netem" and not has_netem:
            raise LabkitError("this kernel has no netem qdisc; use --emulator tun (the user-space delay line)")
        return "netem" if has_netem else "tun"

    def _build(self, state: TestbedState) -> None:
        index = state.index
        for position, host in enumerate(HOSTS):
            netns = netns_name(self.name, host)
            base = 4 * position
            info = HostInfo(
                name=host,
                netns=netns,
                ssh_alias=f"{self.name}-{host}",
                mgmt_address=f"198.19.{index}.{base + 2}",
                root_veth=f"lk{index}{host}",
                root_address=f"198.19.{index}.{base + 1}",
                data_address=f"198.18.{index}.{position + 1}",
            )
            state.hosts[host] = info
            ns.ip("netns", "add", netns)
            ns.ip("link", "set", "lo", "up", netns=netns)
            ns.ip("link", "add", info.root_veth, "type", "veth", "peer", "name", MGMT_IFNAME, "netns", netns)
            ns.ip("addr", "add", f"{info.root_address}/30", "dev", info.root_veth)
            ns.ip("link", "set", info.root_veth, "up")
            ns.ip("addr", "add", f"{info.mgmt_address}/30", "dev", MGMT_IFNAME, netns=netns)
            ns.ip("link", "set", MGMT_IFNAME, "up", netns=netns)
        state.save()
        self._write_link_file(state)
        if state.emulator == "tun":
            state.forwarder_pid = self._start_forwarder(state)
        else:
            self._build_netem_link(state)
        state.save()
        self._configure_data_link(state)
        self._start_sshds(state)
        state.save()
        self._write_client_files(state)

    def _write_link_file(self, state: TestbedState) -> None:
        link = state.link
        payload = {"one_way_delay_s": link.one_way_delay_s, "rate_bps": link.rate_bps}
        tmp = state.dir / "link.json.tmp"
        tmp.write_text(json.dumps(payload))
        os.replace(tmp, state.dir / "link.json")

    def _start_forwarder(self, state: TestbedState) -> int:
        log_path = state.dir / "delayline.log"
        argv = [
            sys.executable, "-m", "labkit.testbed.delayline",
            "--state-dir", str(state.dir),
            "--netns-a", state.hosts["a"].netns,
            "--netns-b", state.hosts["b"].netns,
            "--ifname", DATA_IFNAME,
        ]
        with open(log_path, "ab") as log_file:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file, start_new_session=True
            )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if '"ready"' in log_path.read_text(errors="replace"):
                return proc.pid
            if proc.poll() is not None:
                tail = log_path.read_text(errors="replace").strip().splitlines()[-1:]
                raise LabkitError(f"the delay line exited at start: {tail[0] if tail else 'no output'}")
            time.sleep(0.02)
        raise LabkitError("the delay line did not become ready within 10 s")

    def _build_netem_link(self, state: TestbedState) -> None:
        # Where the kernel has netem, a veth pair carries the data link and each
        # end's qdisc adds the one-way delay (and rate) for its direction.
        a, b = state.hosts["a"], state.hosts["b"]
        ns.ip("link", "add", DATA_IFNAME, "netns", a.netns, "type", "veth", "peer", "name", DATA_IFNAME, "netns", b.netns)
        self._apply_netem(state)

    def _apply_netem(self, state: TestbedState) -> None:
        link = state.link
        args = ["delay", f"{link.one_way_delay_s * 1e6:.0f}us", "limit", "10000"]
        if link.rate_bps:
            args += ["rate", f"{link.rate_bps:.0f}bit"]
        for host in state.hosts.values():
            ns.run(["tc", "-n", host.netns, "qdisc", "replace", "dev", DATA_IFNAME, "root", "netem", *args])

    def _configure_data_link(self, state: TestbedState) -> None:
        a, b = state.hosts["a"], state.hosts["b"]
        for local, peer in ((a, b), (b, a)):
            ns.ip("addr", "replace", local.data_address, "peer", f"{peer.data_address}/32", "dev", DATA_IFNAME, netns=local.netns)
            ns.ip("link", "set", DATA_IFNAME, "mtu", str(state.link.mtu), "txqueuelen", str(TUN_TXQUEUELEN), "up", netns=local.netns)
            self._set_route(state, local, peer)

    def _set_route(self, state: TestbedState, local: HostInfo, peer: HostInfo) -> None:
        # Inside a namespace the sysctl may only choose the globally allowed
        # algorithms (often "reno bbr"); a per-route congctl works for any loaded one.
        ns.ip(
            "route", "replace", f"{peer.data_address}/32", "dev", DATA_IFNAME,
            "src", local.data_address, "congctl", state.link.cc,
            netns=local.netns,
        )

    def _start_sshds(self, state: TestbedState) -> None:
        client_key = state.identity_file
        sshd.generate_key(client_key, f"labkit-testbed-{self.name}-client")
        authorized = state.dir / "authorized_keys"
        authorized.write_text(sshd.public_key(client_key) + "\n")
        os.chmod(authorized, 0o600)
        binds = []
        if state.login is not None:
            files = LoginFiles(state.dir, self.name)
            state.login_uid = files.create(state.login, sshd.public_key(client_key))
            binds = files.bind_mounts()
        for host in state.hosts.values():
            host_dir = state.dir / host.name
            host_dir.mkdir(exist_ok=True)
            host_key = host_dir / "ssh_host_ed25519_key"
            sshd.generate_key(host_key, f"labkit-testbed-{self.name}-{host.name}")
            config = host_dir / "sshd_config"
            sshd.write_sshd_config(
                config, host_key=host_key, authorized_keys=authorized,
                listen=[host.mgmt_address, host.data_address], login_user=state.login_user,
            )
            state.sshd_pids[host.name] = sshd.start_sshd(host.netns, config, host_dir / "sshd.log", binds)
        for host in state.hosts.values():
            sshd.wait_for_port(host.mgmt_address)

    def _write_client_files(self, state: TestbedState) -> None:
        known = []
        config = [f"# Written by labkit testbed up --name {self.name}; use with ssh -F {state.ssh_config}"]
        for host in state.hosts.values():
            key = sshd.public_key(state.dir / host.name / "ssh_host_ed25519_key")
            known.append(f"{host.mgmt_address},{host.data_address} {key}")
            config += [
                "",
                f"Host {host.ssh_alias}",
                f"    HostName {host.mgmt_address}",
                f"    Port {sshd.SSH_PORT}",
                f"    User {state.login_user or 'root'}",
                f"    IdentityFile {state.identity_file}",
                "    IdentitiesOnly yes",
                f"    UserKnownHostsFile {state.known_hosts}",
                "    StrictHostKeyChecking yes",
            ]
        state.known_hosts.write_text("\n".join(known) + "\n")
        state.ssh_config.write_text("\n".join(config) + "\n")
        inventory = {
            # Top-level keys are the inventory format every labkit command reads;
            # [testbed] only describes where the hosts came from.
            "ssh_config": str(state.ssh_config),
            "known_hosts": str(state.known_hosts),
            "testbed": {
                "name": self.name,
                "identity_file": str(state.identity_file),
                "link": self._link_summary(state.link),
                "emulator": state.emulator,
            },
            "hosts": {
                host.name: {
                    "ssh": host.ssh_alias,
                    "address": host.mgmt_address,
                    "data_address": host.data_address,
                    "netns": host.netns,
                    # Testbed hosts share one filesystem, and every testbed names
                    # its hosts a and b: deploy to a directory of this testbed's own.
                    "labkit_dir": f"~/.labkit/{self.name}-{host.name}",
                    **self._login_keys(state),
                }
                for host in state.hosts.values()
            },
        }
        state.inventory.write_text(
            f"# Inventory of testbed {self.name}, written by labkit testbed up.\n" + tomli_w.dumps(inventory)
        )

    @staticmethod
    def _login_keys(state: TestbedState) -> dict:
        """A host's inventory keys for the login user: its name, and become = "sudo" when it has sudo."""
        if state.login is None:
            return {}
        return {"user": state.login_user, **({"become": "sudo"} if state.login_sudo else {})}

    def _change_sudo(self, state: TestbedState, login: LoginUser | None) -> None:
        """Give the running testbed's login user sudo, or take it away (the sudoers.d directory is shared live)."""
        if login is None or login.sudo == state.login_sudo:
            return
        self.log(f"testbed {self.name}: {login.name} {'gets' if login.sudo else 'loses'} passwordless sudo")
        LoginFiles(state.dir, self.name).set_sudo(login)
        state.login_sudo = login.sudo
        state.save()
        self._write_client_files(state)

    @staticmethod
    def _link_summary(link: LinkConfig) -> dict:
        return {
            "one_way_delay_ms": link.one_way_delay_s * 1e3,
            "rate_mbit": link.rate_bps / 1e6 if link.rate_bps else "none",
            "mtu": link.mtu,
            "cc": link.cc,
        }

    def _change_link(self, state: TestbedState, link: LinkConfig) -> TestbedState:
        wanted_emulator = state.emulator if link.emulator == "auto" else link.emulator
        if wanted_emulator != state.emulator:
            self.log(f"testbed {self.name} uses the {state.emulator} emulator; rebuilding it with {wanted_emulator}")
            self.down(quiet=True)
            return self.up(link, state.login)
        if link == state.link or (
            {**asdict(link), "emulator": ""} == {**asdict(state.link), "emulator": ""}
        ):
            self.log(f"testbed {self.name} is already up: {state.link.describe()}")
            return state
        self.log(f"testbed {self.name} is up; changing its link from {state.link.describe()} to {link.describe()}")
        state.link = link
        state.save()
        self._write_link_file(state)
        if state.emulator == "tun":
            os.kill(state.forwarder_pid, signal.SIGHUP)
        else:
            self._apply_netem(state)
        self._configure_data_link(state)
        self._write_client_files(state)
        return state

    # -- status ------------------------------------------------------------------------
    def health(self, state: TestbedState) -> dict:
        """Which parts are alive; ``problems`` lists what is not."""
        existing = set(ns.list_netns())
        parts: dict[str, bool] = {}
        for host in state.hosts.values():
            parts[f"netns {host.netns}"] = host.netns in existing
            parts[f"sshd on {host.name}"] = _pid_alive(state.sshd_pids.get(host.name))
        if state.emulator == "tun":
            parts["delay line"] = _pid_alive(state.forwarder_pid)
        if len(state.hosts) != len(HOSTS):
            parts["hosts configured"] = False
        return {"parts": parts, "problems": [name for name, ok in parts.items() if not ok]}

    def measure_ping(self, state: TestbedState, count: int = 5, interval: float = 0.2) -> dict:
        """Ping b's data address from a through the emulated link; return the RTT statistics in ms."""
        from labkit.parsers.ping import parse_ping

        a, b = state.hosts["a"], state.hosts["b"]
        timeout = count * interval + 4 * state.link.one_way_delay_s + 5
        # LC_ALL=C: the locale changes ping's decimal separator.
        proc = ns.run(
            ns.exec_argv(a.netns, ["env", "LC_ALL=C", "ping", "-n", "-c", str(count), "-i", str(interval), b.data_address]),
            check=False, timeout=timeout,
        )
        parsed = parse_ping(proc.stdout)
        replies = parsed.rows[parsed.rows["ok"] & ~parsed.rows["duplicate"]]["rtt_ms"] if len(parsed.rows) else []
        return {
            "sent": count,
            "received": len(replies),
            "median_ms": float(replies.median()) if len(replies) else None,
            "mean_ms": parsed.summary.get("rtt_avg_ms"),
            "min_ms": parsed.summary.get("rtt_min_ms"),
            "max_ms": parsed.summary.get("rtt_max_ms"),
        }

    def status(self, measure: bool = True) -> dict:
        state = self.load_state()
        if state is None:
            leftovers = self.existing_namespaces()
            if leftovers and os.geteuid() != 0:
                # Only root brings a testbed up, and its state is root's: this user cannot tell a testbed
                # that runs from one that crashed.
                raise LabkitError(f"testbed {self.name} has namespaces ({', '.join(leftovers)}) but no state this "
                                  f"user can read in {self.state_dir}: run `labkit testbed status --name {self.name}` "
                                  "as root, who brought it up")
            return {"name": self.name, "up": False, "leftovers": leftovers}
        health = self.health(state)
        result = {
            "name": self.name,
            "up": not health["problems"],
            "link": state.link,
            "emulator": state.emulator,
            "hosts": state.hosts,
            "parts": health["parts"],
            "state_dir": str(state.dir),
            "ssh_config": str(state.ssh_config),
            "inventory": str(state.inventory),
            "login": {"user": state.login_user or "root", "sudo": state.login_sudo if state.login_user else None},
        }
        stats_file = state.dir / "delayline-stats.json"
        if stats_file.exists():
            result["delay_line_stats"] = json.loads(stats_file.read_text())
        if measure and result["up"]:
            result["ping"] = self.measure_ping(state)
        return result

    # -- down --------------------------------------------------------------------------
    def down(self, quiet: bool = False) -> list[str]:
        """Remove everything `up` made, even if `up` crashed half way; return what was removed."""
        removed = []
        state = self.load_state()
        namespaces = self.existing_namespaces()
        # Every process inside the namespaces (sshd, login sessions, servers started
        # over SSH) goes first, then the delay line, then the namespaces themselves.
        pids = [pid for netns in namespaces for pid in ns.netns_pids(netns)]
        if state is not None:
            pids += [pid for pid in state.sshd_pids.values() if _pid_alive(pid) and str(state.dir) in " ".join(_cmdline(pid))]
        pids += _forwarder_pids(self.state_dir)
        pids = sorted(set(pids))
        if pids:
            _terminate(pids)
            removed.append(f"{len(pids)} process(es)")
        for netns in namespaces:
            ns.ip("netns", "del", netns, check=False)
            removed.append(f"netns {netns}")
        if state is not None:
            for host in state.hosts.values():
                # Deleting a namespace destroys its end of the veth and so the pair;
                # this catches a root-side veth whose peer never reached its namespace.
                if ns.ip("link", "show", host.root_veth, check=False).returncode == 0:
                    ns.ip("link", "del", host.root_veth, check=False)
                    removed.append(f"link {host.root_veth}")
        if self.state_dir.exists():
            shutil.rmtree(self.state_dir, ignore_errors=True)
            removed.append(f"state {self.state_dir}")
        if not quiet:
            self.log(f"testbed {self.name}: removed " + (", ".join(removed) if removed else "nothing (it was not up)"))
        return removed


def all_testbed_names() -> list[str]:
    """Names of every testbed with state or namespaces on this machine."""
    names = {path.parent.name for path in testbeds_dir().glob("*/state.json")}
    for netns in ns.list_netns():
        if netns.startswith(NETNS_PREFIX) and netns[-2:] in ("-a", "-b"):
            names.add(netns[len(NETNS_PREFIX):-2])
    return sorted(names)


def link_settings(name: str) -> str | None:
    """What a testbed's links are set to (its state file's link parameters, as JSON), or None without the testbed:
    runs compare it at the start and end of their cells, so a link changed mid-run fails the cell it spoiled."""
    try:
        data = json.loads((testbeds_dir() / name / "state.json").read_text())
    except (OSError, ValueError):
        return None
    return json.dumps({key: data.get(key) for key in ("link", "links", "topology", "emulator")}, sort_keys=True)
