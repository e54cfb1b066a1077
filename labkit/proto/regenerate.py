"""Regenerate the committed gRPC stubs in this package from ``proto/echo.proto``.

Usage (``make proto`` runs the first)::

    python -m labkit.proto.regenerate          # rewrite labkit/proto/echo_pb2*.py{,i} and go/echopb/*.pb.go
    python -m labkit.proto.regenerate --check  # exit 1 if the committed stubs are stale

The Go stubs of ``labkit-go`` come from the same protoc (grpcio-tools'), with
the pinned protoc-gen-go, protoc-gen-go-grpc and protoc-gen-go-vtproto that
``scripts/bootstrap.sh`` builds into the venv's ``bin/``. The last writes
``echo_vtproto.pb.go``: vtprotobuf's MarshalVT, UnmarshalVT and SizeVT of each
message, which ``--grpc-option codec=vtproto`` (go/internal/codec) uses.

The stubs are committed, rather than built at install time, so that installing
labkit needs no protoc. The price is that they can drift from the .proto or from
the pinned grpcio-tools; ``--check`` and tests/test_proto.py catch that.

protoc writes ``import echo_pb2`` in the service stub, which only works when the
output directory is on ``sys.path``. We rewrite it to a package-relative import
so the stubs load as ``labkit.proto.echo_pb2_grpc`` without touching sys.path.
"""

from __future__ import annotations

import argparse
import difflib
import importlib.metadata
import importlib.resources
import re
import shutil
import sys
import tempfile
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
PROTO_DIR = PACKAGE_DIR.parents[1] / "proto"
PROTO_FILE = "echo.proto"

# The files protoc writes for echo.proto, in the order we report them.
GENERATED_FILES = ("echo_pb2.py", "echo_pb2.pyi", "echo_pb2_grpc.py")
# The Go stubs, their directory in the repository and their Go import path (echo.proto names no go_package).
GO_DIR = PACKAGE_DIR.parents[1] / "go" / "echopb"
GO_IMPORT_PATH = "labkit/go/echopb"
GO_FILES = ("echo.pb.go", "echo_grpc.pb.go", "echo_vtproto.pb.go")
GO_PLUGINS = ("protoc-gen-go", "protoc-gen-go-grpc", "protoc-gen-go-vtproto")
# What codec=vtproto needs of vtprotobuf, and no more: no pooling, equal or clone, nor its own gRPC stubs.
VTPROTO_FEATURES = "marshal+unmarshal+size"


def go_plugin(name: str) -> Path:
    """A protoc plugin built by bootstrap into this venv's bin/ (or found on PATH)."""
    candidate = Path(sys.prefix) / "bin" / name
    found = candidate if candidate.exists() else shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} is not installed: scripts/bootstrap.sh builds it into .venv/bin")
    return Path(found)

_ABSOLUTE_IMPORT = re.compile(r"^import (echo_pb2) as (\w+)$", re.MULTILINE)


def generate(out_dir: Path, proto_dir: Path = PROTO_DIR) -> dict[str, str]:
    """Run the installed grpc_tools.protoc on ``echo.proto`` into ``out_dir``.

    Returns the text of each generated file, with imports made package-relative.
    """
    from grpc_tools import protoc  # dev dependency: imported only when regenerating

    source = proto_dir / PROTO_FILE
    if not source.is_file():
        raise FileNotFoundError(f"{source} not found: regenerate from a source checkout of labkit")
    # grpc_tools ships the well-known .proto files (google/protobuf/*.proto);
    # pass them as an include path so an import of, say, timestamp.proto resolves
    # to the copy matching the pinned version rather than whatever the host has.
    well_known = importlib.resources.files("grpc_tools") / "_proto"
    out_dir.mkdir(parents=True, exist_ok=True)
    # -I proto_dir with a bare file name keeps the descriptor's file name
    # "echo.proto", independent of where the checkout lives; reflection clients
    # (grpcurl, ghz) see that name.
    status = protoc.main(
        [
            "grpc_tools.protoc",
            f"-I{proto_dir}",
            f"-I{well_known}",
            f"--python_out={out_dir}",
            f"--pyi_out={out_dir}",
            f"--grpc_python_out={out_dir}",
            PROTO_FILE,
        ]
    )
    if status != 0:
        raise RuntimeError(f"protoc failed on {source} (exit status {status})")

    texts = {}
    for name in GENERATED_FILES:
        path = out_dir / name
        text = _ABSOLUTE_IMPORT.sub(r"from . import \1 as \2", path.read_text())
        path.write_text(text)
        texts[name] = text
    return texts


