"""`labkit testbed up | down | status`: the local two-host WAN testbed."""

from __future__ import annotations

import click

from labkit.cli.params import DURATION, RATE

NAME_OPTION = click.option(
    "--name", default="labkit", show_default=True,
    help="Testbed name; several testbeds with different names can coexist.",
)


@click.group()
def testbed():
    """The local testbed: two network namespaces (hosts a and b) joined by an
    emulated WAN link, each running its own sshd so labkit reaches them over
    SSH like any remote VM. Needs root, iproute2, /dev/net/tun and openssh-server.
    """


@testbed.command()
@NAME_OPTION
@click.option("--one-way-delay", "delay", type=DURATION, default="100ms", show_default=True,
              help="Delay added in each direction (RTT is twice this), e.g. 100ms, 50ms.")
@click.option("--rate", type=RATE, default="100mbit", show_default=True,
              help="Link rate in each direction (tc units: 100mbit, 1gbit), or 'none'.")
@click.option("--mtu", type=click.IntRange(576, 65535), default=1460, show_default=True,
              help="MTU of the data link (1460 like the cloud link of the research brief).")
@click.option("--cc", type=click.Choice(["cubic", "bbr", "reno"]), default="cubic", show_default=True,
              help="TCP congestion control on the data link (set per route, so the host is untouched).")
@click.option("--emulator", type=click.Choice(["auto", "tun", "netem"]), default="auto", show_default=True,
              help="tun: user-space delay line over TUN devices; netem: kernel qdisc on a veth pair "
                   "(only where the kernel has netem); auto: netem if available, else tun.")
@click.option("--login-user", metavar="NAME",
              help="Log in to the hosts as NAME instead of root, like a cloud VM's user: the user exists only in "
                   "the testbed's sshds (key login only) and goes with `down`.")
@click.option("--sudo/--no-sudo", "sudo", default=None,
              help="With --login-user: passwordless sudo for that user, and become = \"sudo\" in the inventory "
                   "(--sudo, the default), or no sudo at all. Changes a running testbed.")
def up(name, delay, rate, mtu, cc, emulator, login_user, sudo):
    """Create the testbed, or change the link of a running one.

    Writes a state directory with ssh_config, known_hosts, the client key and
    inventory.toml (printed at the end). Running `up` again with the same
    parameters does nothing; with others it changes the live link (another
    login user rebuilds the testbed).
    """
    from labkit.testbed.lab import LinkConfig, Testbed
    from labkit.testbed.login import LoginUser

    if sudo is not None and not login_user:
        raise click.UsageError("--sudo/--no-sudo go with --login-user (root needs no sudo)")
    login = LoginUser(login_user, sudo is not False) if login_user else None
    lab = Testbed(name)
    state = lab.up(LinkConfig(one_way_delay_s=delay, rate_bps=rate, mtu=mtu, cc=cc, emulator=emulator), login)
    click.echo(f"testbed {name} is up ({state.emulator} emulator): {state.link.describe()}")
    if state.login_user:
        click.echo(f"  login user: {state.login_user} ({'passwordless sudo' if state.login_sudo else 'no sudo'})")
    for host in state.hosts.values():
        click.echo(f"  host {host.name}: ssh {host.ssh_alias} ({host.mgmt_address}), data address {host.data_address}")
    click.echo(f"  ssh config: {state.ssh_config}")
    click.echo(f"  inventory:  {state.inventory}")
    click.echo(f"  try: ssh -F {state.ssh_config} {state.hosts['a'].ssh_alias} ping -c 3 {state.hosts['b'].data_address}")


@testbed.command()
@NAME_OPTION
@click.option("--all", "all_", is_flag=True, help="Remove every labkit testbed on this machine.")
def down(name, all_):
    """Remove everything `up` made: namespaces, links, the delay line, every sshd (and with it the
    login user, who exists only there), the state directory.

    Also cleans up after a crash that left half a testbed.
    """
    from labkit.testbed.lab import Testbed, all_testbed_names
    from labkit.testbed.netns import check_can_host_testbed

    check_can_host_testbed()
    for each in (all_testbed_names() if all_ else [name]):
        Testbed(each, log=click.echo).down()


@testbed.command()
@NAME_OPTION
@click.option("--no-ping", is_flag=True, help="Skip the RTT measurement (faster).")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def status(name, no_ping, as_json):
    """Show the link parameters, the health of every part, the measured ping RTT and the state paths.

    Exits 1 when the testbed is not up (or is broken).
    """
    import dataclasses
    import json

    from labkit.testbed.lab import Testbed

    info = Testbed(name).status(measure=not no_ping)
    if as_json:
        click.echo(json.dumps(info, default=lambda o: dataclasses.asdict(o), indent=2))
    else:
        _print_status(info)
    raise SystemExit(0 if info["up"] else 1)


def _print_status(info: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    name = info["name"]
    if "link" not in info:
        console.print(f"testbed {name} is not up")
        if info.get("leftovers"):
            console.print(f"leftovers from a crash: {', '.join(info['leftovers'])}; run `labkit testbed down --name {name}`")
        return
    verdict = "[green]up[/green]" if info["up"] else "[red]broken[/red]"
    console.print(f"testbed {name} is {verdict} ({info['emulator']} emulator): {info['link'].describe()}")
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
    login = info["login"]
    if login["sudo"] is not None:
        console.print(f"login user: {login['user']} ({'passwordless sudo' if login['sudo'] else 'no sudo'})")
    ping = info.get("ping")
    if ping:
        if ping["received"]:
            console.print(
                f"ping a→b over the link: mean {ping['mean_ms']:.3f} ms, median {ping['median_ms']:.1f} ms "
                f"(min {ping['min_ms']:.3f}, max {ping['max_ms']:.3f}), {ping['received']}/{ping['sent']} replies"
            )
        else:
            console.print(f"[red]ping a→b over the link: no replies out of {ping['sent']}[/red]")
    stats = info.get("delay_line_stats")
    if stats and stats.get("lateness_us_p50") is not None:
        console.print(
            f"delay line: lateness p50 {stats['lateness_us_p50']} µs, p99 {stats['lateness_us_p99']} µs, "
            f"dropped {stats['dropped_a_to_b'] + stats['dropped_b_to_a']}"
        )
    console.print(f"state directory: {info['state_dir']}")
    console.print(f"ssh config:      {info['ssh_config']}")
    console.print(f"inventory:       {info['inventory']}")
