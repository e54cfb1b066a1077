"""SSHHost and `labkit hosts check` against the real sshds of a testbed of our own.

Host a and b are network namespaces with their own sshd; SSH to them goes over
the management veths, and ProxyJump hops cross the delayed data link.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shlex
import shutil
import subprocess
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import LABKIT, labkit, own_testbed
from labkit.errors import LabkitError
from labkit.hosts import SSHHost, load_inventory, open_host
from labkit.hosts.ssh import HostKeyRejected

pytestmark = pytest.mark.testbed


@pytest.fixture(scope="module")
def lab():
    with own_testbed("h3-ssh", 0.005) as state:
        yield state


def host_a(lab, **kwargs) -> SSHHost:
    return SSHHost("a", ssh=lab.hosts["a"].ssh_alias, ssh_config=lab.ssh_config, **kwargs)


def key_of(lab, host: str) -> str:
    """The ``type base64`` of a testbed host's key, from the known_hosts the testbed wrote."""
    for line in lab.known_hosts.read_text().splitlines():
        names, key_type, blob = line.split()
        if lab.hosts[host].mgmt_address in names.split(","):
            return f"{key_type} {blob}"
    raise AssertionError(f"no key for {host} in {lab.known_hosts}")


def processes_with(marker: str) -> list[int]:
    """Pids of every process on this machine whose argv contains ``marker`` (namespaces share the pid space)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if marker.encode() in argv:
                found.append(int(entry.name))
    return found


# -- host keys --------------------------------------------------------------------------------
def test_unknown_host_key_is_refused_then_recorded_on_request(lab, tmp_path, caplog):
    known = tmp_path / "known_hosts"
    with host_a(lab, known_hosts=known) as strict:
        with pytest.raises(HostKeyRejected) as caught:
            strict.run(["true"])
    message = caught.value.message
    assert "not in" in message and str(known) in message and "--accept-new-host-keys" in message
    assert not known.exists(), "a refused key must not be recorded"

    with caplog.at_level(logging.WARNING, logger="labkit.hosts.ssh"):
        with host_a(lab, known_hosts=known, accept_new_host_keys=True) as accepting:
            assert accepting.run(["true"]).ok
    recorded = known.read_text().split()
    assert recorded[0] == lab.hosts["a"].mgmt_address
    assert " ".join(recorded[1:]) == key_of(lab, "a")
    assert any("recorded new host key" in record.getMessage() and str(known) in record.getMessage()
               for record in caplog.records)

    # Now known: strict checking accepts it.
    with host_a(lab, known_hosts=known) as strict_again:
        assert strict_again.run(["true"]).ok


def test_changed_host_key_is_always_refused(lab, tmp_path):
    known = tmp_path / "known_hosts"
    # b's real key recorded under a's address: exactly what a reinstalled or impostor host looks like.
    known.write_text(f"{lab.hosts['a'].mgmt_address} {key_of(lab, 'b')}\n")
    before = known.read_text()
    for accept in (False, True):
        with host_a(lab, known_hosts=known, accept_new_host_keys=accept) as host:
            with pytest.raises(HostKeyRejected) as caught:
                host.run(["true"])
        message = caught.value.message
        assert "does not match" in message and str(known) in message and "ssh-keygen -R" in message
        assert message.startswith("a: ")
    assert known.read_text() == before


def test_known_hosts_markers_are_honoured_as_openssh_does(lab, tmp_path):
    """Issue 15: a valid @cert-authority or @revoked line made paramiko's reader raise; @revoked was not honoured."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "ca")], check=True)
    ca = " ".join((tmp_path / "ca.pub").read_text().split()[:2])
    address, key = lab.hosts["a"].mgmt_address, key_of(lab, "a")
    known = tmp_path / "known_hosts"

    # A CA line for other hosts does not stop the plain key of this one from being trusted.
    known.write_text(f"@cert-authority *.example.org {ca}\n{address} {key}\n")
    with host_a(lab, known_hosts=known) as host:
        assert host.run(["true"]).ok

    # A CA line is not the host's key: paramiko checks keys, not host certificates, and says so.
    known.write_text(f"@cert-authority {address} {ca}\n")
    with host_a(lab, known_hosts=known) as host, pytest.raises(HostKeyRejected) as caught:
        host.run(["true"])
    assert "line 1 trusts a certificate authority for it" in caught.value.message

    # A revoked key is refused even where another line lists it, and never recorded.
    known.write_text(f"{address} {key}\n@revoked * {key}\n")
    before = known.read_text()
    for accept in (False, True):
        with host_a(lab, known_hosts=known, accept_new_host_keys=accept) as host, \
                pytest.raises(HostKeyRejected) as caught:
            host.run(["true"])
        assert caught.value.message.startswith("a: the host key of ")
        assert f"is marked @revoked in {known} line 2; refusing to connect" in caught.value.message
    assert known.read_text() == before


