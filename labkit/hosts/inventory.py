"""The inventory: which hosts an experiment may use and how to reach them, in TOML.

::

    ssh_config = "~/.ssh/config"        # optional; default ~/.ssh/config
    known_hosts = "~/.ssh/known_hosts"  # optional; default the config's UserKnownHostsFile

    [hosts.client]
    ssh = "gcp-us-central1"       # an ssh_config alias or a hostname; default the table's name
    user = "me"                   # optional overrides of the ssh_config
    port = 22
    identity_file = "~/.ssh/id_ed25519"
    data_address = "10.128.0.7"   # the address peers should use (default: the resolved HostName)
    labkit_dir = "~/.labkit/client"  # where `labkit deploy` puts labkit (default ~/.labkit/NAME)
    python = "python3"            # the host's interpreter for the venv (default python3)
    connect_timeout = 10          # seconds
    become = "sudo"               # run what needs root (sysctl writes, ip route) as `sudo -n -- ARGV`;
                                  # default "none": a host that logs in as root needs nothing

    [hosts.here]
    ssh = "local"                 # this machine, through subprocess
    netns = "labkit-lab-a"        # optionally inside a network namespace

Relative paths are relative to the inventory file. The inventory that
`labkit testbed up` writes also has ``address`` and ``netns`` per host and a
``[testbed]`` table; both are accepted and describe where the hosts came from.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from pathlib import Path

from labkit.errors import LabkitError
from labkit.files import parse_toml, read_text_file
from labkit.hosts.local import LocalHost
from labkit.hosts.privilege import BECOME_VALUES

LOCAL = "local"
DEFAULT_PYTHON = "python3"
_HOST_KEYS = {
    "ssh": str,
    "user": str,
    "port": int,
    "identity_file": str,
    "data_address": str,
    "address": str,
    "netns": str,
    "labkit_dir": str,
    "python": str,
    "connect_timeout": (int, float),
    "become": str,
}


# A host's name names files (raw/iperf3-a-b.json, its default labkit_dir) and cells: no '/', no spaces.
_HOST_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# What a labkit_dir may hold. pip writes the venv's path into the shell wrapper of its console scripts when
# the path has a space or is long (#!/bin/sh ... exec "PATH/python"), where $(...) and `...` would run: a
# path is a path, so anything a shell treats specially is refused, whichever way labkit runs itself.
_SAFE_DIR = re.compile(r"^(?:~(?:/|$))?[A-Za-z0-9._+/-]*$")


def _check_names(where: str, name: str, labkit_dir: str | None) -> None:
    """A host name fit for file names and a labkit_dir no shell would expand: one line naming the problem."""
    if not _HOST_NAME.match(name):
        raise LabkitError(f"{where}: host name {name!r} must be letters, digits, '.', '_' or '-' (at most 64), "
                          "starting with a letter or digit")
    if labkit_dir is None:
        return
    if not _SAFE_DIR.match(labkit_dir):
        bad = sorted({c for c in labkit_dir if not re.match(r"[A-Za-z0-9._+/-]", c)})
        raise LabkitError(f"{where}: hosts.{name}.labkit_dir {labkit_dir!r} has {' '.join(map(repr, bad))}: "
                          "use letters, digits and . _ + - / (and ~/ first)")
    if not labkit_dir.strip("~/."):
        raise LabkitError(f"{where}: hosts.{name}.labkit_dir {labkit_dir!r} would put labkit's files straight into "
                          "that directory; name a directory of its own, e.g. ~/.labkit/" + name)


@dataclass(frozen=True)
class HostEntry:
    """One ``[hosts.NAME]`` table, with defaults filled in."""

    name: str
    ssh: str
    user: str | None = None
    port: int | None = None
    identity_file: str | None = None
    data_address: str | None = None
    address: str | None = None
    netns: str | None = None
    labkit_dir: str = ""
    python: str = DEFAULT_PYTHON
    connect_timeout: float | None = None
    become: str | None = None  # "sudo", or None: run everything as the login user

    @property
    def is_local(self) -> bool:
        return self.ssh == LOCAL


@dataclass
class Inventory:
    """A parsed inventory file."""

    hosts: dict[str, HostEntry]
    path: Path | None = None
    ssh_config: Path | None = None
    known_hosts: Path | None = None
    testbed: dict | None = None
    raw: dict = field(default_factory=dict, repr=False)

    @property
    def names(self) -> list[str]:
        return list(self.hosts)

    def host(self, name: str) -> HostEntry:
        """The entry for ``name``; a clear error lists the known names."""
        try:
            return self.hosts[name]
        except KeyError:
            where = f" {self.path}" if self.path else ""
            raise LabkitError(
                f"no host {name!r} in inventory{where}; known hosts: {', '.join(self.hosts) or 'none'}"
            ) from None

    def open(self, name: str, accept_new_host_keys: bool = False, connect_timeout: float | None = None):
        return open_host(self, name, accept_new_host_keys=accept_new_host_keys, connect_timeout=connect_timeout)

    def peer_address(self, name: str) -> str:
        return peer_address(self, name)


def _resolve(path: str, base: Path | None) -> Path:
    candidate = Path(path).expanduser()
    if not candidate.is_absolute() and base is not None:
        candidate = base / candidate
    return candidate


def parse_inventory(text: str, path: Path | None = None) -> Inventory:
    """Parse inventory TOML ``text``; ``path`` names it in errors and anchors relative paths."""
    where = f"inventory {path}" if path else "inventory"
    data = parse_toml(text, where)
    base = path.parent if path else None
    hosts_table = data.get("hosts")
    if not isinstance(hosts_table, dict) or not hosts_table:
        raise LabkitError(f"{where} has no hosts: add a [hosts.NAME] table per host")
    hosts: dict[str, HostEntry] = {}
    for name, table in hosts_table.items():
        if not isinstance(table, dict):
            raise LabkitError(f"{where}: hosts.{name} must be a table ([hosts.{name}])")
        unknown = sorted(set(table) - set(_HOST_KEYS))
        if unknown:
            raise LabkitError(
                f"{where}: unknown key(s) {', '.join(unknown)} in [hosts.{name}]; "
                f"known keys: {', '.join(_HOST_KEYS)}"
            )
        for key, value in table.items():
            expected = _HOST_KEYS[key]
            if not isinstance(value, expected) or isinstance(value, bool):
                kind = "a number" if expected == (int, float) else ("an integer" if expected is int else "a string")
                raise LabkitError(f"{where}: hosts.{name}.{key} must be {kind}, not {value!r}")
        _check_names(where, name, table.get("labkit_dir"))
        become = table.get("become", "none")
        if become not in BECOME_VALUES:
            raise LabkitError(f"{where}: hosts.{name}.become must be {' or '.join(map(repr, BECOME_VALUES))}, "
                              f"not {become!r}")
        _check_data_address(where, name, table.get("data_address"))
        identity = table.get("identity_file")
        hosts[name] = HostEntry(
            name=name,
            ssh=table.get("ssh", name),
            user=table.get("user"),
            port=table.get("port"),
            identity_file=str(_resolve(identity, base)) if identity else None,
            data_address=table.get("data_address"),
            address=table.get("address"),
            netns=table.get("netns"),
            # Per host name, so hosts sharing one filesystem (the testbed) do not collide.
            labkit_dir=table.get("labkit_dir", f"~/.labkit/{name}"),
            python=table.get("python", DEFAULT_PYTHON),
            connect_timeout=table.get("connect_timeout"),
            become=None if become == "none" else become,
        )
    files = {}
    for key in ("ssh_config", "known_hosts"):
        value = data.get(key)
        if value is not None and not isinstance(value, str):
            raise LabkitError(f"{where}: {key} must be a path string, not {value!r}")
        files[key] = _resolve(value, base) if value else None
    testbed = data.get("testbed") if isinstance(data.get("testbed"), dict) else None
    return Inventory(hosts=hosts, path=path, testbed=testbed, raw=data, **files)


def _check_data_address(where: str, name: str, value: str | None) -> None:
    """A data address is what peers connect to, ping and filter captures by: an IP address, not a name or junk that
    would fail later, in some tool, far from the inventory line that caused it."""
    if value is None:
        return
    try:
        ipaddress.ip_address(value)
    except ValueError:
        raise LabkitError(f"{where}: hosts.{name}.data_address must be an IP address (such as 10.0.0.2), "
                          f"not {value!r}") from None


def load_inventory(path: str | Path) -> Inventory:
    """Read and check an inventory file."""
    path = Path(path).expanduser()
    return parse_inventory(read_text_file(path, "inventory"), path.resolve())


def open_host(
    inventory: Inventory,
    name: str,
    accept_new_host_keys: bool = False,
    connect_timeout: float | None = None,
):
    """A host object for ``name``: :class:`SSHHost`, or :class:`LocalHost` for ``ssh = "local"``.

    Nothing connects until the host's first command.
    """
    entry = inventory.host(name)
    if entry.is_local:
        return LocalHost(name, netns=entry.netns, become=entry.become)
    from labkit.hosts.ssh import SSHHost

    return SSHHost(
        name,
        ssh=entry.ssh,
        ssh_config=inventory.ssh_config,
        known_hosts=inventory.known_hosts,
        user=entry.user,
        port=entry.port,
        identity_file=entry.identity_file,
        accept_new_host_keys=accept_new_host_keys,
        connect_timeout=connect_timeout or entry.connect_timeout,
        become=entry.become,
    )


def peer_address(inventory: Inventory, name: str) -> str:
    """The address other hosts should use to reach ``name``: its data_address, else its SSH HostName."""
    entry = inventory.host(name)
    if entry.data_address:
        return entry.data_address
    if entry.is_local:
        return "127.0.0.1"
    return open_host(inventory, name).hostname
