"""Host facts recorded for every run: kernel, login user, TCP sysctls, the route to the peer, tool versions.

Collection runs plain commands through any host (local, namespace or SSH) and
hands their output to the pure parsing functions below, so a host without
labkit installed can still be described. A command that is missing or fails
leaves its fact as None; it never fails the run.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from labkit.echo.cputime import parse_start_ticks
from labkit.echo.plans import go_twin_args
from labkit.errors import LabkitError
from labkit.parsers.iproute import parse_link_mtu, parse_qdisc, parse_route_get, parse_sysctl_output

TCP_SYSCTLS = (
    "net.ipv4.tcp_slow_start_after_idle",
    "net.ipv4.tcp_congestion_control",
    "net.ipv4.tcp_available_congestion_control",
    "net.ipv4.tcp_allowed_congestion_control",
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_notsent_lowat",
    "net.ipv4.tcp_no_metrics_save",
    "net.core.default_qdisc",
)


#: How each tool labkit drives on a host says its version (which also tells whether it is there).
TOOL_VERSION_ARGV = {
    "iperf3": ["iperf3", "--version"],
    "irtt": ["irtt", "version"],  # its first line: "irtt version: 0.9.0"
    "ping": ["ping", "-V"],
    "ss": ["ss", "--version"],
}


def first_line(text: str) -> str | None:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else None


def _output(host, argv: list[str], *, partial_ok: bool = False) -> str | None:
    """stdout of ``argv`` on ``host``; None when it failed (unless ``partial_ok``: keep what it printed)."""
    try:
        result = host.run(argv, timeout=20)
    except Exception:  # a missing tool or a dead host must not stop fact collection
        return None
    return result.stdout if result.returncode == 0 or partial_ok else None


def tool_versions(host) -> dict[str, str | None]:
    """Each tool of :data:`TOOL_VERSION_ARGV`: the first line of its version, or None when it is missing or fails."""
    return {tool: first_line(_output(host, argv) or "") for tool, argv in TOOL_VERSION_ARGV.items()}


def count_cpu_list(text: str) -> int | None:
    """How many CPUs a kernel CPU list names (``/sys/devices/system/cpu/online``: ``0-1``, ``0,2-3``); None if empty
    or unreadable."""
    count = 0
    try:
        for part in text.strip().split(","):
            low, _, high = part.partition("-")
            count += int(high or low) - int(low) + 1
    except ValueError:
        return None
    return count or None


def read_text(host, path: str) -> str | None:
    """A small file's text on ``host`` (a /sys or /proc value), or None when it cannot be read."""
    try:
        return host.read_bytes(path).decode(errors="replace")
    except Exception:  # a missing file or a dead host must not stop fact collection
        return None


#: How many of a host's fact commands run at once: each is a round trip to the host (an SSH channel and a process
#: started there, ~0.2 s), and one after another they were most of a short run's fixed cost. sshd allows 10
#: sessions per connection (MaxSessions), and the run may hold others open meanwhile.
PARALLEL_COMMANDS = 6

PYTHON_VERSIONS_CODE = (
    "import json, platform\n"
    "from importlib.metadata import version, PackageNotFoundError\n"
    "def v(p):\n"
    "    try: return version(p)\n"
    "    except PackageNotFoundError: return None\n"
    "print(json.dumps({'python': platform.python_version(), "
    "'grpcio': v('grpcio'), 'protobuf': v('protobuf'), 'labkit': v('labkit')}))"
)


#: The kernel's clock discipline, read with adjtimex(2) in read-only mode (any user may), and the time daemons
#: running: whatever keeps the clock (chrony, timesyncd, ntpd, ptp4l), the kernel knows whether it is synchronised
#: and its error bounds, where a daemon's own tool (chronyc, timedatectl) may be absent or need systemd.
CLOCK_CODE = (
    "import ctypes, json, os\n"
    "L = ctypes.c_long\n"
    "class T(ctypes.Structure):\n"
    "    _fields_ = [('modes', ctypes.c_uint), ('offset', L), ('freq', L), ('maxerror', L), ('esterror', L),\n"
    "                ('status', ctypes.c_int), ('constant', L), ('precision', L), ('tolerance', L), ('sec', L),\n"
    "                ('usec', L), ('tick', L), ('ppsfreq', L), ('jitter', L), ('shift', ctypes.c_int), ('stabil', L),\n"
    "                ('jitcnt', L), ('calcnt', L), ('errcnt', L), ('stbcnt', L), ('tai', ctypes.c_int),\n"
    "                ('pad', ctypes.c_int * 11)]\n"
    "t = T()\n"
    "state = ctypes.CDLL(None, use_errno=True).adjtimex(ctypes.byref(t))\n"
    "names = set()\n"
    "for pid in os.listdir('/proc'):\n"
    "    try: names.add(open('/proc/%s/comm' % pid).read().strip())\n"
    "    except OSError: pass\n"
    "print(json.dumps({'state': state, 'status': t.status, 'maxerror_us': t.maxerror, 'esterror_us': t.esterror,\n"
    "                  'offset_ns': t.offset if t.status & 0x2000 else t.offset * 1000,\n"
    "                  'daemons': sorted(names & {'chronyd', 'systemd-timesyncd', 'ntpd', 'openntpd', 'ptp4l', 'phc2sys'})}))"
)


