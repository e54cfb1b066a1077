"""Root filesystems of other Debian releases, so a testbed host can be a minimal server that is not this machine.

A root is ``debootstrap --variant=minbase`` of a release from Debian's archive, with only what a user's minimal
server has plus what labkit's experiments run on a host (:data:`PACKAGES`): an OpenSSH server, ``python3`` *without*
``python3-venv`` or pip (as stock cloud images ship it), and the probes (ping, iperf3, irtt, tcpdump, iproute2's ip,
ss and tc, procps' sysctl and pgrep, sudo). Each is built once and kept under ``cache_home()/rootfs``
(``~/.cache/labkit/rootfs``)::

    bullseye-amd64-1a2b3c4d/       the root, never written again (each host gets a copy-on-write view or a copy)
    logs/bullseye-amd64-1a2b3c4d   debootstrap's output, for when a build fails
    .bullseye-amd64-1a2b3c4d.lock

The name carries a digest of what went into it (release, architecture, packages, mirror), so a changed package list
builds a new root beside the old one. A build goes into a ``.partial`` directory renamed into place when it is
complete, under a lock file: a second builder waits for the first and then uses its root, and a build killed half way
leaves only a partial directory that the next build removes.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from labkit.errors import LabkitError, TestbedUnavailable

MIRROR = "http://deb.debian.org/debian"
#: The releases a testbed host can run, with what a user's host of that release reports. Both are in Debian's
#: main archive (bullseye as LTS).
RELEASES = {
    "bullseye": {"version": "11", "python": "3.9", "openssh": "8.4"},
    "trixie": {"version": "13", "python": "3.13", "openssh": "10.0"},
}
#: What a host runs beyond minbase: the sshd, the interpreter (python3 alone: no python3-venv, no pip) and every
#: program labkit's experiments start on a host.
PACKAGES = ("openssh-server", "python3", "iproute2", "iputils-ping", "iperf3", "irtt", "tcpdump", "procps", "sudo")
ARCHES = ("amd64", "arm64")
SPEC_RE = re.compile(r"^(?P<suite>[a-z]+)(?:/(?P<arch>[a-z0-9]+))?$")
#: debootstrap's slowest step (a cold download of ~60 packages and their unpacking) takes a few minutes.
BUILD_TIMEOUT_S = 1800


def machine_arch() -> str:
    """This machine's Debian architecture name (amd64 on x86_64, arm64 on aarch64)."""
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine)


@dataclass(frozen=True)
class RootSpec:
    """A root to build or find: a Debian release (``bullseye``) and an architecture (default this machine's)."""

    suite: str
    arch: str = ""

    def __post_init__(self):
        if not self.arch:
            object.__setattr__(self, "arch", machine_arch())

    @classmethod
    def parse(cls, text: str) -> "RootSpec":
        """``bullseye`` or ``bullseye/arm64``; a one-line error naming what is accepted."""
        match = SPEC_RE.match(str(text).strip())
        if not match or match["suite"] not in RELEASES:
            raise LabkitError(f"host root {text!r} must be one of {', '.join(RELEASES)} (optionally /ARCH, e.g. "
                              "bullseye/arm64)")
        spec = cls(match["suite"], match["arch"] or "")
        if spec.arch not in ARCHES:
            raise LabkitError(f"host root {text!r}: architecture must be one of {', '.join(ARCHES)}")
        return spec

    def __str__(self) -> str:
        return self.suite if self.arch == machine_arch() else f"{self.suite}/{self.arch}"

    @property
    def key(self) -> str:
        """The cache entry's name: release, architecture and a digest of everything that went into the root."""
        recipe = json.dumps({"suite": self.suite, "arch": self.arch, "packages": PACKAGES, "mirror": MIRROR,
                             "variant": "minbase"}, sort_keys=True)
        return f"{self.suite}-{self.arch}-{hashlib.sha256(recipe.encode()).hexdigest()[:8]}"

    @property
    def foreign(self) -> bool:
        return self.arch != machine_arch()


def cache_dir() -> Path:
    # Imported here: labkit.deploy pulls in the packaging code, which the testbed's other commands never need.
    from labkit.deploy import cache_home

    return cache_home() / "rootfs"


def root_path(spec: RootSpec) -> Path:
    return cache_dir() / spec.key


def find_root(spec: RootSpec) -> Path | None:
    """The cached root of ``spec`` if it was built (completely), else None."""
    path = root_path(spec)
    return path if (path / "etc" / "labkit-rootfs.json").is_file() else None


