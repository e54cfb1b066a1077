"""An imported file read once, in bounded memory: chunks of whole lines of text, its sha256 and size on the way.

A file of any size is read a block at a time (gunzipped when it is gzip, whatever its name); text is UTF-8,
and a chunk that is not is read line by line as UTF-8 or, failing that, Latin-1, so every byte reaches the
parser (which counts what it does not recognise) instead of stopping the import. A line longer than
:data:`MAX_LINE_BYTES` is cut there (the rest of it skipped): no log line is that long, and a file with no line
ends at all (binary data) must not be held whole. Whatever goes wrong reading it is one :class:`LabkitError`.

The rows are spooled to a temporary Parquet file (:class:`Spool`) until every file of an import has been read
and found importable; only then does a run get them (the file itself when the run is as planned).
"""

from __future__ import annotations

import hashlib
import itertools
import os
import queue
import shutil
import stat
import tempfile
import threading
from pathlib import Path
from typing import Callable, Iterator

from labkit.errors import LabkitError
from labkit.files import gunzip_blocks, open_regular, read_errors
from labkit.interrupts import interrupts_deferred
from labkit.store import samples_writer

GZIP_MAGIC = b"\x1f\x8b"
BLOCK_BYTES = 4 * 2**20
MAX_LINE_BYTES = 2**20


class LogSource:
    """One file to import: :meth:`chunks` reads it; then ``sha256``, ``size_bytes``, ``gzip`` and ``text_bytes``
    (the bytes of text read so far) say what was read."""

    def __init__(self, path: Path, on_read: Callable[[int], None] | None = None):
        self.path = path
        self.on_read = on_read  # told the bytes read so far after each block (progress; on the read-ahead thread)
        self.sha256 = ""
        self.size_bytes = 0
        self.text_bytes = 0
        self.gzip = False
        self.stat: os.stat_result | None = None  # of the file as it was opened

    def _open(self):
        with read_errors(str(self.path), missing=f"no such file: {self.path}"):
            if stat.S_ISDIR(os.stat(self.path).st_mode):
                raise LabkitError(f"{self.path} is a directory, not a log file")
        # A device or FIFO (/dev/zero, /dev/stdin) never ends: refused before it is read, not imported forever.
        return open_regular(self.path, "log file")

    def blocks(self) -> Iterator[bytes]:
        """The file's bytes as stored, block by block, hashed on the way."""
        digest = hashlib.sha256()
        with self._open() as raw:
            self.stat = os.fstat(raw.fileno())
            while block := _read(raw, self.path):
                digest.update(block)
                self.size_bytes += len(block)
                if self.on_read:
                    self.on_read(self.size_bytes)
                yield block
        self.sha256 = digest.hexdigest()

    def text_blocks(self) -> Iterator[bytes]:
        """The file's content (gunzipped when it is gzip), block by block."""
        stored = self.blocks()
        first = next(stored, b"")
        self.gzip = first[:2] == GZIP_MAGIC
        blocks = itertools.chain([first], stored)
        yield from gunzip_blocks(blocks, str(self.path), out_bytes=BLOCK_BYTES) if self.gzip else blocks

    def chunks(self) -> Iterator[str]:
        """The text, in chunks of whole lines (the last may lack its newline)."""
        for data in _whole_lines(self.text_blocks()):
            self.text_bytes += len(data)
            yield decode(data)

    def copy_to(self, target: Path) -> None:
        """Copy the file byte for byte to ``target`` (by the kernel; written beside it and renamed); refuse a
        file that changed since it was read (its size or modification time differ)."""
        partial = target.with_name(f".{target.name}.partial")
        shutil.copyfile(self.path, partial)
        now = os.stat(self.path)
        if (now.st_ino, now.st_size, now.st_mtime_ns) != (self.stat.st_ino, self.stat.st_size, self.stat.st_mtime_ns) \
                or os.stat(partial).st_size != self.size_bytes:
            partial.unlink()
            raise LabkitError(f"{self.path} changed while it was being imported; import it again")
        os.replace(partial, target)

def _read(handle, path: Path) -> bytes:
    with read_errors(str(path), missing=f"no such file: {path}"):
        return handle.read(BLOCK_BYTES)


def _whole_lines(blocks: Iterator[bytes]) -> Iterator[bytes]:
    """Blocks re-cut at line ends; a line longer than :data:`MAX_LINE_BYTES` keeps only its start."""
    pending = b""
    skipping = False  # inside a line already cut short: drop bytes up to its end
    for block in blocks:
        if skipping:
            end = block.find(b"\n")
            if end < 0:
                continue
            block, skipping = block[end + 1:], False
        data = pending + block
        cut = data.rfind(b"\n")
        complete, pending = (data[:cut + 1], data[cut + 1:]) if cut >= 0 else (b"", data)
        if complete:
            yield complete
        if len(pending) > MAX_LINE_BYTES:
            yield pending[:MAX_LINE_BYTES] + b"\n"
            pending, skipping = b"", True
    if pending:
        yield pending