# -- jumps and proxies ----------------------------------------------------------------------
def _client_config(lab, path: Path, extra: str) -> Path:
    a, b = lab.hosts["a"], lab.hosts["b"]
    path.write_text(
        f"Host jump-a\n    HostName {a.mgmt_address}\n"
        f"Host b-data\n    HostName {b.data_address}\n"
        f"{extra}"
        f"Host *\n    User root\n    IdentityFile {lab.identity_file}\n    IdentitiesOnly yes\n"
    )
    return path


def test_proxy_jump_goes_through_the_jump_host(lab, tmp_path):
    a, b = lab.hosts["a"], lab.hosts["b"]
    config = _client_config(lab, tmp_path / "ssh_config", "Host target-b\n"
                            f"    HostName {b.data_address}\n    ProxyJump jump-a\n")
    with SSHHost("b", ssh="target-b", ssh_config=config, known_hosts=lab.known_hosts) as host:
        # b's data address has no route from here: only a's namespace can reach it.
        assert subprocess.run(["ip", "route", "get", b.data_address], capture_output=True, text=True).stdout \
            .split()[1:3] != ["dev", "lkdata"]
        connection = host.run(["printenv", "SSH_CONNECTION"], check=True).stdout.split()
        assert connection[0] == a.data_address and connection[2:] == [b.data_address, "22"]
        assert host.describe().endswith("via jump-a")


def test_chain_of_jumps(lab, tmp_path):
    a, b = lab.hosts["a"], lab.hosts["b"]
    # here -> a (management) -> b (data link) -> a (data link): each hop is a direct-tcpip channel.
    config = _client_config(lab, tmp_path / "ssh_config", "Host target-a-data\n"
                            f"    HostName {a.data_address}\n    ProxyJump jump-a,root@b-data:22\n")
    with SSHHost("a2", ssh="target-a-data", ssh_config=config, known_hosts=lab.known_hosts) as host:
        connection = host.run(["printenv", "SSH_CONNECTION"], check=True).stdout.split()
    assert connection[0] == b.data_address and connection[2] == a.data_address


@pytest.mark.skipif(shutil.which("ssh") is None, reason="no OpenSSH client for the ProxyCommand")
def test_proxy_command(lab, tmp_path):
    a, b = lab.hosts["a"], lab.hosts["b"]
    config = _client_config(lab, tmp_path / "ssh_config", "Host via-command\n"
                            f"    HostName {b.data_address}\n"
                            f"    ProxyCommand ssh -F {lab.ssh_config} -W %h:%p {a.ssh_alias}\n")
    with SSHHost("b", ssh="via-command", ssh_config=config, known_hosts=lab.known_hosts) as host:
        assert host.run(["printenv", "SSH_CONNECTION"], check=True).stdout.split()[0] == a.data_address


# -- commands -----------------------------------------------------------------------------
def test_shell_metacharacters_arrive_as_literal_arguments(lab, tmp_path):
    pwned, victim = tmp_path / "pwned", tmp_path / "x"
    victim.mkdir()
    args = [
        f"; rm -rf {victim}",
        f"$(touch {pwned})",
        f"`touch {pwned}`",
        f"a && touch {pwned} || b",
        "it's \"quoted\"",
        "line one\nline two",
        "*",
        "~",
        "$HOME",
        "",
        "-n",
        "back\\slash",
        "tab\there",
        "ünïcode ✓",
    ]
    with host_a(lab) as host:
        result = host.run(["python3", "-c", "import sys, json; print(json.dumps(sys.argv[1:]))", *args], check=True)
        assert json.loads(result.stdout) == args
        # LC_ALL=C reaches the command (ping's decimal separator depends on it).
        assert host.run(["printenv", "LC_ALL"]).stdout.strip() == "C"
    assert not pwned.exists() and victim.exists()


