"""`labkit testbed up | down | status | repair`: the local two-host WAN testbed."""

from __future__ import annotations

import dataclasses
import datetime
import json

import click

from labkit.cli.params import DURATION_WITH_UNIT, RATE
from labkit.testbed.lab import LinkConfig, Testbed, all_testbed_names
from labkit.testbed.login import LoginUser
from labkit.testbed.netns import check_can_host_testbed
from labkit.testbed.schedule import read_schedule
from labkit.testbed.topology import Topology, read_topology

NAME_OPTION = click.option(
    "--name", default="labkit", show_default=True,
    help="Testbed name; several testbeds with different names can coexist.",
)


@click.group()
def testbed():
    """The local testbed: network namespaces (hosts a and b, or a topology's)
    joined by emulated WAN links, each running its own sshd so labkit reaches
    them over SSH like any remote VM. Each direction of each link has netem's
    parameters (delay, jitter, loss, duplication, reordering, rate and queue)
    and Mahimahi's traces, changeable live and on a schedule. Needs root,
    iproute2, /dev/net/tun, openssh-server and labkit-go (make bootstrap).
    """


def _link_options(function):
    """The link flags of `testbed up`; each applies to each direction of every link, netem's meanings."""
    options = [
        click.option("--one-way-delay", "delay", type=DURATION_WITH_UNIT, default="100ms", show_default=True,
                     help="Delay added in each direction (RTT is twice this), with its unit: 100ms, 50ms."),
        click.option("--rate", type=RATE, default="100mbit", show_default=True,
                     help="Link rate in each direction (tc units: 100mbit, 1gbit), or 'none' for no limit."),
        click.option("--jitter", default="0ms", show_default=True, metavar="'TIME [CORR%]'",
                     help="Delay variation one way, at most 10s: the standard deviation (normal), the half-width "
                          "(uniform, the default) or the scale (pareto, paretonormal, table) of --jitter-distribution, "
                          "and optionally the correlation of successive delays, e.g. '5ms 25%'. Packets keep their "
                          "order (a later one never overtakes) unless --reorder asks."),
        click.option("--jitter-distribution", default="uniform", show_default=True,
                     metavar="uniform|normal|pareto|paretonormal|FILE",
                     help="netem's distributions, or a FILE of measured values (its shape, standardized; "
                          "a .dist file is an iproute2 table)."),
        click.option("--loss", default="0%", show_default=True, metavar="'P% [CORR%]'",
                     help="Packet loss one way: random, optionally correlated ('0.1% 25%'); with --loss-model "
                          "gemodel, Gilbert-Elliott 'p [r [1-h [1-k]]]' ('1% 25%': bursts of 4 on average)."),
        click.option("--loss-model", type=click.Choice(["random", "gemodel"]), default="random", show_default=True),
        click.option("--duplicate", default="0%", show_default=True, metavar="'P% [CORR%]'",
                     help="Duplicate packets with this probability."),
        click.option("--reorder", default="0%", show_default=True, metavar="'P% [CORR%] [gap N]'",
                     help="Send packets at once, ahead of the delayed ones (netem's reorder; needs a delay)."),
        click.option("--queue", default="bdp", show_default=True, metavar="bdp|NBDP|PACKETS|BYTES",
                     help="What may wait for --rate: bandwidth-delay products of the link (2bdp), packets "
                          "(1000) or bytes (1.5mb); beyond it packets are dropped."),
        click.option("--aqm", default="droptail", show_default=True, metavar="'droptail|codel [target T] [interval I]'",
                     help="How the queue drops: at its tail when full, or CoDel (RFC 8289)."),
        click.option("--delay-trace", type=click.Path(dir_okay=False), metavar="FILE",
                     help="One-way delay over time: 'SECONDS DELAY_MS' lines, or a ping log (half its RTTs); "
                          "loops; replaces --one-way-delay. A regular file of at most 64 MiB (gzip'd too)."),
        click.option("--delay-trace-step", metavar="TIME",
                     help="With a ping log: the time between its probes (default its -D timestamps, else 1s); "
                          "a shorter step replays it faster."),
        click.option("--rate-trace", type=click.Path(dir_okay=False), metavar="FILE",
                     help="Mahimahi trace: a delivery of 1504 bytes at each listed millisecond; loops; "
                          "replaces --rate. A regular file of at most 64 MiB."),
        click.option("--topology", type=click.Path(dir_okay=False), metavar="FILE",
                     help="TOML of [hosts.NAME] (2-16 hosts; default a and b) and [links.A-B] / [links.\"A->B\"] "
                          "tables with these flags' names as keys (one_way_delay = \"40ms\"); a pair without a "
                          "table gets the flags' values. At most 1 MiB."),
        click.option("--schedule", "schedules", multiple=True, metavar="FILE|'at=30s,for=5s,partition'",
                     help="Changes the emulator applies at given times from now: a TOML file of [[change]] tables "
                          "(at most 4 MiB) or one change inline; repeatable (see labkit/testbed/schedule.py)."),
    ]
    for option in reversed(options):
        function = option(function)
    return function


