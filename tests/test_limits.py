"""Issue 23, item 1: every count, duration and size has an upper bound, and the agents stay small and stoppable.

A typo such as ``--repeats 9223372036854775807`` once made labkit-go grow to 23 GB while ignoring SIGTERM. Here,
through the real console script and the real labkit-go: each value above its bound (labkit/limits.py, stated again
in go/internal/limits) is one line on stderr and exit status 2, before anything runs; a large but allowed run
streams its rows with bounded memory and ends on SIGTERM, also while a call waits on a server that never answers.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from conftest import LABKIT, REPO
from labkit import limits
from labkit.errors import LabkitError

# A call that fails at once (nothing listens on port 1) and then waits an hour: a value that is not refused makes
# the command run on instead of exiting 2, which the hang guard of subprocess.run reports.
CALL = ("echo", "call", "--target", "127.0.0.1:1", "--sizes", "10", "--gap", "1h")
ABOVE = {
    "--repeats": str(limits.MAX_REPEATS + 1),
    "--warmup": str(limits.MAX_WARMUP + 1),
    "--gap": f"{limits.MAX_DURATION_S + 1}s",
    "--timeout": f"{limits.MAX_DURATION_S + 1}s",
    "--background-gap": f"{limits.MAX_DURATION_S + 1}s",
    "--keepalive-ms": str(limits.MAX_KEEPALIVE_MS + 1),
}


def _go_constants() -> dict[str, float]:
    """go/internal/limits's constants, durations in seconds."""
    text = (REPO / "go" / "internal" / "limits" / "limits.go").read_text()
    found = re.findall(r"^\s*(Max\w+)\s*=\s*([0-9_ <*-]*(?:time\.Hour)?)\s*(?://.*)?$", text, re.MULTILINE)
    return {name: eval(value.replace("time.Hour", "3600"), {}) for name, value in found}  # noqa: S307 (our file)


def test_labkit_go_states_the_bounds_of_labkit():
    go = _go_constants()
    assert go == {
        "MaxRequestBytes": limits.MAX_REQUEST_BYTES, "MaxFileBytes": limits.MAX_FILE_BYTES,
        "MaxMessageBytes": limits.MAX_MESSAGE_BYTES,
        "MaxRepeats": limits.MAX_REPEATS, "MaxCalls": limits.MAX_CALLS, "MaxWarmup": limits.MAX_WARMUP,
        "MaxDuration": limits.MAX_DURATION_S, "MaxKeepaliveMs": limits.MAX_KEEPALIVE_MS, "MaxTicks": limits.MAX_TICKS,
        "MaxProbeWait": limits.MAX_SERIES_INTERVAL_S, "MaxPEMBytes": limits.MAX_PEM_BYTES,
        "MaxBodyBytes": limits.MAX_BODY_BYTES, "MaxGRPCChannels": limits.MAX_GRPC_CHANNELS,
        "MaxNATSWorkers": limits.MAX_NATS_WORKERS, "MaxConcurrency": limits.MAX_CONCURRENCY,
        "MaxEchoPayloadBytes": limits.MAX_ECHO_PAYLOAD_BYTES, "MaxStreamMessages": limits.MAX_STREAM_MESSAGES,
    }