def test_run_errors_and_timeout(lab):
    marker = f"3000.{uuid.uuid4().int % 10**6}"
    with host_a(lab) as host:
        with pytest.raises(LabkitError, match="no-such-command-h3 is not installed on a"):
            host.run(["no-such-command-h3"])
        with pytest.raises(LabkitError, match=r"`sh -c 'echo oops >&2; exit 3'` failed on a: oops"):
            host.run(["sh", "-c", "echo oops >&2; exit 3"], check=True)
        assert host.run(["sh", "-c", "exit 3"]).returncode == 3
        start = time.monotonic()
        with pytest.raises(LabkitError, match="took longer than 1 s"):
            host.run(["sleep", marker], timeout=1)
        assert time.monotonic() - start < 5
        assert host.read_sysctl("net.ipv4.tcp_slow_start_after_idle") in ("0", "1")
    # A command that timed out is killed, not left running on the host.
    deadline = time.monotonic() + 5
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_with(marker) == []


def test_background_process_streams_lines_and_stop_kills_its_group(lab):
    first, second = (f"3000.{uuid.uuid4().int % 10**6}" for _ in range(2))
    with host_a(lab) as host:
        process = host.start(["sh", "-c", f"echo one; echo two; echo ready; sleep {first} & exec sleep {second}"])
        lines = process.lines(timeout=10)
        assert [next(lines), next(lines), next(lines)] == ["one", "two", "ready"]  # the PID line is stripped
        assert process.poll() is None and process.returncode is None
        # The reported pid is the remote process group, and it runs inside a's namespace.
        deadline = time.monotonic() + 5  # "ready" comes before sh has exec'd both sleeps
        while len(pids := processes_with(first) + processes_with(second)) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(pids) == 2
        for pid in pids:
            assert os.getpgid(pid) == process.pid
            assert os.readlink(f"/proc/{pid}/ns/net") == os.readlink(f"/proc/{lab.sshd_pids['a']}/ns/net")
        with process:
            pass  # leaving the block stops it
        assert processes_with(first) == [] and processes_with(second) == []
        assert process.poll() is not None
        listed = subprocess.run(["ip", "netns", "pids", lab.hosts["a"].netns], capture_output=True, text=True).stdout
        assert not set(map(int, listed.split())) & set(pids)


def test_stop_kills_a_group_that_ignores_sigterm(lab):
    marker = f"3000.{uuid.uuid4().int % 10**6}"
    with host_a(lab) as host:
        # An ignored signal stays ignored across exec: neither sh nor sleep dies of SIGTERM.
        process = host.start(["sh", "-c", f"trap '' TERM; echo ready; sleep {marker}; echo late"])
        process.wait_for_line(lambda line: line == "ready", timeout=10)
        start = time.monotonic()
        process.stop(grace_s=0.5)
        assert 0.5 <= time.monotonic() - start < 5
        assert processes_with(marker) == []
        assert "late" not in list(process.lines(timeout=1))


def test_wait_for_line_reports_an_early_exit(lab):
    with host_a(lab) as host:
        process = host.start(["sh", "-c", "echo starting; echo 'bind failed' >&2; exit 4"])
        with pytest.raises(LabkitError, match="exited before it was ready: bind failed"):
            process.wait_for_line(lambda line: line == "ready", timeout=10)
        assert process.wait(timeout=5) == 4
        process.stop()


def test_reconnects_after_the_transport_drops(lab, caplog):
    marker = f"3000.{uuid.uuid4().int % 10**6}"
    with host_a(lab) as host:
        process = host.start(["sleep", marker])
        first = host.transport()
        assert host.sftp() is not None and host.transport() is first  # one transport for exec and SFTP
        with caplog.at_level(logging.WARNING, logger="labkit.hosts.ssh"):
            first.close()
            assert host.run(["echo", "back"]).stdout == "back\n"
        assert host.connects == 2 and host.transport() is not first
        messages = [record.getMessage() for record in caplog.records]
        assert any("dropped; reconnecting" in message for message in messages)
        assert any("reconnected" in message for message in messages)
        # The process started before the drop is still stopped, through the new transport.
        deadline = time.monotonic() + 5
        while not processes_with(marker) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert processes_with(marker)
        process.stop(grace_s=1)
        assert processes_with(marker) == []


