"""The machine labkit runs on (optionally inside a network namespace), through subprocess."""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass

from labkit.errors import LabkitError
from labkit.hosts.privilege import Becomes


@dataclass
class Result:
    """What a finished command left behind."""

    argv: list[str]
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def command_name(argv: list[str]) -> str:
    """What a person calls the command ``argv`` runs, for an error line: the program and its subcommands, no flags
    or values (``labkit echo upload-agent``, ``labkit-go upload``); a ``python -m labkit`` agent is named labkit."""
    words = argv[2:] if len(argv) > 2 and argv[1] == "-m" else [os.path.basename(argv[0]), *argv[1:]]
    name = []
    for word in words:
        if word.startswith("-") or len(name) == 3:
            break
        name.append(word)
    return " ".join(name)


class Silent(LabkitError):
    """A background process wrote no stdout line for ``seconds``: the caller's watchdog for a stuck process."""

    def __init__(self, command: str, seconds: float):
        super().__init__(f"no output from `{command}` for {seconds:g} s")
        self.command, self.seconds = command, seconds


class BackgroundProcess:
    """What every host's background process offers: stdout lines as they arrive, then stop.

    Subclasses feed ``_lines`` (``None`` marks the end of stdout) and
    ``stderr_lines``, and implement :attr:`pid`, :meth:`poll`, :meth:`wait` and
    :meth:`stop`; reading lines works the same on every host.
    """

    def __init__(self, argv: list[str]):
        self.argv = argv
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.stderr_lines: list[str] = []
        self._readers: list[threading.Thread] = []  # the subclass's stdout/stderr readers

    def _start_readers(self) -> None:
        """Read stdout and stderr on threads of their own (``_pump_stdout``/``_pump_stderr``), so neither pipe fills."""
        self._readers = [
            threading.Thread(target=self._pump_stdout, daemon=True),
            threading.Thread(target=self._pump_stderr, daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _join_readers(self, timeout: float = 2.0) -> None:
        """Once the process has ended, let the readers take what it wrote last.

        The exit status can arrive before the last stderr line (often the
        reason it exited) has been read; callers of wait() expect it there.
        """
        for reader in self._readers:
            reader.join(timeout)

    @property
    def pid(self) -> int:
        raise NotImplementedError

    def poll(self) -> int | None:
        """The exit status if the process has ended, else None."""
        raise NotImplementedError

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the process to end and return its exit status."""
        raise NotImplementedError

    def stop(self, grace_s: float = 3.0) -> int:
        raise NotImplementedError

    @property
    def returncode(self) -> int | None:
        return self.poll()

    def last_words(self, status: int | None = None) -> str:
        """Why the process ended, for a one-line error: its last stderr line, else its exit status."""
        return self.stderr_lines[-1] if self.stderr_lines else f"exit status {status if status is not None else self.poll()}"

    def lines(self, timeout: float | None = None):
        """Yield stdout lines as they arrive until the process closes stdout."""
        while True:
            try:
                line = self._lines.get(timeout=timeout)
            except queue.Empty:
                raise Silent(command_name(self.argv), timeout) from None
            if line is None:
                return
            yield line

    def wait_for_line(self, predicate, timeout: float) -> str:
        """Return the first stdout line for which ``predicate`` is true, within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            try:
                line = self._lines.get(timeout=max(0.0, remaining))
            except queue.Empty:
                line = ""
                if remaining <= 0:
                    break
            if line is None:
                try:
                    status = f"exit {self.wait(timeout=5)}"
                except LabkitError:
                    status = "it closed stdout"
                detail = self.stderr_lines[-1] if self.stderr_lines else status
                raise LabkitError(f"`{' '.join(self.argv)}` exited before it was ready: {detail}")
            if line and predicate(line):
                return line
        raise LabkitError(f"`{' '.join(self.argv)}` was not ready within {timeout:g} s")

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.stop()


class Process(BackgroundProcess):
    """A long-running command started by a host: read its stdout lines, then stop it.

    The command runs in its own session, so :meth:`stop` can signal its whole
    process group (a server and any children it forked).
    """

    def __init__(self, popen: subprocess.Popen, argv: list[str]):
        super().__init__(argv)
        self.popen = popen
        self._start_readers()

    def _pump_stdout(self) -> None:
        for line in self.popen.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)  # end of output

    def _pump_stderr(self) -> None:
        for line in self.popen.stderr:
            self.stderr_lines.append(line.rstrip("\n"))

    @property
    def pid(self) -> int:
        return self.popen.pid

    def poll(self) -> int | None:
        return self.popen.poll()

    def wait(self, timeout: float | None = None) -> int:
        try:
            status = self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise LabkitError(f"`{' '.join(self.argv)}` did not end within {timeout:g} s") from None
        self._join_readers()
        return status

    def stop(self, grace_s: float = 3.0) -> int:
        """SIGTERM the process group, SIGKILL it after ``grace_s``; return the exit status."""
        if self.popen.poll() is None:
            self._signal_group(signal.SIGTERM)
            try:
                self.popen.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
                self.popen.wait()
        # Children that outlived the leader still share its group.
        self._signal_group(signal.SIGKILL)
        for reader in self._readers:
            reader.join(timeout=1)
        return self.popen.returncode

    def _signal_group(self, signum: int) -> None:
        try:
            os.killpg(self.popen.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass


class LocalHost(Becomes):
    """This machine; with ``netns``, commands run inside that network namespace.

    ``become="sudo"``: commands that need root run through ``sudo -n`` unless labkit already runs as root.
    """

    def __init__(self, name: str = "local", netns: str | None = None, env: dict[str, str] | None = None,
                 become: str | None = None):
        self.name = name
        self.netns = netns
        self.become = become
        # LC_ALL=C: tools such as ping print locale-dependent decimal separators.
        self.env = {**os.environ, "LC_ALL": "C", **(env or {})}

    def _wrap(self, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.netns, *argv] if self.netns else list(argv)

    def run(self, argv: list[str], *, timeout: float = 60, check: bool = False) -> Result:
        """Run ``argv`` to completion."""
        try:
            proc = subprocess.run(self._wrap(argv), capture_output=True, text=True, timeout=timeout, env=self.env)
        except FileNotFoundError as exc:
            raise LabkitError(f"{argv[0]} is not installed on {self.name}") from exc
        except subprocess.TimeoutExpired as exc:
            raise LabkitError(f"`{' '.join(argv)}` on {self.name} took longer than {timeout:g} s") from exc
        result = Result(argv, proc.returncode, proc.stdout, proc.stderr)
        if check and not result.ok:
            detail = (result.stderr or result.stdout).strip().splitlines()
            raise LabkitError(f"`{' '.join(argv)}` failed on {self.name}: {detail[-1] if detail else result.returncode}")
        return result

    def start(self, argv: list[str]) -> Process:
        """Start ``argv`` in the background in its own session; stdout/stderr are read line by line."""
        popen = subprocess.Popen(
            self._wrap(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
            env=self.env,
            start_new_session=True,
        )
        return Process(popen, argv)

    def read_sysctl(self, key: str) -> str:
        return self.run(["sysctl", "-n", key], check=True).stdout.strip()

    def write_sysctl(self, key: str, value: str) -> None:
        self.run_privileged(["sysctl", "-q", "-w", f"{key}={value}"], check=True)

    def logs_in_as_root(self) -> bool:
        return os.geteuid() == 0

    # -- files (the same calls as SSHHost's; namespaces share this filesystem) ----------------
    def put(self, local: str | os.PathLike, remote: str | os.PathLike, *, mode: int | None = None) -> None:
        """Copy a file; ``mode`` is set before any byte is written, so a private file is never readable."""
        target = os.path.expanduser(remote)
        if mode is not None:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
            os.fchmod(fd, mode)
            os.close(fd)
        shutil.copyfile(local, target)

    def get(self, remote: str | os.PathLike, local: str | os.PathLike) -> None:
        shutil.copyfile(os.path.expanduser(remote), local)

    def read_bytes(self, path: str) -> bytes:
        try:
            with open(os.path.expanduser(path), "rb") as source:
                return source.read()
        except OSError as exc:
            raise LabkitError(f"cannot read {self.name}:{path}: {exc.strerror or exc}") from None

    def exists(self, path: str) -> bool:
        return os.path.lexists(os.path.expanduser(path))

    def make_dir(self, path: str, *, private: bool = False) -> None:
        target = os.path.expanduser(path)
        os.makedirs(target, mode=0o700 if private else 0o777, exist_ok=True)
        if private:
            os.chmod(target, 0o700)

    def make_temp_dir(self, prefix: str) -> str:
        return tempfile.mkdtemp(prefix=prefix)

    def chmod(self, path: str, mode: int) -> None:
        os.chmod(os.path.expanduser(path), mode)

    def rename(self, source: str, target: str) -> None:
        os.replace(os.path.expanduser(source), os.path.expanduser(target))

    def remove(self, path: str) -> None:
        target = os.path.expanduser(path)
        if os.path.isdir(target) and not os.path.islink(target):
            shutil.rmtree(target, ignore_errors=True)
        elif os.path.lexists(target):
            os.unlink(target)

    def close(self) -> None:
        """Nothing to release; here so code can close any host."""

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