def _refused_in_one_line(*args: str) -> str:
    proc = subprocess.run([LABKIT, *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout == ""
    return proc.stderr


@pytest.mark.parametrize("impl", ["python", "go"])
@pytest.mark.parametrize("flag", sorted(ABOVE))
def test_echo_call_refuses_a_value_above_its_bound_in_one_line(impl, flag):
    stderr = _refused_in_one_line(*CALL, "--impl", impl, flag, ABOVE[flag])
    assert flag.removeprefix("--") in stderr


@pytest.mark.parametrize("impl", ["python", "go"])
def test_echo_call_refuses_more_calls_than_its_bound_and_a_huge_count_at_once(impl):
    sizes = ",".join(str(size) for size in range(limits.MAX_CALLS // limits.MAX_REPEATS + 1))
    assert "calls" in _refused_in_one_line("echo", "call", "--target", "127.0.0.1:1", "--impl", impl, "--sizes", sizes,
                                           "--repeats", str(limits.MAX_REPEATS), "--gap", "1h")
    # The count of the report: refused before any plan of calls exists, so at once and in no memory.
    _refused_in_one_line(*CALL, "--impl", impl, "--repeats", "9223372036854775807")


@pytest.mark.parametrize("impl", ["python", "go"])
@pytest.mark.parametrize("flag, value", [("--repeats", limits.MAX_REPEATS + 1), ("--warmup", limits.MAX_WARMUP + 1),
                                         ("--chunk-size", limits.MAX_REQUEST_BYTES + 1),
                                         ("--timeout", f"{limits.MAX_DURATION_S + 1}s")])
def test_the_upload_agent_refuses_a_value_above_its_bound(impl, flag, value, tmp_path):
    upload = tmp_path / "upload.bin"
    upload.write_bytes(b"x" * 100)
    args = {"--repeats": "1", "--warmup": "0", "--chunk-size": "10", "--timeout": "10s", flag: str(value)}
    _refused_in_one_line("echo", "upload-agent", "--impl", impl, "--transport", "grpc", "--target", "127.0.0.1:1",
                         "--file", str(upload), *[item for pair in args.items() for item in pair])


@pytest.mark.parametrize("impl", ["python", "go"])
@pytest.mark.parametrize("flag, value", [("--max-message-bytes", limits.MAX_MESSAGE_BYTES + 1),
                                         ("--grace", f"{limits.MAX_DURATION_S + 1}s"),
                                         ("--permit-keepalive-ms", limits.MAX_KEEPALIVE_MS + 1),
                                         ("--max-upload-bytes", limits.MAX_FILE_BYTES + 1)])
def test_the_server_refuses_a_value_above_its_bound_before_it_listens(impl, flag, value):
    _refused_in_one_line("echo", "serve", "--impl", impl, "--bind", "127.0.0.1:0", "--http2-port", "0", flag, str(value))


@pytest.mark.parametrize("args", [["back", "--grace", "1000h"],
                                  ["front", "--back-grpc", "127.0.0.1:1", "--timeout", "1000h"],
                                  ["front", "--back-grpc", "127.0.0.1:1", "--grace", "1000h"]])
def test_the_hop_services_refuse_a_duration_above_the_bound_before_they_listen(args):
    proc = subprocess.run([str(Path(LABKIT).with_name("labkit-go")), *args, "--bind", "127.0.0.1:0"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1 and "168h" in proc.stderr, proc.stderr


@pytest.mark.parametrize("impl", ["python", "go"])
def test_the_series_agent_refuses_more_ticks_than_its_bound(impl):
    _refused_in_one_line("echo", "series-agent", "--impl", impl, "--address", "127.0.0.1", "--probes", "ping",
                         "--interval", "1h", "--ticks", str(limits.MAX_TICKS + 1))


@pytest.mark.parametrize("fields", [{"repeats": limits.MAX_REPEATS + 1}, {"warmup": limits.MAX_WARMUP + 1},
                                    {"gaps_s": [limits.MAX_DURATION_S * 2]},
                                    {"background_gaps_s": [limits.MAX_DURATION_S * 2]},
                                    {"call_timeout_s": limits.MAX_DURATION_S * 2},
                                    {"keepalive_ms": [limits.MAX_KEEPALIVE_MS + 1]}])
def test_a_sweep_config_from_python_refuses_a_value_above_its_bound(fields):
    """labkit.sweep(...) and a TOML file fill SweepConfig, whose validate() runs before any host is contacted."""
    from labkit.experiments.sweep import SweepConfig

    with pytest.raises(LabkitError):
        SweepConfig(inventory="unused.toml", client="a", server="b", **fields).validate()


@pytest.mark.parametrize("fields", [{"repeats": limits.MAX_REPEATS + 1}, {"upload_timeout_s": 1e9},
                                    {"chunk_sizes": [limits.MAX_REQUEST_BYTES + 1]}])
def test_an_upload_config_from_python_refuses_a_value_above_its_bound(fields):
    from labkit.experiments.upload import UploadConfig

    with pytest.raises(LabkitError):
        UploadConfig(inventory="unused.toml", client="a", server="b", **fields).validate()


@pytest.mark.parametrize("experiment, fields", [("load", {"call_timeout_s": limits.MAX_DURATION_S * 2}),
                                                ("load", {"ping_count": limits.MAX_PING_COUNT + 1}),
                                                ("series", {"cell_s": limits.MAX_DURATION_S * 2})])
def test_the_other_experiment_configs_refuse_a_value_above_its_bound(experiment, fields):
    from labkit.experiments import spec

    with pytest.raises(LabkitError, match=r"at most (168h|10000)|and (168h|10000)"):
        spec(experiment).config_type(inventory="unused.toml", client="a", server="b", **fields).validate()


def test_an_experiment_file_with_a_gap_above_the_bound_is_refused_in_one_line(tmp_path):
    inventory = tmp_path / "inventory.toml"
    inventory.write_text('[hosts.a]\nssh = "local"\n\n[hosts.b]\nssh = "local"\n')
    experiment = tmp_path / "sweep.toml"
    experiment.write_text(f'[sweep]\ninventory = "{inventory}"\nclient = "a"\nserver = "b"\ngaps = "1000h"\n')
    stderr = _refused_in_one_line("sweep", "--config", str(experiment), "--runs-dir", str(tmp_path / "runs"))
    assert "gaps" in stderr and "168h" in stderr
    assert not (tmp_path / "runs").exists()


def test_help_states_the_bounds():
    python = subprocess.run([LABKIT, "echo", "call", "--help"], capture_output=True, text=True, timeout=60).stdout
    go = subprocess.run([LABKIT, "echo", "call", "--impl", "go", "-help"], capture_output=True, text=True, timeout=60)
    for text in (python, go.stderr):
        flat = " ".join(text.split())
        assert str(limits.MAX_REPEATS) in flat and "at most 168h" in flat, text


def _rss_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE).group(1))


@pytest.mark.parametrize("order", ["sequential", "shuffled"])
@pytest.mark.parametrize("impl", ["python", "go"])
def test_a_large_run_against_a_closed_port_streams_in_bounded_memory_and_stops_on_sigterm(impl, order):
    """Ten sizes × a million repeats: ten million calls, each failing at once. The rows come as the calls are made
    and the process holds no plan of them (it once held a list of every call before the first one)."""
    sizes = ",".join(str(size) for size in range(10))
    proc = subprocess.Popen([LABKIT, "echo", "call", "--impl", impl, "--target", "127.0.0.1:1", "--sizes", sizes,
                             "--repeats", str(limits.MAX_REPEATS), "--gap", "0s", "--timeout", "5s", "--order", order,
                             "--seed", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        rows = [json.loads(proc.stdout.readline()) for _ in range(20)]
        assert [row["seq"] for row in rows] == list(range(20)) and not rows[0]["ok"]
        rss_mib = _rss_kib(proc.pid) / 1024
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)  # read on: a row still coming must find its pipe open
        assert proc.returncode == 143, stderr
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # Measured: 42 MiB (Python) and 13 (Go) in order, 53 and 52 shuffled (an index per call); a list of the ten
    # million calls took 620 and 730.
    assert rss_mib < 200, f"{rss_mib:.0f} MiB after the first rows"
    assert "interrupted after" in stderr


#: An HTTP/2 SETTINGS frame with no settings: all a client waits for before its connection is ready.
_EMPTY_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
_HEADERS = 0x1


def _wait_for_a_call(connection: socket.socket) -> None:
    """Play a server that accepts the connection (its SETTINGS) and then never answers; return once the client's
    first call has arrived (its HEADERS frame): the call is in flight, and would wait out its deadline."""
    connection.settimeout(60)
    stream = connection.makefile("rb")
    assert stream.read(24).startswith(b"PRI * HTTP/2.0")
    connection.sendall(_EMPTY_SETTINGS)
    while True:
        header = stream.read(9)
        assert len(header) == 9, "the client closed the connection before its call"
        length, kind = int.from_bytes(header[:3], "big"), header[3]
        stream.read(length)
        if kind == _HEADERS:
            return


def _sigterm_while_a_call_waits(argv_to) -> tuple[int, str, str]:
    """``labkit ARGV`` (``argv_to(port)``) against a listener that accepts and never answers, sent SIGTERM once its
    call is on the wire: (exit status, stdout, stderr)."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        silent.settimeout(60)
        proc = subprocess.Popen([LABKIT, *argv_to(silent.getsockname()[1])], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            connection, _ = silent.accept()
            with connection:
                _wait_for_a_call(connection)
                proc.send_signal(signal.SIGTERM)
                stdout, stderr = proc.communicate(timeout=60)
            return proc.returncode, stdout, stderr
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.mark.parametrize("impl", ["python", "go"])
def test_sigterm_stops_a_call_waiting_on_a_server_that_never_answers(impl):
    """The connection is ready but the server never answers: the call would wait out its hour-long deadline.
    SIGTERM must end it now, with the shell's status for it (labkit-go once noticed the signal only between calls)."""
    status, _, stderr = _sigterm_while_a_call_waits(lambda port: [
        "echo", "call", "--impl", impl, "--target", f"127.0.0.1:{port}", "--sizes", "10", "--repeats",
        str(limits.MAX_REPEATS), "--timeout", "1h"])
    assert status == 143, stderr


@pytest.mark.parametrize("impl", ["python", "go"])
def test_sigterm_stops_the_series_agent_while_a_call_waits_on_a_server_that_never_answers(impl):
    """The series agent's cold echo probe calls a server that never answers, with the longest timeout it takes: the
    agent must end on SIGTERM now, not when the call gives up."""
    status, stdout, stderr = _sigterm_while_a_call_waits(lambda port: [
        "echo", "series-agent", "--impl", impl, "--address", "127.0.0.1", "--grpc-port", str(port), "--probes",
        "echo-cold", "--ticks", "1000", "--interval", "1s", "--timeout", "1h"])
    assert status == 143, stderr
    assert [json.loads(line)["event"] for line in stdout.splitlines()] == ["start"]  # no row for the cut call


@pytest.mark.parametrize("command", [["labkit", "echo", "upload-agent", "--impl", "python"],
                                     ["labkit-go", "upload-agent"]])
def test_sigint_stops_the_upload_agent_started_in_the_background_while_an_upload_waits(command, tmp_path):
    """Started as a shell's background job (SIGINT ignored), against a server that takes the upload and never
    answers: SIGINT must end the agent at once with status 130 (labkit-go's upload-agent had no handler, so an
    ignored SIGINT stayed ignored)."""
    from conftest import as_a_background_job

    upload = tmp_path / "upload.bin"
    upload.write_bytes(b"x" * 100)
    program = str(Path(LABKIT).with_name(command[0]))
    with socket.create_server(("127.0.0.1", 0)) as silent:
        silent.settimeout(60)
        proc = subprocess.Popen([program, *command[1:], "--transport", "grpc", "--target",
                                 f"127.0.0.1:{silent.getsockname()[1]}", "--file", str(upload), "--chunk-size", "10",
                                 "--timeout", "1h"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=as_a_background_job)
        try:
            connection, _ = silent.accept()
            with connection:
                _wait_for_a_call(connection)  # the warm-up upload
                proc.send_signal(signal.SIGINT)
                _, stderr = proc.communicate(timeout=60)
            assert proc.returncode == 130, stderr
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_sigint_stops_labkit_go_load_started_in_the_background_and_keeps_its_rows(tmp_path):
    """`labkit-go load` (hop's closed loop) as a shell's background job, against a server that takes a request and
    never answers: SIGINT ends it at once with status 130 and its CSV so far (the header: no request ended)."""
    from conftest import as_a_background_job

    out = tmp_path / "load.csv"
    with socket.create_server(("127.0.0.1", 0)) as silent:
        silent.settimeout(60)
        proc = subprocess.Popen([str(Path(LABKIT).with_name("labkit-go")), "load", "-url",
                                 f"http://127.0.0.1:{silent.getsockname()[1]}/products", "-connections", "1",
                                 "-duration", "168h", "-timeout", "168h", "-out", str(out)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=as_a_background_job)
        try:
            connection, _ = silent.accept()
            with connection:
                connection.settimeout(60)
                request = b""
                while b"\r\n\r\n" not in request:  # the first GET, whole: in flight, and never answered
                    chunk = connection.recv(4096)
                    assert chunk, "labkit-go load closed the connection before its request"
                    request += chunk
                assert request.startswith(b"GET /products HTTP/1.1\r\n")
                proc.send_signal(signal.SIGINT)
                _, stderr = proc.communicate(timeout=60)
            assert proc.returncode == 130, stderr
            assert "labkit-go load: interrupted after 0 requests" in stderr
            assert out.read_text() == "t_ns,connection,status,latency_ns,bytes_in,error\n"
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