class _Emitted(logging.Handler):
    """Sets an event when a log message containing ``text`` is emitted."""

    def __init__(self, text: str):
        super().__init__(logging.DEBUG)
        self.text, self.event = text, threading.Event()

    def emit(self, record):
        if self.text in record.getMessage():
            self.event.set()


@contextlib.contextmanager
def debug_message(text: str):
    """An event set when labkit.hosts.ssh logs a message containing ``text``."""
    logger = logging.getLogger("labkit.hosts.ssh")
    handler, level = _Emitted(text), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler.event
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def run_in_thread(host: SSHHost, argv: list[str]) -> tuple[threading.Thread, dict]:
    result: dict = {}
    thread = threading.Thread(target=lambda: result.setdefault("run", host.run(argv)), daemon=True)
    thread.start()
    return thread, result


def test_a_channel_the_server_refuses_waits_for_one_to_close_and_keeps_the_connection(lab, tmp_path):
    # sshd allows 10 sessions per connection (MaxSessions). The eleventh used to be taken for a dropped
    # connection: labkit closed the transport, killing the ten commands on it, and printed a reconnect
    # notice into a run's one-line error. Ten channels opened on the transport outside labkit's count
    # (each `cat` of its own FIFO, which ends when the test opens the FIFO for writing and closes it).
    fifos = [tmp_path / f"hold{i}" for i in range(10)]
    with host_a(lab) as host:
        held = []
        for fifo in fifos:
            os.mkfifo(fifo)
            channel = host.transport().open_session(timeout=10)
            channel.exec_command(shlex.join(["cat", str(fifo)]))
            held.append(channel)
        with debug_message("the server refused one") as refused:
            eleventh, result = run_in_thread(host, ["echo", "eleventh"])
            assert refused.wait(30), "the eleventh channel was not refused: is sshd's MaxSessions still 10?"
            assert eleventh.is_alive()  # waiting for a channel, not failed
            with open(fifos[0], "w"):  # waits for cat to have it open: the channel is in use
                pass
            eleventh.join(60)
        assert result["run"].stdout == "eleventh\n" and host.connects == 1
        assert held[0].recv_exit_status() == 0
        assert not any(channel.closed for channel in held[1:])  # the other nine still run
        for fifo in fifos[1:]:
            with open(fifo, "w"):
                pass
        assert all(channel.recv_exit_status() == 0 for channel in held)


def test_a_run_holding_nine_channels_can_still_stop_them(lab):
    # Ordinary commands leave the tenth channel to the `kill` that stops a process: with nine processes
    # running, a tenth command waits, and stopping one of the nine (through the reserved channel) frees it.
    marker = f"3000.{uuid.uuid4().int % 10**6}"
    with host_a(lab) as host:
        held = [host.start(["sleep", marker]) for _ in range(9)]
        with debug_message("labkit holds the others") as waiting:
            tenth, result = run_in_thread(host, ["echo", "tenth"])
            assert waiting.wait(30)
            held.pop().stop(grace_s=1)
            tenth.join(60)
        assert result["run"].stdout == "tenth\n" and host.connects == 1
        assert len(processes_with(marker)) == 8
        for process in held:
            process.stop(grace_s=1)
    assert processes_with(marker) == []


def test_labkit_sends_no_eof_on_its_channels_since_one_can_overtake_the_close_and_drop_the_connection(lab):
    # CI printed "a: the SSH connection ... dropped; reconnecting" into a one-line error; paramiko's log showed sshd's
    # "Disconnect (code 2): ieof packet referred to nonexistent channel 4". labkit sent EOF (stdin is empty) right
    # after each exec; paramiko builds that EOF under the channel's lock but sends it after, so when the command had
    # already ended, the CLOSE paramiko's own thread sent in answer to sshd's could go first, sshd freed the channel,
    # and the EOF behind it ended the connection with every command on it. labkit sends none: stdin is /dev/null on
    # the host, a started process's channel never has EOF sent, and many quick commands from several threads at once
    # (ending before their thread looks again: the race's ground) keep the one connection.
    with host_a(lab) as host:
        assert host.run(["cat"], timeout=10).stdout == ""  # reads /dev/null: ends at once, no EOF needed
        process = host.start(["sleep", "3000.123"])
        assert not process.channel.eof_sent
        process.stop(grace_s=1)
        with ThreadPoolExecutor(6) as pool:
            results = list(pool.map(lambda i: host.run(["echo", str(i)]).stdout, range(120)))
        assert results == [f"{i}\n" for i in range(120)] and host.connects == 1


