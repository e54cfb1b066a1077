"""The inventory format and the pure parts of `hosts check`; no hosts needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from labkit.errors import LabkitError
from labkit.hosts import LocalHost, load_inventory, open_host, peer_address
from labkit.hosts.inventory import parse_inventory
from labkit.hosts.ssh import SSHHost, _parse_jump, remote_command, remote_path


def test_defaults_and_relative_paths(tmp_path: Path):
    (tmp_path / "ssh_config").write_text("Host far\n    HostName 198.18.77.1\n    User alice\n    Port 2222\n")
    inventory_file = tmp_path / "inv.toml"
    inventory_file.write_text(
        'ssh_config = "ssh_config"\nknown_hosts = "kh"\n'
        '[hosts.far]\nidentity_file = "keys/id"\n'
        '[hosts.near]\nssh = "far"\nuser = "bob"\nport = 22\ndata_address = "198.18.77.9"\n'
        'labkit_dir = "/opt/lk"\npython = "/usr/bin/python3.11"\n'
    )
    inv = load_inventory(inventory_file)
    far, near = inv.host("far"), inv.host("near")
    assert (far.ssh, far.labkit_dir, far.python) == ("far", "~/.labkit/far", "python3")
    assert far.identity_file == str(tmp_path / "keys" / "id")
    assert inv.ssh_config == tmp_path / "ssh_config" and inv.known_hosts == tmp_path / "kh"
    assert (near.labkit_dir, near.python) == ("/opt/lk", "/usr/bin/python3.11")
    # The ssh_config supplies what the inventory leaves out; the inventory overrides the rest.
    host = open_host(inv, "far")
    assert isinstance(host, SSHHost)
    assert (host.hostname, host.user, host.port, host.known_hosts) == ("198.18.77.1", "alice", 2222, tmp_path / "kh")
    assert host.identity_files[0] == str(tmp_path / "keys" / "id")
    near_host = open_host(inv, "near")
    assert (near_host.user, near_host.port) == ("bob", 22)
    assert peer_address(inv, "far") == "198.18.77.1"  # no data_address: the resolved HostName
    assert peer_address(inv, "near") == "198.18.77.9"


def test_local_kind():
    inv = parse_inventory('[hosts.here]\nssh = "local"\nnetns = "labkit-x-a"\n')
    host = open_host(inv, "here")
    assert isinstance(host, LocalHost) and host.netns == "labkit-x-a"
    assert peer_address(inv, "here") == "127.0.0.1"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('ssh_config = "x"\n[hosts.a]\nssh = \n', "line 3"),
        ("[hosts.a]\nport = 22\n[hosts.a]\n", "line 3"),
        ('ssh_config = "x"\n', "no hosts"),
        ('[hosts.a]\nssh = "x"\nsssh = "y"\n', "unknown key(s) sssh in [hosts.a]"),
        ('[hosts.a]\nport = "22"\n', "hosts.a.port must be an integer"),
        ("[hosts]\na = 1\n", "hosts.a must be a table"),
        ('[hosts.a]\ndata_address = "b.example.org"\n', "hosts.a.data_address must be an IP address"),
        ('[hosts.a]\ndata_address = "198.18.0.300"\n', "hosts.a.data_address must be an IP address"),
        ('[hosts.a]\ndata_address = "198.18.0.2 -f"\n', "not '198.18.0.2 -f'"),
    ],
)
def test_bad_inventory_is_one_clear_line(text, message):
    with pytest.raises(LabkitError) as caught:
        parse_inventory(text, Path("/x/inv.toml"))
    assert message in caught.value.message
    assert "\n" not in caught.value.message


def test_unknown_host_lists_the_known_ones():
    inv = parse_inventory("[hosts.a]\n[hosts.b]\n", Path("/x/inv.toml"))
    with pytest.raises(LabkitError, match=r"no host 'c' in inventory /x/inv.toml; known hosts: a, b"):
        inv.host("c")


def test_remote_command_quotes_every_word():
    command = remote_command(["printf", "%s\n", "a b", "$(x)", "it's"])
    assert command == (
        "sh -c 'echo LABKIT_PID=$$; PATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin exec \"$@\" </dev/null' sh env LC_ALL=C printf '%s\n' 'a b' '$(x)' 'it'\"'\"'s'"
    )
    assert remote_path("~/.labkit/a") == ".labkit/a" and remote_path("/abs") == "/abs" and remote_path("~") == "."


def test_jump_specs():
    assert _parse_jump("gw") == ("gw", None, None)
    assert _parse_jump("me@gw:2222") == ("gw", "me", 2222)
    assert _parse_jump("ssh://me@[2001:db8::1]:22") == ("2001:db8::1", "me", 22)


def test_a_data_address_that_is_no_address_is_refused_by_a_command_in_one_line(tmp_path):
    """Issue 23: a non-IP data_address was taken and failed later, in whichever tool used it first."""
    from conftest import labkit

    inventory = tmp_path / "inventory.toml"
    inventory.write_text('[hosts.here]\nssh = "local"\n[hosts.peer]\nssh = "local"\ndata_address = "peer.lan"\n')
    proc = labkit("hosts", "check", str(inventory), timeout=60)
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"labkit: error: inventory {inventory}: hosts.peer.data_address must be an IP address (such as 10.0.0.2), not 'peer.lan'"]
