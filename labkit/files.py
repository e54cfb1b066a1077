"""Every file a user names to labkit (inventory, experiment file, known_hosts, ssh config, topology, schedule,
traces, TLS files, a hop body, an identity file, a log to import), read with one-line errors.

Whatever the path holds (nothing, a directory, a device such as /dev/zero, a FIFO, a file this user may not read,
binary data, gigabytes) the problem is one :class:`LabkitError` naming the file, never a traceback or a read
without end: a file is opened without blocking, checked to be a regular file, refused above its kind's cap
(``MAX_*_BYTES`` below) before it is read, read no further than the cap, and, when it is text, decoded strictly.
"""

from __future__ import annotations

import os
import stat
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Iterable, Iterator

from labkit.errors import LabkitError
from labkit.limits import MAX_PEM_BYTES

#: The most labkit reads of each kind of file a user names (a larger one is the wrong file), stated per kind:
#: no inventory, experiment file, known_hosts or ssh config comes near 16 MiB;
MAX_TEXT_BYTES = 16 * 2**20
#: a topology has at most 16 hosts (240 directions), a schedule at most 5000 changes;
MAX_TOPOLOGY_BYTES = 2**20
MAX_SCHEDULE_BYTES = 4 * 2**20
#: a delay or rate trace, or a jitter table, is held whole by the emulator (a day of ping at 1/s is ~7 MB;
#: Mahimahi's cellular traces are ~2 MB); the cap holds for a gzip'd trace's text too;
MAX_TRACE_BYTES = 64 * 2**20


def read_file(path: str | os.PathLike, what: str, *, max_bytes: int) -> bytes:
    """The bytes of ``path``, checked first to be a regular file of at most ``max_bytes`` (``what`` names it in
    errors: "inventory", "--delay-trace", ...).

    A device (/dev/zero), a FIFO or a directory is refused before a byte is read, and at most ``max_bytes`` + 1
    bytes are read, so a file that grows after the check is refused too, never read whole.
    """
    path = Path(path).expanduser()
    with open_regular(path, what) as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > max_bytes:
            raise LabkitError(_too_large(what, path, size, max_bytes))
        with read_errors(f"{what} {path}", missing=f"{what} {path} does not exist"):
            data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise LabkitError(_too_large(what, path, len(data), max_bytes))
    return data


def open_regular(path: str | os.PathLike, what: str) -> BinaryIO:
    """``path`` opened for reading in binary, once it is known to be a regular file: a device (/dev/zero), FIFO,
    socket or directory is one :class:`LabkitError` naming it (``what``: "inventory", "--delay-trace", ...),
    before a byte is read. A file streamed in blocks (``labkit import``) is opened here too."""
    path = Path(path).expanduser()
    with read_errors(f"{what} {path}", missing=f"{what} {path} does not exist"):
        # O_NONBLOCK: opening a FIFO with no writer would wait for one; a regular file ignores the flag.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    handle = os.fdopen(fd, "rb")
    mode = os.fstat(fd).st_mode
    if stat.S_ISREG(mode):
        return handle
    handle.close()
    if stat.S_ISDIR(mode):
        raise LabkitError(f"{what} {path} is a directory, not a file")
    raise LabkitError(f"{what} {path} is not a regular file (a device, FIFO or socket), so it has no end to read to")


def read_text_file(path: str | os.PathLike, what: str, *, max_bytes: int = MAX_TEXT_BYTES,
                   gunzip: bool = False) -> str:
    """The UTF-8 text of ``path`` (see :func:`read_file`); binary data is one error naming the file and line.

    ``gunzip``: a gzip file (whatever its name) is read as its content, itself at most ``max_bytes``.
    """
    data = read_file(path, what, max_bytes=max_bytes)
    path = Path(path).expanduser()
    if gunzip and data[:2] == b"\x1f\x8b":
        data = _gunzip(data, what, path, max_bytes)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        text, bad = None, exc.start
    else:
        bad = text.find("\0")  # valid UTF-8, but no text file holds NUL bytes
    if bad >= 0:
        line = data[:bad].count(b"\n") + 1
        raise LabkitError(f"{what} {path} holds binary data (line {line}), not text: is it the right file?")
    return text


def _gunzip(data: bytes, what: str, path: Path, max_bytes: int) -> bytes:
    """gzip data gunzipped (members one after another are one text, as gzip(1) reads them), at most
    ``max_bytes`` of it: a small file may hold gigabytes of zeros."""
    out, size = [], 0
    for piece in gunzip_blocks([data], f"{what} {path}", out_bytes=2**20):
        out.append(piece)
        size += len(piece)
        if size > max_bytes:
            raise LabkitError(f"{what} {path} holds more than {_size(max_bytes)} once gunzipped")
    return b"".join(out)