def decode(data: bytes) -> str:
    """UTF-8 text; a chunk that is not is decoded line by line, Latin-1 where UTF-8 fails."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        lines = []
        for line in data.split(b"\n"):
            try:
                lines.append(line.decode("utf-8"))
            except UnicodeDecodeError:
                lines.append(line.decode("latin-1"))
        return "\n".join(lines)


class NotJSON(LabkitError):
    """A file read as a report that does not start as JSON does; ``head`` is its start, as text."""

    def __init__(self, path: Path, head: str):
        super().__init__(f"{path}: not JSON")
        self.head = head


def read_document(path: Path, max_bytes: int) -> tuple[LogSource, str]:
    """A file read whole as one document (a JSON report), which no sane report makes larger than ``max_bytes``."""
    source = LogSource(path)
    parts, size, started = [], 0, False
    for block in source.text_blocks():
        if not started and (start := block.lstrip()):
            started = True
            if start[:1] not in (b"{", b"["):  # binary data or a log: told at once, not after reading it all
                raise NotJSON(path, decode(start[:65536]))
        size += len(block)
        if size > max_bytes:
            raise LabkitError(f"{path}: more than {max_bytes // 2**20} MiB of text, larger than any report "
                              "labkit reads (is it the right file?)")
        parts.append(block)
    source.text_bytes = size
    return source, decode(b"".join(parts))


def ahead(items: Iterator, depth: int = 2) -> Iterator:
    """``items`` made on another thread, up to ``depth`` ahead of the caller, so that reading, gunzipping and a
    parser's vectorised pass (which mostly run without the GIL) overlap the caller's own work. An exception
    raised there is raised here; a caller that stops early stops the thread."""
    made: queue.Queue = queue.Queue(depth)
    stop, done = threading.Event(), object()

    def hand_over(entry) -> bool:
        """Queue ``entry`` for the caller; False once the caller has stopped (it takes nothing more: a full queue
        would hold this thread, and the caller waiting for it, for ever)."""
        while not stop.is_set():
            try:
                made.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def make() -> None:
        try:
            for item in items:
                if not hand_over((item, None)):
                    return
            hand_over((done, None))
        except BaseException as exc:  # handed to the caller, which raises it
            hand_over((done, exc))
        finally:
            getattr(items, "close", lambda: None)()

    thread = threading.Thread(target=make, name="labkit-read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            item, error = made.get()
            if item is done:
                if error is not None:
                    raise error
                return
            yield item
    finally:
        stop.set()
        thread.join()


class Spool:
    """A temporary Parquet file for one file's rows, in its table's schema (the run's columns as planned), written
    a batch at a time on a thread of its own so that encoding overlaps parsing; read back by :meth:`batches` and
    removed by :meth:`close`. When the run turns out as planned, the file becomes its samples.parquet as it is."""

    def __init__(self, schema, run_id: str) -> None:
        # Whole or not at all: a signal between the directory's creation and the set-up of its removal (both inside
        # TemporaryDirectory) left it behind, once in three background runs of the import's signal test.
        with interrupts_deferred():
            self._dir = tempfile.TemporaryDirectory(prefix="labkit-import-")
        self.path = Path(self._dir.name) / "rows.parquet"
        self.schema = schema
        self.run_id = run_id
        self.rows = 0
        self._tables: queue.Queue = queue.Queue(4)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def write(self, table) -> None:
        """Queue ``table`` (of the spool's schema) for the writer; raise what stopped the writer, if anything."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._write_all, name="labkit-spool", daemon=True)
            self._thread.start()
        while True:
            self._raise()
            try:
                self._tables.put(table, timeout=0.1)
                break
            except queue.Full:
                continue
        self.rows += table.num_rows

    def _write_all(self) -> None:
        try:
            with samples_writer(self.path, self.schema, self.run_id) as writer:
                while (table := self._tables.get()) is not None:
                    writer.write_table(table)
        except BaseException as exc:  # raised on the caller's next write or finish
            self._error = exc

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def batches(self) -> Iterator:
        """The rows back, a batch at a time (none if nothing was written)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.finish()
        if not self.rows:
            return
        for batch in pq.ParquetFile(self.path).iter_batches(batch_size=2**17):
            yield pa.Table.from_batches([batch])

    def finish(self) -> None:
        """Wait until every queued table is written and the file closed."""
        if self._thread is not None:
            while self._thread.is_alive():
                try:
                    self._tables.put(None, timeout=0.1)
                    break
                except queue.Full:
                    continue
            self._thread.join()
            self._thread = None
        self._raise()

    def close(self) -> None:
        """Stop the writer (dropping what it has not written) and remove the file."""
        if self._thread is not None:
            while True:  # empty the queue so the writer takes the end mark at once
                try:
                    self._tables.get_nowait()
                except queue.Empty:
                    break
            self._tables.put(None)
            self._thread.join()
            self._thread = None
        self._dir.cleanup()