def generate_go(out_dir: Path, proto_dir: Path = PROTO_DIR) -> dict[str, str]:
    """The Go stubs of echo.proto (package ``echopb``) into ``out_dir``; the text of each file."""
    from grpc_tools import protoc

    out_dir.mkdir(parents=True, exist_ok=True)
    mapping = f"M{PROTO_FILE}={GO_IMPORT_PATH}"
    status = protoc.main([
        "grpc_tools.protoc", f"-I{proto_dir}",
        *(f"--plugin={name}={go_plugin(name)}" for name in GO_PLUGINS),
        f"--go_out={out_dir}", "--go_opt=paths=source_relative", f"--go_opt={mapping}",
        f"--go-grpc_out={out_dir}", "--go-grpc_opt=paths=source_relative", f"--go-grpc_opt={mapping}",
        f"--go-vtproto_out={out_dir}", "--go-vtproto_opt=paths=source_relative", f"--go-vtproto_opt={mapping}",
        f"--go-vtproto_opt=features={VTPROTO_FEATURES}",
        PROTO_FILE,
    ])
    if status != 0:
        raise RuntimeError(f"protoc failed to write the Go stubs of {proto_dir / PROTO_FILE} (exit status {status})")
    return {name: (out_dir / name).read_text() for name in GO_FILES}


def stale_files(committed_dir: Path = PACKAGE_DIR, proto_dir: Path = PROTO_DIR, go_dir: Path = GO_DIR) -> dict[str, str]:
    """Return ``{file name: unified diff}`` for each committed stub (Python and Go) that differs from a fresh build."""
    with tempfile.TemporaryDirectory(prefix="labkit-proto-") as tmp:
        fresh = {committed_dir / name: text for name, text in generate(Path(tmp) / "py", proto_dir).items()}
        fresh.update({go_dir / name: text for name, text in generate_go(Path(tmp) / "go", proto_dir).items()})
    differences = {}
    for committed_path, fresh_text in fresh.items():
        name = committed_path.name
        committed_text = committed_path.read_text() if committed_path.exists() else ""
        if committed_text != fresh_text:
            diff = difflib.unified_diff(
                committed_text.splitlines(keepends=True),
                fresh_text.splitlines(keepends=True),
                fromfile=f"committed/{name}",
                tofile=f"generated/{name}",
            )
            differences[name] = "".join(diff)
    return differences


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labkit.proto.regenerate", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 and show a diff if the committed stubs differ from freshly generated ones",
    )
    args = parser.parse_args(argv)
    tools_version = importlib.metadata.version("grpcio-tools")

    if args.check:
        differences = stale_files()
        for diff in differences.values():
            sys.stdout.write(diff)
        if differences:
            print(
                f"stale stubs: {', '.join(differences)} (grpcio-tools {tools_version}); "
                "run `make proto` and commit the result",
                file=sys.stderr,
            )
            return 1
        print(f"stubs are up to date (grpcio-tools {tools_version})", file=sys.stderr)
        return 0

    generate(PACKAGE_DIR)
    generate_go(GO_DIR)
    print(f"regenerated {', '.join(GENERATED_FILES)} in {PACKAGE_DIR} and {', '.join(GO_FILES)} in {GO_DIR} "
          f"with grpcio-tools {tools_version}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
