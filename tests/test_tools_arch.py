"""The tools labkit sends to hosts, for the host's architecture: arm64 builds beside this machine's amd64 ones.

scripts/bootstrap.sh cross-compiles labkit-go, ghz, vegeta and nats-server (CGO_ENABLED=0) into .venv/bin/linux_arm64;
labkit.hosts.tools picks a host's builds by its ``uname -m``. With no arm64 machine here, the arm64 labkit-go runs
under qemu-aarch64-static (Debian's qemu-user-static) and must answer a real echo call.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess

import pytest

from labkit.errors import LabkitError
from labkit.hosts import tools
from labkit.hosts.layout import TOOLS


def _arm64_or_skip(name: str):
    path = tools.local_tool_for(name, "arm64")
    if path is None:
        reason = f"no arm64 build of {name} here: scripts/bootstrap.sh builds it into .venv/bin/linux_arm64"
        if os.environ.get("LABKIT_REQUIRE_TESTBED") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return path


def test_a_machine_labkit_builds_no_tools_for_is_refused_in_one_line():
    assert (tools.goarch("x86_64"), tools.goarch("aarch64")) == ("amd64", "arm64")
    with pytest.raises(LabkitError) as refused:
        tools.goarch("riscv64", "host c")
    assert "host c is riscv64" in refused.value.message and "\n" not in refused.value.message


@pytest.mark.parametrize("name", TOOLS)
def test_each_tool_has_an_arm64_build_that_is_an_aarch64_executable(name):
    path = _arm64_or_skip(name)
    assert tools.elf_arch(path) == "arm64"
    own = tools.local_tool_for(name, tools.goarch(os.uname().machine))
    assert own is not None and tools.elf_arch(own) == tools.goarch(os.uname().machine)


def test_the_arm64_labkit_go_answers_an_echo_call_under_qemu():
    qemu = shutil.which("qemu-aarch64-static")
    if qemu is None:
        pytest.skip("no qemu-aarch64-static: apt-get install qemu-user-static (scripts/bootstrap.sh does as root)")
    arm64 = _arm64_or_skip("labkit-go")
    with socket.socket() as probe:  # a free loopback port for the server
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([qemu, str(arm64), "serve", "--bind", f"127.0.0.1:{port}"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        # The server says when it listens: its first line.
        assert server.stdout.readline()
        native = tools.local_tool_for("labkit-go", tools.goarch(os.uname().machine))
        call = subprocess.run([str(native), "call", "--target", f"127.0.0.1:{port}", "--sizes", "100",
                               "--repeats", "2", "--gap", "0s"], capture_output=True, text=True, timeout=120)
        assert call.returncode == 0, call.stderr
        assert call.stdout.strip()
    finally:
        server.terminate()
        server.wait(timeout=10)