def debootstrap() -> str | None:
    """debootstrap's path; Debian keeps it in /usr/sbin, which is not on every PATH."""
    return shutil.which("debootstrap", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")


def missing_root_reason(spec: RootSpec) -> str:
    """Why ``spec``'s root cannot be used now, in one line naming the fix (for tests that skip)."""
    return (f"no {spec} root in {cache_dir()}: build it with `labkit testbed root build {spec}` as root "
            "(scripts/bootstrap.sh does when debootstrap works)")


def ensure_root(spec: RootSpec, log: Callable[[str], None] = print) -> Path:
    """The root of ``spec``, built first if it is not cached; a concurrent build of the same root is waited for."""
    found = find_root(spec)
    if found is not None:
        return found
    if os.geteuid() != 0:
        raise TestbedUnavailable(f"building the {spec} root needs root (debootstrap): {missing_root_reason(spec)}")
    tool = debootstrap()
    if tool is None:
        raise TestbedUnavailable("debootstrap is not installed: apt-get install debootstrap (scripts/bootstrap.sh "
                                 "installs it as root)")
    if spec.foreign:
        raise TestbedUnavailable(f"a {spec.arch} root cannot run on this {machine_arch()} machine's testbed (see "
                                 "docs/testbed.md: arm64 builds are tested under qemu-aarch64-static instead)")
    base = cache_dir()
    base.mkdir(parents=True, exist_ok=True)
    with open(base / f".{spec.key}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"root {spec}: another process is building it; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        found = find_root(spec)
        if found is not None:
            return found
        return _build(spec, tool, base, log)


def _build(spec: RootSpec, tool: str, base: Path, log: Callable[[str], None]) -> Path:
    final = base / spec.key
    for stale in [*base.glob(f".{spec.key}.partial-*"), final]:
        # Under the lock, any partial build is a dead builder's (and a final directory without its stamp, too).
        shutil.rmtree(stale, ignore_errors=True)
    partial = base / f".{spec.key}.partial-{os.getpid()}"
    log_path = base / "logs" / spec.key
    log_path.parent.mkdir(exist_ok=True)
    argv = [tool, "--variant=minbase", f"--arch={spec.arch}", f"--include={','.join(PACKAGES)}", spec.suite,
            str(partial), MIRROR]
    log(f"root {spec}: debootstrap {spec.suite} ({spec.arch}, minbase + {len(PACKAGES)} packages) into {final}; "
        "a few minutes on a cold cache")
    started = time.monotonic()
    phases, last_line = set(), ""
    # LC_ALL=C: debootstrap's lines are parsed for its phases. Its output goes to the log whole.
    env = {**os.environ, "LC_ALL": "C", "DEBIAN_FRONTEND": "noninteractive"}
    with open(log_path, "w") as log_file:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                text=True, env=env)
        try:
            for line in proc.stdout:
                log_file.write(line)
                line = line.strip()
                if line:
                    last_line = line
                phase = re.match(r"^I: (\w+)", line)
                # The first line of each phase (Retrieving, Validating, Extracting, Installing, Configuring...), not
                # one per package: debootstrap alternates some of them package by package.
                if phase and phase[1] not in phases:
                    phases.add(phase[1])
                    log(f"root {spec}: {line[3:]} ({time.monotonic() - started:.0f} s)")
                if line.startswith("E: "):
                    last_line = line
            proc.wait(timeout=BUILD_TIMEOUT_S)
        except BaseException:
            proc.kill()
            proc.wait()
            shutil.rmtree(partial, ignore_errors=True)
            raise
    if proc.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        raise LabkitError(f"debootstrap of the {spec} root failed (exit {proc.returncode}): {last_line[:200]} "
                          f"(whole output in {log_path})")
    # The downloaded packages are not part of a server's root.
    for deb in (partial / "var" / "cache" / "apt" / "archives").glob("*.deb"):
        deb.unlink()
    stamp = {"suite": spec.suite, "arch": spec.arch, "packages": list(PACKAGES), "mirror": MIRROR,
             "built_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
             "build_s": round(time.monotonic() - started, 1)}
    (partial / "etc" / "labkit-rootfs.json").write_text(json.dumps(stamp, indent=2) + "\n")
    os.rename(partial, final)
    log(f"root {spec}: built in {time.monotonic() - started:.0f} s ({final})")
    return final


def describe(path: Path) -> dict:
    """What a built root records of itself (its release, architecture, packages, build time)."""
    return json.loads((path / "etc" / "labkit-rootfs.json").read_text())


_overlay_ok: dict[str, bool] = {}


def overlay_works(lower: Path, scratch: Path) -> bool:
    """Whether an overlay over ``lower`` with its writable layer in ``scratch``'s file system mounts in a mount
    namespace of its own here (kernels and containers differ); tried once per process and file system."""
    key = f"{os.stat(lower).st_dev}:{os.stat(scratch).st_dev}"
    if key not in _overlay_ok:
        probe = scratch / ".overlay-probe"
        shutil.rmtree(probe, ignore_errors=True)
        for part in ("upper", "work", "tree"):
            (probe / part).mkdir(parents=True)
        # The namespace ends with the mount command, and the overlay with it: nothing is left mounted.
        proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "mount", "-t", "overlay",
                               "labkit-probe", "-o", f"lowerdir={lower},upperdir={probe}/upper,workdir={probe}/work",
                               str(probe / "tree")], capture_output=True, text=True, timeout=30)
        shutil.rmtree(probe, ignore_errors=True)
        _overlay_ok[key] = proc.returncode == 0
    return _overlay_ok[key]


def host_tree(lower: Path, where: Path, keys: Path, tag: str) -> tuple["HostRoot", str]:
    """A host's own writable view of the cached root ``lower``, in directory ``where`` (which `testbed down` removes):
    an overlay (its writes in ``where/upper``, mounted by the host's sshd in its namespace) where this kernel allows
    it, else a copy. Returns the :class:`HostRoot` and which of the two it is."""
    # Imported here: the testbed's sshd module is loaded only by a testbed that starts hosts in roots.
    from labkit.testbed.sshd import HostRoot

    where.mkdir(parents=True)
    tree = where / "tree"
    tree.mkdir()
    if overlay_works(lower, where):
        (where / "upper").mkdir()
        (where / "work").mkdir()
        return HostRoot(lower=str(lower), tree=str(tree), keys=str(keys), upper=str(where / "upper"),
                        work=str(where / "work"), tag=tag), "overlay"
    # cp -a keeps owners, modes, links and device files; --reflink=auto shares the blocks where the file system can.
    subprocess.run(["cp", "-a", "--reflink=auto", "--", f"{lower}/.", str(tree)], check=True, capture_output=True,
                   timeout=600)
    return HostRoot(lower=str(lower), tree=str(tree), keys=str(keys), tag=tag), "copy"
