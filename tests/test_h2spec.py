"""HTTP/2 conformance: h2spec (pinned, built by the set-up) against every HTTP/2 endpoint labkit serves, the Python
echo server's and labkit-go's, h2c and TLS with ALPN h2. Issue 15 item 9: the Python endpoint passed 131-132 of 145
cases, failing flow-control and stream-state cases, where Go's net/http2 passed 140."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from conftest import REPO
from labkit.pki import write_throwaway_pki
from test_echo import ServerProcess

H2SPEC = shutil.which("h2spec", path=str(REPO / ".venv" / "bin")) or shutil.which("h2spec")


def h2spec(port: int, tls: bool) -> tuple[int, int, list[str]]:
    """Run h2spec against 127.0.0.1:port: (cases, passed, the failed cases' lines). Its JUnit report is not read:
    a failure's message may carry bytes that make it invalid XML."""
    argv = [H2SPEC, "-h", "127.0.0.1", "-p", str(port), "-P", "/echo", "-o", "3", *(["-t", "-k"] if tls else [])]
    out = subprocess.run(argv, capture_output=True, timeout=300).stdout.decode("utf-8", "replace")
    summary = re.search(r"(\d+) tests, (\d+) passed, (\d+) skipped, (\d+) failed", out)
    assert summary, out[-2000:]
    failed = [line.strip() for line in out.splitlines() if "×" in line]
    return int(summary.group(1)), int(summary.group(2)), failed


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    pki = write_throwaway_pki(tmp_path_factory.mktemp("tls"), "127.0.0.1")
    return ["--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key)]


@pytest.mark.parametrize("tls", [False, True], ids=["h2c", "tls"])
def test_every_http2_endpoint_passes_h2spec_at_least_as_well_as_go(tls_files, tls):
    assert H2SPEC, "h2spec is not built (scripts/bootstrap.sh builds it)"
    results = {}
    for impl in ("python", "go"):
        server = ServerProcess("--http2-port", "0", "--impl", impl, *(tls_files if tls else []))
        try:
            results[impl] = h2spec(server.ready["http2_port"], tls)
        finally:
            server.stop()
    (cases, passed, failed), (_, go_passed, go_failed) = results["python"], results["go"]
    # Every case, the flow-control and stream-state ones included; Go's net/http2 fails a few (its own choices).
    assert cases == 145 and passed == cases and failed == [], failed
    assert passed >= go_passed >= 140, go_failed