def parse_clock_state(text: str | None, boot_id: str | None) -> dict[str, Any]:
    """The host's clock facts from :data:`CLOCK_CODE`'s line and its ``boot_id``: hosts with one boot id run one
    kernel and read one clock (:func:`labkit.analysis.oneway.share_a_clock`). ``synchronized`` is the kernel's
    word: not TIME_ERROR (5) and STA_UNSYNC (0x40) clear; None when it could not be read."""
    facts: dict[str, Any] = {"boot_id": first_line(boot_id or ""), "synchronized": None}
    try:
        state = json.loads(first_line(text or "") or "null")
    except ValueError:
        state = None
    if isinstance(state, dict) and isinstance(state.get("status"), int):
        facts.update(state, synchronized=state.get("state") != 5 and not state["status"] & 0x40)
    return facts


def collect_facts(host, peer_address: str | None = None, python_argv: list[str] | None = None) -> dict[str, Any]:
    """Everything a reader needs to trust and repeat a measurement made on ``host``.

    ``peer_address`` is where this host sends experiment traffic (the route,
    its MTU and congestion control are recorded for it); ``python_argv`` runs
    the Python that labkit uses on the host, for library versions.
    """
    # -e: a key this kernel (or namespace) lacks is skipped, not fatal to the others.
    commands = {"uname": (["uname", "-srvm"], False), "user": (["id", "-un"], False),
                "sysctl": (["sysctl", "-e", *TCP_SYSCTLS], True),
                **{f"tool:{tool}": (argv, False) for tool, argv in TOOL_VERSION_ARGV.items()}}
    if peer_address:
        commands["route"] = (["ip", "-o", "route", "get", peer_address], False)
    if python_argv:
        commands["python"] = ([*python_argv, "-c", PYTHON_VERSIONS_CODE], False)
        commands["clock"] = ([*python_argv, "-c", CLOCK_CODE], False)
    with ThreadPoolExecutor(PARALLEL_COMMANDS) as pool:
        clocksource = pool.submit(read_text, host, "/sys/devices/system/clocksource/clocksource0/current_clocksource")
        cpus = pool.submit(read_text, host, "/sys/devices/system/cpu/online")
        boot_id = pool.submit(read_text, host, "/proc/sys/kernel/random/boot_id")
        futures = {key: pool.submit(_output, host, argv, partial_ok=partial) for key, (argv, partial) in commands.items()}
        out = {key: future.result() for key, future in futures.items()}
        route = parse_route_get(out.get("route") or "")
        if route.get("dev"):  # these two need the route's device
            link = pool.submit(_output, host, ["ip", "-o", "link", "show", "dev", route["dev"]])
            qdisc = pool.submit(_output, host, ["tc", "qdisc", "show", "dev", route["dev"]])
            out["link"], out["qdisc"] = link.result(), qdisc.result()
        out["clocksource"] = clocksource.result()
        out["cpus"] = cpus.result()
        out["boot_id"] = boot_id.result()
    return _facts_from(host, out, peer_address, route)


def _facts_from(host, out: dict[str, str | None], peer_address: str | None, route: dict[str, Any]) -> dict[str, Any]:
    """The facts, from each fact command's output (None where it failed)."""
    facts: dict[str, Any] = {"host": host.name}
    facts["uname"] = first_line(out["uname"]) if out["uname"] else None
    facts["kernel"] = facts["uname"].split()[1] if facts["uname"] else None
    # Who ran the commands, and whether kernel settings went through `sudo -n` (labkit.hosts.privilege).
    facts["login"] = {"user": first_line(out["user"] or ""), "become": getattr(host, "become", None)}
    facts["sysctl"] = parse_sysctl_output(out["sysctl"] or "")
    facts["clocksource"] = first_line(out["clocksource"] or "")
    # The cores the host's processes share: what a share of CPU (a load tool's, a server's) is a share of.
    facts["cpus_online"] = count_cpu_list(out.get("cpus") or "")
    # Whether its clock is kept, and which other hosts read the same one: what a one-way delay's bound rests on.
    facts["clock"] = parse_clock_state(out.get("clock"), out.get("boot_id"))
    if peer_address:
        line = out["route"] or ""
        facts["route_to_peer"] = {"peer": peer_address, "line": " ".join(line.split()) or None, **route}
        if route.get("dev"):
            facts["interface_mtu"] = parse_link_mtu(out["link"] or "")
            facts["qdisc"] = parse_qdisc(out["qdisc"] or "")
    facts["tools"] = {tool: first_line(out[f"tool:{tool}"] or "") for tool in TOOL_VERSION_ARGV}
    if out.get("python"):
        try:
            facts["python"] = json.loads(first_line(out["python"]) or "{}")
        except ValueError:
            facts["python"] = None
    return facts


