"""The local testbed: network namespaces joined by emulated WAN links, each with its own sshd.

Layout of testbed NAME with index N (allocated so several testbeds coexist), hosts a and b
by default or those of a topology file (up to 16, host i at position i)::

    root ns ── lkNa (198.19.N.1/30) ══ mgmt0 (198.19.N.2) ── ns labkit-NAME-a ── lkdata 198.18.N.1
    root ns ── lkNb (198.19.N.5/30) ══ mgmt0 (198.19.N.6) ── ns labkit-NAME-b ── lkdata 198.18.N.2
              data links: lkdata(a) ⇄ labkit-go link ⇄ lkdata(b) ⇄ ... (every pair, each direction its own)

The management veths carry SSH with no added delay; experiments use the data
addresses, whose traffic crosses the link emulator (:mod:`labkit.testbed.datapath`).
All addresses are in the RFC 2544 benchmarking range 198.18.0.0/15.

State lives in ``$LABKIT_STATE_HOME/testbeds/NAME`` (default
``~/.local/state/labkit``): ``state.json`` (what `up` built), ``link.json`` (read by the
emulator), ``link-stats.jsonl`` and ``link-status.json`` (what it exports), ``ssh_config``,
``known_hosts``, the client key and ``inventory.toml``.

The hosts log in as root, or (``--login-user NAME``) as a user that exists
only inside the testbed's sshds, with or without passwordless sudo, so the
testbed plays a cloud VM; see :mod:`labkit.testbed.login`.

A host may run in a root filesystem of another Debian release (a topology's
``root = "bullseye"``, or ``--host-root b=bullseye``): its sshd, and all that runs
over SSH, is then chrooted into its own copy-on-write view of a cached minbase root
(:mod:`labkit.testbed.rootfs`, :class:`labkit.testbed.sshd.HostRoot`), kept in
``STATE/roots/HOST`` until `down`.
"""

from __future__ import annotations

import dataclasses
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
from labkit.parsers.ping import parse_ping
from labkit.testbed import datapath, emulator, health, rootfs, sshd
from labkit.testbed import netns as ns
from labkit.testbed import schedule as sched
from labkit.testbed.datapath import DATA_IFNAME
from labkit.testbed.health import MGMT_IFNAME, Fault
from labkit.testbed.linkspec import LinkSpec
from labkit.testbed.login import LoginFiles, LoginUser
from labkit.testbed.topology import Topology

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,15}$")
NETNS_PREFIX = "labkit-"
CONGESTION_CONTROLS = ("cubic", "bbr", "reno")
#: "auto" and "tun" are the same thing now: the user-space emulator, on any kernel.
EMULATORS = ("auto", "tun")
EMULATOR = "labkit-go link"
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
class LinkConfig(LinkSpec):
    """What `testbed up` accepts: every link's defaults (:class:`LinkSpec`) and the testbed-wide settings."""

    mtu: int = 1460
    cc: str = "cubic"
    emulator: str = "auto"
    seed: int = 1  # of the emulator's random decisions: the same seed, the same draws for the same packets

    def describe(self) -> str:
        return f"{super().describe()}, MTU {self.mtu}, congestion control {self.cc}"

    def validate(self) -> None:
        if not 0 <= self.one_way_delay_s <= 10:
            raise LabkitError(f"one-way delay must be between 0 and 10 s, not {self.one_way_delay_s:g} s")
        if not 576 <= self.mtu <= 65535:
            raise LabkitError(f"MTU must be between 576 and 65535, not {self.mtu}")
        if self.cc not in CONGESTION_CONTROLS:
            raise LabkitError(f"congestion control must be one of {', '.join(CONGESTION_CONTROLS)}")
        if self.emulator == "netem":
            raise LabkitError("the testbed's links are labkit's own emulator (labkit-go link, on any kernel); "
                              "there is no netem emulator")
        if self.emulator not in EMULATORS:
            raise LabkitError(f"emulator must be one of {', '.join(EMULATORS)}")
        if not isinstance(self.seed, int) or not 0 <= self.seed < 2**32:
            raise LabkitError(f"the seed must be a whole number from 0 to 2^32-1, not {self.seed!r}")


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
    forwarder_pid: int | None = None  # the link emulator's
    sshd_pids: dict[str, int] = field(default_factory=dict)
    created_utc: str = ""
    login_user: str | None = None  # None: the hosts log in as root
    login_sudo: bool = False
    login_uid: int | None = None
    topology: Topology = field(default_factory=Topology)
    schedule: list[dict] = field(default_factory=list)  # schedule.Change records
    schedule_origin_utc_ns: int = 0  # when the schedule's times count from
    generation: int = 0  # of the emulator's config
    # host -> its root (release, architecture, the cached root, its own tree and whether that is an overlay or a copy)
    roots: dict[str, dict] = field(default_factory=dict)

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

    def direction_specs(self) -> dict[str, LinkSpec]:
        """Each direction (``a>b``) with its parameters."""
        return datapath.direction_specs(self)

    def save(self) -> None:
        data = asdict(self)
        data["topology"] = self.topology.to_dict()
        tmp = self.dir / "state.json.tmp"
        tmp.write_text(json.dumps(data, indent=2))
        os.replace(tmp, self.dir / "state.json")

    @classmethod
    def load(cls, state_dir: Path) -> "TestbedState":
        data = json.loads((state_dir / "state.json").read_text())
        data["link"] = LinkConfig(**data["link"])
        data["hosts"] = {key: HostInfo(**value) for key, value in data["hosts"].items()}
        data["topology"] = Topology.from_dict(data.get("topology"))
        return cls(**data)