@testbed.command()
@NAME_OPTION
@_link_options
@click.option("--mtu", type=click.IntRange(576, 65535), default=1460, show_default=True,
              help="MTU of the data links (1460 like the cloud link of the research brief).")
@click.option("--cc", type=click.Choice(["cubic", "bbr", "reno"]), default="cubic", show_default=True,
              help="TCP congestion control on the data links (set per route, so the host is untouched).")
@click.option("--seed", type=click.IntRange(0, 2**32 - 1), default=1, show_default=True,
              help="Seed of the emulator's random decisions (jitter, loss, duplication, reordering): the same "
                   "seed draws the same for the same packets.")
@click.option("--emulator", type=click.Choice(["auto", "tun", "netem"]), default="auto", show_default=True,
              help="Kept for old scripts: the links are always labkit's emulator on TUN devices (netem is refused).")
@click.option("--login-user", metavar="NAME",
              help="Log in to the hosts as NAME instead of root, like a cloud VM's user: the user exists only in "
                   "the testbed's sshds (key login only) and goes with `down`.")
@click.option("--sudo/--no-sudo", "sudo", default=None,
              help="With --login-user: passwordless sudo for that user, and become = \"sudo\" in the inventory "
                   "(--sudo, the default), or no sudo at all. Changes a running testbed.")
@click.option("--host-root", "host_roots", multiple=True, metavar="HOST=RELEASE",
              help="Run HOST in a Debian minbase root of RELEASE (bullseye: Debian 11, trixie: Debian 13) instead of "
                   "this machine's userland, as a topology's root = \"RELEASE\" does; repeatable. The root is built "
                   "once (minutes) and cached under ~/.cache/labkit/rootfs.")
def up(name, mtu, cc, seed, emulator, login_user, sudo, topology, schedules, host_roots, **link_flags):
    """Create the testbed, or change the links of a running one.

    Writes a state directory with ssh_config, known_hosts, the client key and
    inventory.toml (printed at the end). Running `up` again with the same
    parameters does nothing; with others it changes the live links (other hosts
    or another login user rebuild the testbed).
    """
    if sudo is not None and not login_user:
        raise click.UsageError("--sudo/--no-sudo go with --login-user (root needs no sudo)")
    login = LoginUser(login_user, sudo is not False) if login_user else None
    link = _link_config(link_flags, mtu=mtu, cc=cc, emulator=emulator, seed=seed)
    lab = Testbed(name)
    layout = read_topology(topology) if topology else Topology()
    roots = {}
    for item in host_roots:
        host, sep, release = item.partition("=")
        if not sep or not host or not release:
            raise click.BadParameter(f"{item!r} must be HOST=RELEASE, e.g. b=bullseye", param_hint="--host-root")
        roots[host] = release
    state = lab.up(link, login, topology=layout.with_roots(roots) if roots else (layout if topology else None),
                   schedule=read_schedule(schedules))
    _print_up(name, state)


def _link_config(flags: dict, **settings):
    return LinkConfig(
        one_way_delay_s=flags["delay"], rate_bps=flags["rate"], jitter=flags["jitter"],
        jitter_distribution=flags["jitter_distribution"], loss=flags["loss"], loss_model=flags["loss_model"],
        duplicate=flags["duplicate"], reorder=flags["reorder"], queue=flags["queue"], aqm=flags["aqm"],
        delay_trace=flags["delay_trace"], delay_trace_step=flags["delay_trace_step"], rate_trace=flags["rate_trace"],
        **settings,
    )


