"""The committed stubs in labkit/proto and go/echopb match proto/echo.proto and the pinned grpcio-tools and protoc plugins."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from labkit.proto import regenerate


def test_committed_stubs_are_fresh():
    differences = regenerate.stale_files()
    assert not differences, (
        "committed stubs differ from a fresh build; run `make proto` and commit:\n"
        + "\n".join(differences.values())
    )


def test_check_flag_fails_on_stale_stubs(tmp_path: Path):
    # Build a stub directory with one file edited and check that the comparison notices.
    regenerate.generate(tmp_path)
    grpc_stub = tmp_path / "echo_pb2_grpc.py"
    grpc_stub.write_text(grpc_stub.read_text() + "\n# edited by hand\n")
    assert list(regenerate.stale_files(committed_dir=tmp_path)) == ["echo_pb2_grpc.py"]


@pytest.mark.parametrize("name", ["echo_grpc.pb.go", "echo_vtproto.pb.go"])
def test_check_flag_fails_on_stale_go_stubs(tmp_path: Path, name: str):
    # The Go stubs of labkit-go (vtprotobuf's methods too) are checked as the Python ones: an edited one is
    # reported by name.
    regenerate.generate_go(tmp_path)
    stub = tmp_path / name
    stub.write_text(stub.read_text() + "\n// edited by hand\n")
    assert list(regenerate.stale_files(go_dir=tmp_path)) == [name]


def test_check_cli_exits_zero_when_fresh():
    result = subprocess.run(
        [sys.executable, "-m", "labkit.proto.regenerate", "--check"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_stubs_import_as_package_and_describe_the_published_schema():
    from labkit.proto import echo_pb2, echo_pb2_grpc

    service = echo_pb2.DESCRIPTOR.services_by_name["EchoService"]
    assert echo_pb2.DESCRIPTOR.package == "echo"
    assert {m.name: (m.client_streaming, m.server_streaming) for m in service.methods} == {
        "Echo": (False, False),
        "EchoStream": (True, True),
        "Upload": (True, False),
    }
    # Field numbers are what make other clients interoperate; pin them.
    numbers = {
        message: {f.name: f.number for f in echo_pb2.DESCRIPTOR.message_types_by_name[message].fields}
        for message in ("EchoRequest", "EchoResponse", "Chunk", "UploadStatus")
    }
    assert numbers == {
        "EchoRequest": {"payload": 1},
        "EchoResponse": {"payload_length": 1},
        "Chunk": {"content": 1},
        "UploadStatus": {"message": 1, "code": 2, "bytes_received": 3, "sha256": 4},
    }
    assert dict(echo_pb2.UploadStatusCode.items()) == {"UNKNOWN": 0, "OK": 1, "FAILED": 2}
    assert hasattr(echo_pb2_grpc, "EchoServiceStub")