def validate_name(name: str) -> str:
    if not NAME_RE.match(name):
        raise LabkitError(f"testbed name {name!r} must be 1-16 characters of a-z, 0-9 and '-'")
    return name


def netns_name(name: str, host: str) -> str:
    return f"{NETNS_PREFIX}{name}-{host}"


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
        mine = re.compile(re.escape(f"{NETNS_PREFIX}{self.name}-") + r"[a-z][a-z0-9]{0,7}")
        return [name for name in ns.list_netns() if mine.fullmatch(name)]

    def _allocate_index(self) -> int:
        taken = set()
        for other in testbeds_dir().glob("*/state.json"):
            if other.parent.name == self.name:
                continue
            try:
                taken.add(json.loads(other.read_text())["index"])
            except (OSError, ValueError, KeyError):
                continue
        # Root-side veth names embed the index (lk<index><host>, hosts start with a letter).
        links = set(re.findall(r"^\d+: lk(\d+)[a-z]", ns.ip("-o", "link", "show").stdout, re.MULTILINE))
        for index in range(MAX_INDEX):
            if index not in taken and str(index) not in links:
                return index
        raise LabkitError(f"all {MAX_INDEX} testbed slots are in use; run `labkit testbed down --all`")

    # -- up --------------------------------------------------------------------------
    def up(self, link: LinkConfig, login: LoginUser | None = None, topology: Topology | None = None,
           schedule: list | None = None) -> TestbedState:
        """Create the testbed, or bring an existing one to these links, schedule and login user.

        ``topology``: the hosts and per-link parameters (default hosts a and b, every link
        ``link``); ``schedule``: :class:`labkit.testbed.schedule.Change` list, its times from now.
        """
        link.validate()
        topology = topology or Topology()
        changes = list(schedule or [])
        sched.check_links(changes, topology.hosts)
        # Every link value is checked (and every trace read) before anything is looked at or built.
        datapath.build_config(self._with_hosts(TestbedState(
            name=self.name, index=0, link=link, emulator=EMULATOR, state_dir=str(self.state_dir), topology=topology,
            schedule=sched.to_records(changes))), 0)
        ns.check_can_host_testbed()
        if login is not None:
            login.validate()
            if topology.roots:
                raise LabkitError("--login-user and host roots do not go together yet: the login user is added to "
                                  "this machine's /etc, not to a host root's")
        # Built (minutes on a cold cache) or found before the lock: other testbeds need not wait for a debootstrap.
        lowers = {host: rootfs.ensure_root(rootfs.RootSpec.parse(root), self.log)
                  for host, root in topology.roots.items()}
        testbeds_dir().mkdir(parents=True, exist_ok=True)
        with open(testbeds_dir() / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            state = self.load_state()
            if state is not None:
                faults = self.health(state)["faults"]
                same_hosts = state.topology.hosts == topology.hosts and state.topology.roots == topology.roots
                if all(f.repairable for f in faults) and same_hosts and state.login_user == (login.name if login else None):
                    # A flapped device or a lost route is put back in place; the hosts' processes live on.
                    self._repair_in_place(state, faults)
                    self._change_sudo(state, login)
                    return self._change_link(state, link, topology, changes)
                problems = [fault.text for fault in faults]
                self.log(self._rebuild_reason(state, problems, topology, login))
                self.down(quiet=True)
            elif self.existing_namespaces():
                self.log(f"testbed {self.name} has leftovers from a crash; removing them first")
                self.down(quiet=True)
            return self._create(link, login, topology, changes, lowers)

    def change_links(self, links: dict[str, dict], record=None) -> dict[str, dict]:
        """Set some directions' link parameters (``{"a>b": {"queue": "10bdp", "aqm": "droptail"}}``) on the running
        testbed, in place: its hosts and their processes live on, the emulator reloads. Returns the topology's
        per-link overrides as they were, to put back with :meth:`restore_links`. ``record(before, after)`` is
        called with the overrides as they were and as they will be before the emulator takes the change (a run
        keeps both in its manifest, for `labkit runs cleanup` after a SIGKILL)."""
        with open(testbeds_dir() / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            state = self.load_state()
            if state is None:
                raise LabkitError(f"testbed {self.name} is not up")
            before = {key: dict(value) for key, value in state.topology.links.items()}
            merged = {key: dict(value) for key, value in before.items()}
            for key, values in links.items():
                merged[key] = {**merged.get(key, {}), **values}
            if record is not None:
                record(before, merged)
            topology = dataclasses.replace(state.topology, links=merged)
            self._change_link(state, state.link, topology, sched.from_records(state.schedule))
        return before

    def restore_links(self, links: dict[str, dict], own: list[dict] | None = None, check_only: bool = False) -> None:
        """Put the per-link overrides :meth:`change_links` returned back in place. With ``own`` (the overrides a run
        set), only from one of them: overrides now neither ``links`` nor one of ``own`` are someone else's change,
        left as they are (:class:`LinksChanged`); ``check_only`` checks that alone."""
        with open(testbeds_dir() / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            state = self.load_state()
            if state is None:  # taken down since: nothing of its links is left to put back
                return
            now = state.topology.links
            if now == links:
                return
            if own is not None and now not in own:
                raise LinksChanged(f"testbed {self.name}'s links are now {json.dumps(now, sort_keys=True)[:120]}, "
                                   f"neither the {json.dumps(links, sort_keys=True)[:120]} recorded before the run nor "
                                   "what it set; left as they are")
            if not check_only:
                topology = dataclasses.replace(state.topology, links=links)
                self._change_link(state, state.link, topology, sched.from_records(state.schedule))

    def _rebuild_reason(self, state: TestbedState, problems: list[str], topology: Topology, login) -> str:
        if problems:
            return f"testbed {self.name} is broken ({'; '.join(problems)}); rebuilding it"
        if state.topology.hosts != topology.hosts:
            return (f"testbed {self.name} has hosts {', '.join(state.topology.hosts)}; rebuilding it with "
                    f"{', '.join(topology.hosts)}")
        if state.topology.roots != topology.roots:
            return (f"testbed {self.name}'s hosts run in roots {state.topology.roots or 'of this machine'}; "
                    f"rebuilding it with {topology.roots or 'this machine'}")
        return (f"testbed {self.name} logs in as {state.login_user or 'root'}; rebuilding it for "
                f"{login.name if login else 'root'}")

    def _create(self, link: LinkConfig, login: LoginUser | None, topology: Topology, changes: list,
                lowers: dict[str, Path] | None = None) -> TestbedState:
        state = TestbedState(
            name=self.name,
            index=self._allocate_index(),
            link=link,
            emulator=EMULATOR,
            state_dir=str(self.state_dir),
            created_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            login_user=login.name if login else None,
            login_sudo=bool(login and login.sudo),
            topology=topology,
            schedule=sched.to_records(changes),
            schedule_origin_utc_ns=time.time_ns(),
        )
        self.state_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.state_dir, 0o700)
        state.save()
        try:
            self._build(state, lowers or {})
        except BaseException:
            # Never leave half a testbed behind: a failed or interrupted `up` undoes itself.
            self.down(quiet=True)
            raise
        return state

    def _with_hosts(self, state: TestbedState) -> TestbedState:
        """``state`` with its hosts' names and addresses filled in (nothing is created)."""
        index = state.index
        for position, host in enumerate(state.topology.hosts):
            base = 4 * position
            state.hosts[host] = HostInfo(
                name=host,
                netns=netns_name(self.name, host),
                ssh_alias=f"{self.name}-{host}",
                mgmt_address=f"198.19.{index}.{base + 2}",
                root_veth=f"lk{index}{host}",
                root_address=f"198.19.{index}.{base + 1}",
                data_address=f"198.18.{index}.{position + 1}",
            )
        return state

    def _build(self, state: TestbedState, lowers: dict[str, Path]) -> None:
        for info in self._with_hosts(state).hosts.values():
            netns = info.netns
            ns.ip("netns", "add", netns)
            ns.ip("link", "set", "lo", "up", netns=netns)
            # No IPv6 on the devices made from here on: the data link carries IPv4 only, and
            # router solicitations would only be counted as unroutable.
            ns.run(ns.exec_argv(netns, ["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"]))
            ns.ip("link", "add", info.root_veth, "type", "veth", "peer", "name", MGMT_IFNAME, "netns", netns)
            self._configure_mgmt_link(info)
        state.save()
        state.generation = 1
        datapath.write_config(state, datapath.build_config(state, state.generation))
        state.forwarder_pid = datapath.start(state)
        state.save()
        self._configure_data_link(state)
        self._start_sshds(state, lowers)
        state.save()
        self._write_client_files(state)

    @staticmethod
    def _configure_mgmt_link(info: HostInfo) -> None:
        # "replace", not "add": repair reruns these steps over a veth that may still hold its addresses.
        ns.ip("addr", "replace", f"{info.root_address}/30", "dev", info.root_veth)
        ns.ip("link", "set", info.root_veth, "up")
        ns.ip("addr", "replace", f"{info.mgmt_address}/30", "dev", MGMT_IFNAME, netns=info.netns)
        ns.ip("link", "set", MGMT_IFNAME, "up", netns=info.netns)

    def _configure_data_link(self, state: TestbedState) -> None:
        for local in state.hosts.values():
            ns.ip("addr", "replace", f"{local.data_address}/32", "dev", DATA_IFNAME, netns=local.netns)
            ns.ip("link", "set", DATA_IFNAME, "mtu", str(state.link.mtu), "txqueuelen", str(TUN_TXQUEUELEN), "up",
                  netns=local.netns)
            for peer in state.hosts.values():
                if peer is not local:
                    self._set_route(state, local, peer)

    def _set_route(self, state: TestbedState, local: HostInfo, peer: HostInfo) -> None:
        # Inside a namespace the sysctl may only choose the globally allowed
        # algorithms (often "reno bbr"); a per-route congctl works for any loaded one.
        ns.ip(
            "route", "replace", f"{peer.data_address}/32", "dev", DATA_IFNAME,
            "src", local.data_address, "congctl", state.link.cc,
            netns=local.netns,
        )

    def _host_root(self, state: TestbedState, host: HostInfo, lower: Path, host_dir: Path) -> sshd.HostRoot:
        """The host's own tree of the cached root ``lower``, its keys and sshd_config at the path its sshd sees them
        (``host_dir`` under the root's /run), recorded in the state."""
        started = time.monotonic()
        root, mode = rootfs.host_tree(lower, state.dir / "roots" / host.name, host_dir, f"{self.name}-{host.name}")
        spec = rootfs.RootSpec.parse(state.topology.roots[host.name])
        state.roots[host.name] = {"release": spec.suite, "debian": rootfs.RELEASES[spec.suite]["version"],
                                  "arch": spec.arch, "lower": str(lower), "tree": root.tree, "mode": mode,
                                  "mounts": f"labkit-*-{root.tag}",
                                  "prepare_s": round(time.monotonic() - started, 3)}
        return root

    def _start_sshds(self, state: TestbedState, lowers: dict[str, Path] | None = None) -> None:
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
            root = None
            if host.name in (lowers or {}):
                # A root's sshd sees only its own tree: its keys and config through the host directory's mount.
                root = self._host_root(state, host, lowers[host.name], host_dir)
                shutil.copy2(authorized, host_dir / "authorized_keys")
                inside = Path(root.keys_inside)
                keys = {"host_key": inside / host_key.name, "authorized_keys": inside / "authorized_keys"}
            else:
                keys = {"host_key": host_key, "authorized_keys": authorized}
            sshd.write_sshd_config(
                config, **keys, listen=[host.mgmt_address, host.data_address], login_user=state.login_user,
            )
            state.sshd_pids[host.name] = sshd.start_sshd(
                host.netns, Path(root.keys_inside) / config.name if root else config, host_dir / "sshd.log", binds,
                root)
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
                # Runs on this inventory record the emulator's summary for their time window from here.
                "state_dir": str(state.dir),
                "link_stats": str(state.dir / emulator.STATS_FILE),
                "links": {key: spec.describe() for key, spec in state.direction_specs().items()},
                **({"topology": state.topology.source} if state.topology.source else {}),
                # The hosts that run in a root of their own, and which: a run's manifest keeps this table.
                **({"roots": {name: {key: value for key, value in root.items() if key != "prepare_s"}
                              for name, root in state.roots.items()}} if state.roots else {}),
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
            "seed": link.seed,
            "describe": link.describe(),
        }

    def _change_link(self, state: TestbedState, link: LinkConfig, topology: Topology, changes: list) -> TestbedState:
        records = sched.to_records(changes)
        same = ({**asdict(link), "emulator": ""} == {**asdict(state.link), "emulator": ""}
                and topology.links == state.topology.links and records == state.schedule)
        if same:
            self.log(f"testbed {self.name} is already up: {state.link.describe()}")
            return state
        updated = dataclasses.replace(state, link=link, topology=topology, schedule=records,
                                      generation=state.generation + 1)
        if records != state.schedule:
            updated.schedule_origin_utc_ns = time.time_ns()
        config = datapath.build_config(updated, updated.generation)  # checks every value first
        self.log(f"testbed {self.name} is up; changing its links from {state.link.describe()} to {link.describe()}"
                 + (f" ({len(changes)} scheduled change(s) from now)" if records != state.schedule and changes else ""))
        datapath.write_config(updated, config)
        datapath.reload(updated, updated.generation)
        updated.save()
        self._configure_data_link(updated)
        self._write_client_files(updated)
        return updated

    # -- status ------------------------------------------------------------------------
    def health(self, state: TestbedState) -> dict:
        """Which parts are alive, and every fault against what `up` made (:mod:`labkit.testbed.health`): ``problems``
        says each in one line, ``faults`` also whether :meth:`repair` can fix it in place."""
        existing = set(ns.list_netns())
        parts: dict[str, bool] = {}
        faults: list[Fault] = []
        for host in state.hosts.values():
            parts[f"netns {host.netns}"] = host.netns in existing
            parts[f"sshd on {host.name}"] = _pid_alive(state.sshd_pids.get(host.name))
            if not parts[f"sshd on {host.name}"]:
                faults.append(Fault(f"{host.name}: its sshd (pid {state.sshd_pids.get(host.name)}) is not running",
                                    repairable=False))
        parts["link emulator"] = _pid_alive(state.forwarder_pid)
        if not parts["link emulator"]:
            faults.append(Fault(f"the link emulator (pid {state.forwarder_pid}) is not running", repairable=False))
        if len(state.hosts) != len(state.topology.hosts):
            parts["hosts configured"] = False
            faults.append(Fault("not every host of the topology was configured", repairable=False))
        # Without the emulator its devices are gone from every namespace: that one fault says it all.
        found = health.gather(state, existing, sshd.SSH_PORT) if parts["link emulator"] else []
        for host in state.hosts.values():
            parts[f"devices and routes of {host.name}"] = not any(f.text.startswith(f"{host.name}") for f in found)
        faults += found
        return {"parts": parts, "problems": [fault.text for fault in faults], "faults": faults}

    def repair(self) -> TestbedState:
        """Put back what :meth:`health` finds missing from a running testbed (addresses, routes, devices set down) with
        the very steps `up` made them with; raise LabkitError when only a rebuild can (a namespace, device or process
        gone)."""
        ns.check_can_host_testbed()
        testbeds_dir().mkdir(parents=True, exist_ok=True)  # where the lock lives, even before any testbed
        with open(testbeds_dir() / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            state = self.load_state()
            if state is None:
                raise LabkitError(f"testbed {self.name} is not up; bring it up with `labkit testbed up --name {self.name}`")
            faults = self.health(state)["faults"]
            if not faults:
                self.log(f"testbed {self.name} is healthy; nothing to repair")
            self._repair_in_place(state, faults)
            return state

    def _repair_in_place(self, state: TestbedState, faults: list[Fault]) -> None:
        if not faults:
            return
        fatal = [fault.text for fault in faults if not fault.repairable]
        if fatal:
            raise LabkitError(f"testbed {self.name} cannot be repaired in place ({'; '.join(fatal)}): rebuild it with "
                              f"`labkit testbed down --name {self.name}` and `labkit testbed up --name {self.name} ...`")
        self.log(f"testbed {self.name}: repairing {'; '.join(fault.text for fault in faults)}")
        for host in state.hosts.values():
            self._configure_mgmt_link(host)
        self._configure_data_link(state)
        left = self.health(state)["problems"]
        if left:
            raise LabkitError(f"testbed {self.name} is still broken after repair: {'; '.join(left)}")

    def measure_ping(self, state: TestbedState, count: int = 5, interval: float = 0.2) -> dict:
        """Ping every other host's data address from the first host; RTT statistics in ms per peer (a→b: ...)."""
        first, *others = state.hosts.values()
        longest = max((spec.one_way_delay_s for spec in state.direction_specs().values()), default=0)
        timeout = count * interval + 4 * longest + 5
        # LC_ALL=C: the locale changes ping's decimal separator. The peers are pinged at once.
        procs = {peer.name: subprocess.Popen(
            ns.exec_argv(first.netns, ["env", "LC_ALL=C", "ping", "-n", "-c", str(count), "-i", str(interval),
                                       peer.data_address]),
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) for peer in others}
        results = {}
        for peer, proc in procs.items():
            try:
                out, _ = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, _ = proc.communicate()
            parsed = parse_ping(out)
            rows = parsed.rows
            replies = rows[rows["ok"] & ~rows["duplicate"]]["rtt_ms"] if len(rows) else []
            results[f"{first.name}>{peer}"] = {
                "sent": count, "received": len(replies),
                "median_ms": float(replies.median()) if len(replies) else None,
                "mean_ms": parsed.summary.get("rtt_avg_ms"), "min_ms": parsed.summary.get("rtt_min_ms"),
                "max_ms": parsed.summary.get("rtt_max_ms"),
            }
        return results

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
        exported = emulator.read_status(state.dir) or {}
        result = {
            "name": self.name,
            "up": not health["problems"],
            "link": state.link,
            "emulator": state.emulator,
            "hosts": state.hosts,
            "parts": health["parts"],
            "problems": health["problems"],
            # Each fault's own fix: repair for what `up` can put back in place, else a rebuild.
            "repairable": all(fault.repairable for fault in health["faults"]),
            "state_dir": str(state.dir),
            "ssh_config": str(state.ssh_config),
            "inventory": str(state.inventory),
            "login": {"user": state.login_user or "root", "sudo": state.login_sudo if state.login_user else None},
            "links": self._links_status(state, exported),
            "send_stamps": exported.get("send_stamps") or {},
            "schedule": {"origin_utc_ns": state.schedule_origin_utc_ns, "changes": state.schedule},
            "topology": state.topology.source,
        }
        if measure and result["up"]:
            pings = self.measure_ping(state)
            result["pings"] = pings
            result["ping"] = next(iter(pings.values()))  # the first pair's, as before several hosts
        return result

    @staticmethod
    def _links_status(state: TestbedState, exported: dict) -> dict:
        """Each direction: its parameters as given, and what the emulator reports in ``exported`` (its status file:
        counters, lateness, queue)."""
        links = {}
        for key, spec in state.direction_specs().items():
            now = exported.get("directions", {}).get(key, {})
            links[key] = {"describe": spec.describe(), "totals": now.get("totals"),
                          "lateness_us": now.get("lateness_us"), "backlog_packets": now.get("backlog_packets"),
                          "partition": (now.get("params") or {}).get("partition")}
        return links

    # -- down --------------------------------------------------------------------------
    def down(self, quiet: bool = False) -> list[str]:
        """Remove everything `up` made, even if `up` crashed half way; return what was removed."""
        removed = []
        state = self.load_state()
        namespaces = self.existing_namespaces()
        # Every process inside the namespaces (sshd, login sessions, servers started
        # over SSH) goes first, then the emulator, then the namespaces themselves.
        pids = [pid for netns in namespaces for pid in ns.netns_pids(netns)]
        if state is not None:
            pids += [pid for pid in state.sshd_pids.values() if _pid_alive(pid) and str(state.dir) in " ".join(_cmdline(pid))]
        pids += datapath.emulator_pids(self.state_dir)
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


_NETNS_RE = re.compile(re.escape(NETNS_PREFIX) + r"(.+)-([a-z][a-z0-9]{0,7})")


def all_testbed_names() -> list[str]:
    """Names of every testbed with state or namespaces on this machine."""
    names = {path.parent.name for path in testbeds_dir().glob("*/state.json")}
    for netns in ns.list_netns():
        if match := _NETNS_RE.fullmatch(netns):
            names.add(match.group(1))
    return sorted(names)


class LinksChanged(LabkitError):
    """A testbed's per-link overrides are not what a run recorded before it changed them, nor what it set."""


def link_settings(name: str) -> str | None:
    """What a testbed's links are set to (its state file's link parameters, as JSON), or None without the testbed:
    runs compare it at the start and end of their cells, so a link changed mid-run fails the cell it spoiled."""
    try:
        data = json.loads((testbeds_dir() / name / "state.json").read_text())
    except (OSError, ValueError):
        return None
    return json.dumps({key: data.get(key) for key in ("link", "links", "topology", "emulator")}, sort_keys=True)
