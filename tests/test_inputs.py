"""Issue 23, item 5 and the smaller items of 7: every file a user names is read checked, every value taken at its
unit, every TLS file named when it is wrong (real console scripts, real files, devices and FIFOs; no testbed).

A device (/dev/zero, /dev/urandom) or a FIFO has no end: reading one hung `testbed up` and `labkit-go back`.
Each case here must end with one line on stderr naming the file or value, exit status 2, and nothing built.
"""

from __future__ import annotations

import gzip
import os
import subprocess
from pathlib import Path

import pytest

from conftest import DATA, LABKIT, labkit, own_testbed_name

LABKIT_GO = str(Path(LABKIT).with_name("labkit-go"))
#: A real binary file (a recorded capture), for the files that must be text.
BINARY = DATA / "pcap" / "grpcio-idle.pcap"
PING_LOG = DATA / "ping" / "linux_lo.txt"


def _namespaces(prefix: str) -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(prefix)]


def _one_line(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


@pytest.fixture
def fifo(tmp_path):
    """A FIFO no one writes to: opening it to read, as open() does, would wait for a writer for ever."""
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def _files(tmp_path: Path) -> dict[str, Path]:
    """The files of the cases below, written as a user would."""
    files = {
        "big": tmp_path / "big.toml",
        "unitless": tmp_path / "unitless.toml",
        "until": tmp_path / "until.toml",
        "backwards": tmp_path / "backwards.txt",
    }
    with open(files["big"], "wb") as big:  # sparse: 2 MiB of nothing, past the topology's 1 MiB
        big.truncate(2 * 2**20)
    files["unitless"].write_text('[hosts.a]\n[hosts.b]\n\n[links.a-b]\none_way_delay = 5\n')
    files["until"].write_text('[[change]]\nat = "10s"\nevery = "1s"\nuntil = "5s"\nloss = "1%"\n')
    files["backwards"].write_text("0s 10ms\n2s 20ms\n1s 30ms\n")
    # Numbers past the emulator's int64 nanoseconds: Go's JSON error text was all the user got.
    files["far_delivery"] = tmp_path / "far.up"
    files["far_delivery"].write_text("1\n99999999999999999999999\n")
    files["far_step"] = tmp_path / "far_step.txt"
    files["far_step"].write_text("0 40\n99999999999999999999999 40\n")
    files["huge_delay"] = tmp_path / "huge_delay.txt"
    files["huge_delay"].write_text("0 40\n1 99999999999999999999999\n")
    return files


UP_CASES = [
    (["--delay-trace", "/dev/zero"], "--delay-trace /dev/zero is not a regular file"),
    (["--rate-trace", "/dev/urandom"], "--rate-trace /dev/urandom is not a regular file"),
    (["--jitter-distribution", "/dev/zero"], "--jitter-distribution /dev/zero is not a regular file"),
    (["--delay-trace", "{fifo}"], "is not a regular file (a device, FIFO or socket)"),
    (["--topology", str(BINARY)], f"topology {BINARY} holds binary data"),
    (["--schedule", str(BINARY)], f"schedule {BINARY} holds binary data"),
    (["--rate-trace", str(BINARY)], f"--rate-trace {BINARY} holds binary data"),
    (["--topology", "{big}"], "more than any topology (at most 1.0 MiB)"),
    (["--topology", "{unitless}"], "one_way_delay: '5' has no unit"),
    (["--one-way-delay", "5"], "'5' has no unit"),
    (["--schedule", "{until}"], "until (5 s) must come after at (10 s)"),
    (["--schedule", "at=10s,every=1s,until=10s,partition"], "until (10 s) must come after at (10 s)"),
    (["--delay-trace", "{backwards}"], "the times must increase (1 s comes after 2 s)"),
    (["--delay-trace", str(PING_LOG), "--delay-trace-step", "0s"], "--delay-trace-step: '0s' must be longer than 0"),
    (["--rate-trace", "{far_delivery}"], "far.up:2: 99999999999999999999999 ms is later than a week"),
    (["--delay-trace", "{far_step}"], "far_step.txt: it lasts 1e+23 s, more than a week"),
    (["--delay-trace", "{huge_delay}"], "huge_delay.txt: a delay of 1e+20 s, more than 10 s"),
    # Jitter is bounded as the delay is: 10000 hours of it lost every ping of a testbed that came up.
    (["--jitter", "10000h"], "--jitter: '10000h' is more than 10 s"),
    # 0 was read as no limit; no limit is 'none'.
    (["--rate", "0"], "rate '0' would let nothing through; give 'none' for no rate limit"),
]


@pytest.mark.parametrize("args, expected", UP_CASES, ids=[" ".join(a)[:40] for a, _ in UP_CASES])
def test_testbed_up_refuses_a_bad_file_or_value_in_one_line_before_building_anything(tmp_path, fifo, args, expected):
    name = own_testbed_name("t-inputs")
    paths = {"fifo": fifo, **_files(tmp_path)}
    args = [arg.format(**paths) for arg in args]
    try:
        proc = labkit("testbed", "up", "--name", name, *args, timeout=60)
        assert proc.returncode == 2, proc.stderr
        assert expected in _one_line(proc)
        assert _namespaces(f"labkit-{name}-") == []
    finally:  # a value taken at its word builds the testbed: it goes again
        if _namespaces(f"labkit-{name}-"):
            labkit("testbed", "down", "--name", name, timeout=120)


@pytest.mark.parametrize("what", ["/dev/zero", "fifo"])
def test_labkit_go_back_refuses_a_body_file_that_is_not_a_regular_file(fifo, what):
    path = str(fifo) if what == "fifo" else what
    proc = subprocess.run([LABKIT_GO, "back", "-bind", "127.0.0.1:0", "-body-file", path],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert f"--body-file {path} is not a regular file" in _one_line(proc)


def test_an_inventory_that_is_a_device_is_refused_by_name():
    proc = labkit("hosts", "check", "/dev/zero", timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "inventory /dev/zero is not a regular file" in _one_line(proc)


def test_an_identity_file_that_is_a_device_is_refused_before_ssh_reads_it(tmp_path):
    # paramiko reads a key file whole: /dev/zero would never end. hosts check names the host and the file, exit 1
    # (a host it cannot use), as for a broken known_hosts line.
    known = tmp_path / "known_hosts"
    known.write_text("")
    inventory = tmp_path / "inventory.toml"
    inventory.write_text(f'known_hosts = "{known}"\n[hosts.gw]\nssh = "127.0.0.1"\nport = 1\n'
                         'identity_file = "/dev/zero"\n')
    proc = labkit("hosts", "check", str(inventory), "--timeout", "2", timeout=60)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert any(line.startswith("gw: ") and "identity_file /dev/zero is not a regular file" in line
               for line in proc.stdout.splitlines()), proc.stdout


def test_a_file_of_many_empty_gzip_members_is_read_in_time_linear_in_its_size(tmp_path):
    # 10 MiB of empty gzip members (half a million of them) is read in about a second; read member by member with
    # the rest of the file copied each time, 5 MiB of them took 45 s, and this file four times that: the timeout
    # is what the quadratic reading exceeds, far from what the linear one needs on a loaded machine.
    member = gzip.compress(b"", mtime=0)
    path = tmp_path / "trace.gz"
    path.write_bytes(member * (10 * 2**20 // len(member)))
    proc = labkit("testbed", "up", "--name", own_testbed_name("t-gzip"), "--delay-trace", str(path), timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert f"--delay-trace {path}: neither TIME DELAY lines nor ping replies" in _one_line(proc)
    proc = labkit("import", "ping", str(path), "--out", "gzip", "--runs-dir", str(tmp_path / "runs"), timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert f"{path}: the file is empty" in _one_line(proc)


def test_import_refuses_a_fifo_before_waiting_on_it(fifo, tmp_path):
    proc = labkit("import", "ping", str(fifo), "--out", "fifo", "--runs-dir", str(tmp_path / "runs"), timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert f"log file {fifo} is not a regular file" in _one_line(proc)


# --- item 7: a TLS file that is not PEM is named ---------------------------------------------------------------


@pytest.fixture
def tls_files(tmp_path):
    """A real certificate and key (labkit's throwaway PKI), and a junk file."""
    from labkit.pki import write_throwaway_pki

    pki = write_throwaway_pki(tmp_path / "tls", "127.0.0.1")
    junk = tmp_path / "junk"
    junk.write_text("junk\n")
    return pki, junk


def _serve(impl: str, *args) -> subprocess.CompletedProcess:
    argv = [LABKIT, "echo", "serve"] if impl == "python" else [LABKIT_GO, "serve"]
    return subprocess.run([*argv, "--bind", "127.0.0.1:0", *map(str, args)], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("impl", ["python", "go"])
def test_echo_serve_names_a_tls_certificate_or_key_that_is_not_pem(impl, tls_files):
    pki, junk = tls_files
    proc = _serve(impl, "--tls-cert", junk, "--tls-key", junk)
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]  # grpcio's C core may log its own lines first
    assert f"--tls-cert {junk} is not a" in line and "PEM certificate" in line and "bind" not in proc.stderr
    proc = _serve(impl, "--tls-cert", pki.server_cert, "--tls-key", junk)
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert f"--tls-key {junk} is not a valid PEM private key for --tls-cert {pki.server_cert}" in line
    assert "bind" not in proc.stderr


@pytest.mark.parametrize("impl", ["python", "go"])
def test_echo_serve_refuses_a_tls_file_that_is_a_device(impl, tls_files):
    pki, _ = tls_files
    proc = _serve(impl, "--tls-cert", "/dev/zero", "--tls-key", pki.server_key)
    assert proc.returncode == 2, proc.stderr
    assert "--tls-cert /dev/zero is not a regular file" in proc.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("impl", ["python", "go"])
def test_echo_call_names_a_tls_ca_that_is_not_pem(impl, tls_files):
    _, junk = tls_files
    proc = labkit("echo", "call", "--target", "127.0.0.1:1", "--impl", impl, "--sizes", "10", "--repeats", "1",
                  "--tls-ca", str(junk), timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert f"--tls-ca {junk} is not a" in proc.stderr.strip().splitlines()[-1]


# --- item 7: a run in which most requests failed says so, and exits 1 ----------------------------------------------

LOCAL_PAIR = '[hosts.a]\nssh = "local"\n\n[hosts.b]\nssh = "local"\n'
#: Every echo fails, whatever the timing: a reply of 1000 bytes is over the 10 bytes each side accepts.
FAILING_ECHO = ("--grpc-option", "max-recv-msg-size=10")


@pytest.mark.parametrize("command, args", [
    ("series", ["--duration", "2s", "--interval", "200ms", "--probes", "echo-warm", "--payload-bytes", "1000"]),
    ("sweep", ["--sizes", "1000", "--gaps", "0s", "--repeats", "3", "--warmup", "0", "--ping-count", "1",
               "--iperf-seconds", "1"]),
])
def test_a_run_where_most_requests_failed_warns_with_the_counts_and_exits_1(tmp_path, command, args):
    inventory = tmp_path / "inventory.toml"
    inventory.write_text(LOCAL_PAIR)
    runs = tmp_path / "runs"
    # --share-hosts: this machine's namespace, which loopback runs of tests in other xdist workers claim too.
    proc = labkit(command, str(inventory), "--client", "a", "--server", "b", *args, *FAILING_ECHO, "--name", "failing",
                  "--runs-dir", str(runs), "--quiet", "--share-hosts", timeout=300)
    assert proc.returncode == 1, proc.stderr
    from labkit.store import Run

    run = Run.open(next(runs.glob("*-failing")))
    assert run.status == "complete"  # what was measured is kept; the status says it is mostly failures
    samples = run.samples()
    failed, total = int((~samples["ok"]).sum()), len(samples)
    assert failed == total > 0
    cell = samples["cell_id"].iloc[0]
    assert f"labkit: warning: run {run.run_id} cell {cell}: {failed:,} of {total:,} requests failed" in proc.stderr