def test_put_get_round_trip(lab, tmp_path):
    payload = os.urandom(300_000) + b"\n\0end"
    local = tmp_path / "payload.bin"
    local.write_bytes(payload)
    name = f".labkit-h3-test-{uuid.uuid4().hex}"
    with host_a(lab) as host:
        try:
            host.put(local, f"~/{name}")  # relative to the login directory
            remote_sum = host.run(["sha256sum", name], check=True).stdout.split()[0]
            assert remote_sum == hashlib.sha256(payload).hexdigest()
            host.get(f"~/{name}", tmp_path / "back.bin")
        finally:
            host.run(["rm", "-f", name])
        assert (tmp_path / "back.bin").read_bytes() == payload
        with pytest.raises(LabkitError, match="cannot download a:/nonexistent/h3"):
            host.get("/nonexistent/h3", tmp_path / "nothing")


def _file_operations(host, base: str, local_dir: Path, stat_mode) -> None:
    """The Host protocol's file operations, checked through the host's own commands where it matters."""
    from labkit.hosts.base import Host

    assert isinstance(host, Host)
    nested = f"{base}/one/two"
    host.make_dir(nested)
    host.make_dir(nested)  # again: like mkdir -p
    assert host.exists(nested) and not host.exists(f"{base}/nothing")
    private = f"{base}/private"
    host.make_dir(private, private=True)
    assert stat_mode(private) == 0o700
    secret = local_dir / "secret.key"
    secret.write_bytes(b"not really a key\n")
    host.put(secret, f"{private}/k", mode=0o600)
    assert stat_mode(f"{private}/k") == 0o600
    assert host.read_bytes(f"{private}/k") == b"not really a key\n"
    host.rename(f"{private}/k", f"{nested}/k2")
    assert not host.exists(f"{private}/k") and host.read_bytes(f"{nested}/k2") == b"not really a key\n"
    host.chmod(f"{nested}/k2", 0o640)
    assert stat_mode(f"{nested}/k2") == 0o640
    temps = [host.make_temp_dir("labkit-h3-") for _ in range(2)]
    try:
        assert temps[0] != temps[1] and [stat_mode(temp) for temp in temps] == [0o700, 0o700]
    finally:
        for temp in temps:
            host.remove(temp)
    assert not any(host.exists(temp) for temp in temps)
    # /proc files report a size of 0: they must still be read to the end.
    assert host.read_bytes("/proc/self/status").startswith(b"Name:")
    host.remove(base)  # a whole tree
    host.remove(base)  # and nothing left to remove is no error
    assert not host.exists(base)
    with pytest.raises(LabkitError, match="cannot read"):
        host.read_bytes(f"{base}/gone")


def test_file_operations_over_sftp(lab, tmp_path):
    base = f".labkit-h3-files-{uuid.uuid4().hex}"
    with host_a(lab) as host:
        def stat_mode(path):
            return int(host.run(["stat", "-c", "%a", path], check=True).stdout.strip(), 8)

        _file_operations(host, base, tmp_path, stat_mode)


def test_file_operations_on_the_local_host(tmp_path):
    from labkit.hosts.local import LocalHost

    host = LocalHost("here")
    _file_operations(host, str(tmp_path / "files"), tmp_path, lambda path: os.stat(path).st_mode & 0o777)


# -- inventories and `labkit hosts check` -------------------------------------------------
def test_open_host_from_the_testbed_inventory(lab):
    inv = load_inventory(lab.inventory)
    with open_host(inv, "b") as host:
        assert host.run(["printenv", "SSH_CONNECTION"]).stdout.split()[2] == lab.hosts["b"].mgmt_address
    assert inv.peer_address("b") == lab.hosts["b"].data_address