def process_start_ticks(host, pid: int) -> int | None:
    """When process ``pid`` on ``host`` started (clock ticks since boot); None when there is no such process."""
    try:
        return parse_start_ticks(host.read_bytes(f"/proc/{pid}/stat").decode())
    except (LabkitError, ValueError, IndexError):
        return None


#: The programs labkit starts in the background on a host (Session.start): its own agents and servers, labkit-go,
#: and the tools its experiments run. A process a run recorded under any other name was not started by labkit.
LABKIT_PROGRAMS = frozenset({"labkit", "labkit-go", "iperf3", "tcpdump", "ping", "nats-server", "ghz", "h2load", "wrk",
                             "vegeta", "irtt"})


def looks_like_labkits(argv: object) -> bool:
    """Whether ``argv`` is a command line of the kind labkit starts: one of :data:`LABKIT_PROGRAMS` or a Python
    running ``-m labkit``, also behind the ``sudo -n --`` that :meth:`Host.privileged_argv` puts before a tool."""
    if not isinstance(argv, list) or not argv or not all(isinstance(word, str) for word in argv):
        return False
    if argv[:3] == ["sudo", "-n", "--"]:
        argv = argv[3:]
    if not argv:
        return False
    program = argv[0].rsplit("/", 1)[-1]
    if program in LABKIT_PROGRAMS:
        return True
    return program.startswith("python") and argv[1:3] == ["-m", "labkit"]


def not_the_process(host, entry: dict[str, Any]) -> str | None:
    """Why the process a run recorded (``pid``, ``start_ticks``, ``argv``) is not the one now running under its
    pid, or None when it still is: a pid freed when labkit's process ended may have gone to another process.

    The process must have its recorded start time (when one was recorded) and its recorded command line. With no
    process of that pid left, its group may still hold the leader's children (Linux gives no new process a pid
    still in use as a group id): each of them must look like labkit's.
    """
    pid = entry["pid"]
    started = process_start_ticks(host, pid)
    if started is None:
        return _not_labkits_group(host, pid)
    if entry.get("start_ticks") is not None and started != entry["start_ticks"]:
        return f"pid {pid} is now another process (another start time)"
    try:
        argv = host.read_bytes(f"/proc/{pid}/cmdline").decode(errors="replace").split("\0")[:-1]
    except LabkitError:  # the process ended in between
        return _not_labkits_group(host, pid)
    if argv == list(entry["argv"]) or _execd_into_go(argv, list(entry["argv"])):
        return None
    if not argv and entry.get("start_ticks") is not None:
        return None  # the recorded process itself (its start time), ended and not yet reaped: its group may be left
    return f"pid {pid} now runs {' '.join(argv)[:60]!r}"


def _execd_into_go(now: list[str], recorded: list[str]) -> bool:
    """Whether ``now`` is the command line ``recorded`` (`labkit echo SUBCOMMAND ... --impl go`) has after it exec'd
    into its Go twin: labkit-go, with the arguments `labkit echo` hands it (the start time was checked before)."""
    for index, word in enumerate(recorded[:4]):
        if word == "echo" and looks_like_labkits(recorded[:index]):
            twin = go_twin_args(recorded[index + 1:])
            return twin is not None and bool(now) and now[0].rsplit("/", 1)[-1] == "labkit-go" and now[1:] == twin
    return False


def _not_labkits_group(host, pgid: int) -> str | None:
    """Why the processes left in group ``pgid`` (its leader gone) are not labkit's, or None when they all are."""
    found = host.run(["pgrep", "-a", "-g", str(pgid)])
    for line in found.stdout.splitlines():
        member, _, command = line.partition(" ")
        if not looks_like_labkits(command.split()):
            return f"process group {pgid} now holds pid {member} running {command[:60]!r}"
    return None