#: The first input a gzip member is given; each further piece of the same member is twice the one before.
_FIRST_GZIP_PIECE = 256
_MAX_GZIP_PIECE = 2**20


def gunzip_blocks(blocks: Iterable[bytes], name: str, *, out_bytes: int) -> Iterator[bytes]:
    """gzip data, given in ``blocks``, gunzipped at most ``out_bytes`` at a time; members one after another
    (``cat a.gz b.gz``) are one text, as gzip(1) reads them. A damaged one is a :class:`LabkitError` naming ``name``.

    zlib copies the input left over after a member's end (its ``unused_data``), so feeding it a whole block makes
    a file of many small members quadratic: 5 MiB of empty members took 45 s. Each member is fed pieces
    starting small and doubling while it goes on, so what is left over at its end is at most about its own size
    and the work is linear in the file.
    """
    inflate, piece = None, _FIRST_GZIP_PIECE
    try:
        for block in blocks:
            view, at = memoryview(block), 0
            while at < len(view):
                if inflate is None:
                    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
                data = view[at:at + piece]
                at += len(data)
                while True:
                    if out := inflate.decompress(data, out_bytes):
                        yield out
                    if inflate.eof:  # the next member starts where this one's leftover does
                        at -= len(inflate.unused_data)
                        inflate, piece = None, _FIRST_GZIP_PIECE
                        break
                    data = inflate.unconsumed_tail
                    if not data and len(out) < out_bytes:  # all taken, all given out: the member needs more
                        piece = min(piece * 2, _MAX_GZIP_PIECE)
                        break
    except zlib.error as exc:
        raise LabkitError(f"{name}: damaged gzip file ({exc})") from None
    if inflate is not None and not inflate.eof:
        raise LabkitError(f"{name}: damaged gzip file (it ends before its data does)")


def _too_large(what: str, path: Path, size: int, max_bytes: int) -> str:
    return f"{what} {path} is {_size(size)}, more than any {what} (at most {_size(max_bytes)})"


def read_pem_certificates(path: str | os.PathLike, what: str) -> bytes:
    """The PEM bytes of a certificate file (``--tls-ca``, ``--tls-cert``): bounded, and refused in one line naming
    the file when it holds no certificate ssl can load."""
    import ssl

    data = read_file(path, what, max_bytes=MAX_PEM_BYTES)
    try:
        ssl.create_default_context(cadata=data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, ssl.SSLError):
        raise LabkitError(f"{what} {Path(path).expanduser()} is not a valid PEM certificate") from None
    return data


def read_tls_pair(cert_path: str | os.PathLike, key_path: str | os.PathLike) -> tuple[bytes, bytes]:
    """The PEM bytes of ``--tls-cert`` and ``--tls-key``, each checked, so that a bad file is named (gRPC only
    says it "failed to bind to address")."""
    import ssl

    cert = read_pem_certificates(cert_path, "--tls-cert")
    key = read_file(key_path, "--tls-key", max_bytes=MAX_PEM_BYTES)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:  # both files were just read as regular and bounded; ssl reads them by name
        context.load_cert_chain(Path(cert_path).expanduser(), Path(key_path).expanduser(), password=lambda: b"")
    except (ssl.SSLError, ValueError, OSError) as exc:
        reason = getattr(exc, "reason", None) or ""
        why = f" ({reason})" if reason and "PEM" not in reason else ""  # "PEM lib" says no more than the message
        raise LabkitError(f"--tls-key {Path(key_path).expanduser()} is not a valid PEM private key for --tls-cert "
                          f"{Path(cert_path).expanduser()}{why}") from None
    return cert, key


@contextmanager
def read_errors(name: str, *, missing: str) -> Iterator[None]:
    """Reading ``name`` (a file, as the message names it): an OSError inside becomes one :class:`LabkitError`,
    ``missing`` when the file does not exist."""
    try:
        yield
    except FileNotFoundError:
        raise LabkitError(missing) from None
    except PermissionError:
        raise LabkitError(f"cannot read {name}: permission denied") from None
    except OSError as exc:
        raise LabkitError(f"cannot read {name}: {exc.strerror or exc}") from None


def parse_toml(text: str, where: str) -> dict:
    """The table of TOML ``text``, or one line saying where it is not TOML (``where``: "inventory PATH", ...)."""
    # Imported here, not at the top: hosts run labkit's agent side on Python >= 3.9, which may have no tomllib;
    # only the controller (>= 3.11) reads TOML.
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # tomllib's message ends with "(at line N, column M)".
        raise LabkitError(f"{where} is not valid TOML: {exc}") from None


def _size(size: int) -> str:
    return f"{size / 2**20:.1f} MiB" if size >= 2**20 else f"{size} bytes"