def test_hosts_check_records_new_keys_on_request_and_shows_facts(lab, tmp_path):
    known = tmp_path / "known_hosts"
    inventory = tmp_path / "inventory.toml"
    inventory.write_text(lab.inventory.read_text().replace(str(lab.known_hosts), str(known)))

    refused = labkit("hosts", "check", str(inventory))
    assert refused.returncode == 1
    assert "--accept-new-host-keys" in refused.stdout and not known.exists()

    checked = labkit("hosts", "check", "--accept-new-host-keys", str(inventory))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert {line.split()[0] for line in known.read_text().splitlines()} == {
        lab.hosts["a"].mgmt_address, lab.hosts["b"].mgmt_address}
    assert "recorded new host key" in checked.stderr

    again = labkit("hosts", "check", str(inventory))
    assert again.returncode == 0
    rows = {line.split("│")[1].strip(): line for line in again.stdout.splitlines() if line.startswith("│ ")}
    assert set(rows) == {"a", "b"}
    kernel = os.uname().release
    cc = subprocess.run(["ip", "netns", "exec", lab.hosts["a"].netns, "sysctl", "-n",
                         "net.ipv4.tcp_congestion_control"], capture_output=True, text=True).stdout.strip()
    for name, peer in (("a", "b"), ("b", "a")):
        cells = [cell.strip() for cell in rows[name].split("│")[1:-1]]
        # The testbed logs in as root: no sudo needed.
        assert cells[1:4] == ["yes", "yes", "root"] and cells[9] == kernel and cells[10] == cc
        # The data link: TUN MTU 1460 and the per-route congestion control the testbed sets.
        assert cells[12] == f"{peer}: 1460 (lkdata) congctl cubic"


def test_hosts_check_bad_input_is_one_line_exit_2(lab, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[hosts.a]\nssh = "x"\nport = \n')
    proc = labkit("hosts", "check", str(bad))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "line 3" in proc.stderr

    proc = labkit("hosts", "check", str(lab.inventory), "c")
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"labkit: error: no host 'c' in inventory {lab.inventory}; known hosts: a, b"


def test_hosts_check_names_each_failure_clearly(lab, tmp_path):
    """Unreachable, refused, unresolvable and wrong-key hosts, checked from inside a's namespace.

    Inside the namespace there is no default route: a test address and a DNS
    lookup go nowhere but into the testbed's own link.
    """
    a, b = lab.hosts["a"], lab.hosts["b"]
    wrong_key = tmp_path / "wrong_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(wrong_key)], check=True)
    (tmp_path / "ssh_config").write_text(
        f"Host wrong-key\n    HostName {b.data_address}\n    User root\n"
        f"    IdentityFile {wrong_key}\n    IdentitiesOnly yes\n"
    )
    inventory = tmp_path / "inventory.toml"
    inventory.write_text(
        f'ssh_config = "ssh_config"\nknown_hosts = "{lab.known_hosts}"\n'
        '[hosts.silent]\nssh = "198.18.250.7"\n'
        f'[hosts.refused]\nssh = "{b.data_address}"\nport = 2\n'
        '[hosts.nameless]\nssh = "no-such-host.invalid"\n'
        '[hosts.wrongkey]\nssh = "wrong-key"\n'
    )
    # Packets to the unused address enter the data link and are dropped at b: a real timeout.
    subprocess.run(["ip", "-n", a.netns, "route", "replace", "198.18.250.7/32", "dev", "lkdata"], check=True)
    try:
        start = time.monotonic()
        proc = subprocess.run(["ip", "netns", "exec", a.netns, LABKIT, "hosts", "check", "--timeout", "1",
                               str(inventory)], capture_output=True, text=True, timeout=60)
        elapsed = time.monotonic() - start
    finally:
        subprocess.run(["ip", "-n", a.netns, "route", "del", "198.18.250.7/32"], check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr
    lines = {line.split(":")[0]: line for line in proc.stdout.splitlines() if ": " in line and not line.startswith("│")}
    assert lines["silent"] == "silent: cannot reach 198.18.250.7:22: timed out after 1 s"
    assert lines["refused"] == f"refused: cannot reach {b.data_address}:2: Connection refused"
    assert lines["nameless"].startswith("nameless: unknown host 'no-such-host.invalid'")
    assert lines["wrongkey"] == (f"wrongkey: authentication failed for root@{b.data_address}:22 "
                                 f"(keys: {wrong_key})")
    assert elapsed < 20