def _print_up(name: str, state) -> None:
    click.echo(f"testbed {name} is up ({state.emulator}): {state.link.describe()}")
    if state.topology.source:
        click.echo(f"  topology: {state.topology.source}")
        for key, spec in state.direction_specs().items():
            click.echo(f"  link {key.replace('>', '->')}: {spec.describe()}")
    if state.schedule:
        click.echo(f"  schedule: {len(state.schedule)} change(s), times from {_utc(state.schedule_origin_utc_ns)}")
    if state.login_user:
        click.echo(f"  login user: {state.login_user} ({'passwordless sudo' if state.login_sudo else 'no sudo'})")
    for host in state.hosts.values():
        root = state.roots.get(host.name)
        runs_in = f", in a Debian {root['debian']} {root['release']} root ({root['mode']})" if root else ""
        click.echo(f"  host {host.name}: ssh {host.ssh_alias} ({host.mgmt_address}), data address {host.data_address}"
                   + runs_in)
    click.echo(f"  ssh config: {state.ssh_config}")
    click.echo(f"  inventory:  {state.inventory}")
    first, second = list(state.hosts.values())[:2]
    click.echo(f"  try: ssh -F {state.ssh_config} {first.ssh_alias} ping -c 3 {second.data_address}")


def _utc(ns: int) -> str:
    return datetime.datetime.fromtimestamp(ns / 1e9, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@testbed.command()
@NAME_OPTION
@click.option("--all", "all_", is_flag=True, help="Remove every labkit testbed on this machine.")
def down(name, all_):
    """Remove everything `up` made: namespaces, links, the link emulator, every sshd (and with it the
    login user, who exists only there), the state directory.

    Also cleans up after a crash that left half a testbed.
    """
    check_can_host_testbed()
    for each in (all_testbed_names() if all_ else [name]):
        Testbed(each, log=click.echo).down()


@testbed.command()
@NAME_OPTION
def repair(name):
    """Put back what `status` finds missing from a running testbed (a device set down, an address, a data route: what a
    flapped link loses), with the same steps `up` made them with, leaving its processes running.

    What only a rebuild fixes (a namespace, device or process that is gone) is named, and the command exits 2.
    `up` on a running testbed repairs it in the same way.
    """
    Testbed(name, log=click.echo).repair()
    click.echo(f"testbed {name} is healthy")


@testbed.command()
@NAME_OPTION
@click.option("--no-ping", is_flag=True, help="Skip the RTT measurement (faster).")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def status(name, no_ping, as_json):
    """Show each link's parameters and the emulator's counters (drops by cause, lateness), the health of
    every part, the measured ping RTTs and the state paths.

    A broken testbed's faults are named one a line (a device down, a missing address or data route, a silent
    sshd, a dead emulator), with how to fix them. Exits 1 when the testbed is not up (or is broken).
    """
    info = Testbed(name).status(measure=not no_ping)
    if as_json:
        click.echo(json.dumps(info, default=lambda o: dataclasses.asdict(o), indent=2))
    else:
        _print_status(info)
    raise SystemExit(0 if info["up"] else 1)


def _print_status(info: dict) -> None:
    from rich.console import Console

    console = Console()
    name = info["name"]
    if "link" not in info:
        console.print(f"testbed {name} is not up")
        if info.get("leftovers"):
            console.print(f"leftovers from a crash: {', '.join(info['leftovers'])}; run `labkit testbed down --name {name}`")
        return
    verdict = "[green]up[/green]" if info["up"] else "[red]broken[/red]"
    console.print(f"testbed {name} is {verdict} ({info['emulator']}): {info['link'].describe()}")
    for problem in info["problems"]:
        click.echo(f"fault: {problem}")  # one unwrapped line each, to read or grep
    if info["problems"]:
        click.echo(f"repair it with `labkit testbed repair --name {name}`" if info["repairable"] else
                      f"rebuild it: `labkit testbed down --name {name}`, then `labkit testbed up --name {name} ...`")
    if info.get("topology"):
        console.print(f"topology: {info['topology']}")
    _print_parts_and_hosts(console, info)
    login = info["login"]
    if login["sudo"] is not None:
        console.print(f"login user: {login['user']} ({'passwordless sudo' if login['sudo'] else 'no sudo'})")
    _print_links(console, info["links"])
    _print_send_stamps(console, info.get("send_stamps") or {})
    if info["schedule"]["changes"]:
        console.print(f"schedule: {len(info['schedule']['changes'])} change(s), times from "
                      f"{_utc(info['schedule']['origin_utc_ns'])}")
    for pair, ping in (info.get("pings") or {}).items():
        where = pair.replace(">", "→")
        if ping["received"]:
            console.print(
                f"ping {where}: mean {ping['mean_ms']:.3f} ms, median {ping['median_ms']:.1f} ms "
                f"(min {ping['min_ms']:.3f}, max {ping['max_ms']:.3f}), {ping['received']}/{ping['sent']} replies"
            )
        else:
            console.print(f"[red]ping {where}: no replies out of {ping['sent']}[/red]")
    console.print(f"state directory: {info['state_dir']}")
    console.print(f"ssh config:      {info['ssh_config']}")
    console.print(f"inventory:       {info['inventory']}")


def _print_parts_and_hosts(console, info: dict) -> None:
    from rich.table import Table

    parts = Table(title="parts", show_header=True)
    parts.add_column("part")
    parts.add_column("healthy")
    for part, ok in info["parts"].items():
        parts.add_row(part, "[green]yes[/green]" if ok else "[red]no[/red]")
    console.print(parts)
    hosts = Table(title="hosts", show_header=True)
    for column in ("host", "ssh alias", "ssh address", "data address", "netns"):
        hosts.add_column(column)
    for host in info["hosts"].values():
        hosts.add_row(host.name, host.ssh_alias, host.mgmt_address, host.data_address, host.netns)
    console.print(hosts)


def _print_send_stamps(console, stamps: dict) -> None:
    """Whether delays count from when a host sent a packet (its tap saw it) or from when the emulator read it."""
    for host, stamp in stamps.items():
        wait = stamp.get("read_wait_us") or {}
        if not stamp.get("tap"):
            console.print(f"[yellow]{host}: no tap; delays count from when the emulator reads a packet[/yellow]")
        elif stamp.get("stamped"):
            console.print(f"{host}: delays count from the send ({stamp['stamped']} small packets stamped; they waited "
                          f"p50 {wait.get('p50')} µs, p99 {wait.get('p99')} µs, max {wait.get('max', 0):.0f} µs to be read)")


def _print_links(console, links: dict) -> None:
    """Each direction: its parameters, and the emulator's counters since it started."""
    from rich.table import Table

    table = Table(title="links (emulator counters since start, wire packets)", show_header=True)
    for column in ("direction", "parameters", "in", "out", "dropped (cause)", "dup", "reord", "late p50/p99/max µs"):
        table.add_column(column)
    for key, link in links.items():
        totals, late = link.get("totals") or {}, link.get("lateness_us") or {}
        drops = ", ".join(f"{totals[f'drop_{cause}']} {cause}" for cause in ("partition", "loss", "queue", "aqm", "write")
                          if totals.get(f"drop_{cause}")) or "0"
        lateness = (f"{late['p50']}/{late['p99']}/{late['max']:.0f}" if late.get("n") else "-")
        table.add_row(key.replace(">", "→"), link["describe"], str(totals.get("in", "-")), str(totals.get("out", "-")),
                      drops, str(totals.get("duplicated", "-")), str(totals.get("reordered", "-")), lateness)
    console.print(table)


@testbed.command("root")
@click.argument("releases", nargs=-1, required=True, metavar="RELEASE...")
def root(releases):
    """Build (once) and cache the Debian minbase roots a host can run in (bullseye, trixie); print where each is.

    Each is debootstrap --variant=minbase from Debian's archive with an OpenSSH server, python3 without venv or pip,
    and the programs labkit runs on a host; `testbed up --host-root` builds what is missing itself.
    """
    # Imported here: only this command and `up --host-root` build roots; the others should not load debootstrap's code.
    from labkit.testbed import rootfs

    specs = [rootfs.RootSpec.parse(release) for release in releases]
    for spec in specs:
        path = rootfs.ensure_root(spec, log=lambda line: click.echo(line, err=True))
        info = rootfs.describe(path)
        click.echo(f"{spec}: {path} (Debian {rootfs.RELEASES[spec.suite]['version']}, {info['arch']}, built "
                   f"{info['built_utc']} in {info['build_s']:g} s)")
