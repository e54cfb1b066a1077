"""`labkit hosts check`: the hosts of an inventory, reachable or not, and their network facts."""

from __future__ import annotations

import click

from labkit.cli.options import read_toml
from labkit.hosts.check import TOOLS, check_hosts, knobs_of_experiment
from labkit.hosts.inventory import load_inventory
from labkit.hosts.kernel import KNOBS


@click.group()
def hosts():
    """The hosts of an inventory file (TOML): check that labkit can use them."""


def _mark(value: bool | None) -> str:
    return {True: "[green]yes[/]", False: "[red]no[/]", None: "-"}[value]


@hosts.command()
@click.argument("inventory", type=click.Path(dir_okay=False))
@click.argument("names", nargs=-1)
@click.option("--accept-new-host-keys", is_flag=True,
              help="Record the key of a host seen for the first time in known_hosts (a changed key is still refused).")
@click.option("--timeout", type=click.FloatRange(0.1, 300), default=None,
              help="Seconds to wait for each host to answer [default: the inventory's or ssh_config's, else 10].")
@click.option("--config", "config_file", type=click.Path(dir_okay=False, exists=True),
              help="An experiment file (TOML, as `labkit sweep --config` takes): check that each host can set "
                   "the kernel knobs it asks for.")
@click.option("--knob", "knobs", multiple=True, type=click.Choice(list(KNOBS)),
              help="A kernel knob to check that each host can set (repeatable), as the sweep flag of the same name.")
def check(inventory, names, accept_new_host_keys, timeout, config_file, knobs):
    """Connect to every host of INVENTORY (or only NAMES) in parallel and show what labkit will find.

    The "root" column says what the login user may do: root, sudo (passwordless),
    sudo (needs a password) or none; labkit takes root with `sudo -n` where the
    inventory says become = "sudo". With --config or --knob, "cannot set" lists
    the asked-for knobs labkit could not change on that host, and why.

    Below the table, a line per host says what `labkit deploy` will do there: the
    interpreter (the inventory's python: its path, version and the host's
    architecture), a venv where it has venv and pip or else the wheels unpacked,
    the clock's state and the stacks it can serve; or, where deploy would refuse
    the interpreter (none, older than 3.9), why and what to do.

    Exit status 2 if deploy would refuse a host, else 1 if any host cannot be used (or cannot set a knob asked for).
    """
    from rich.console import Console
    from rich.table import Table

    inv = load_inventory(inventory)
    if config_file:
        knobs += tuple(knobs_of_experiment(read_toml(config_file, "experiment file")))
    knobs = list(dict.fromkeys(knobs))
    results = check_hosts(inv, list(names), accept_new_host_keys=accept_new_host_keys, connect_timeout=timeout,
                          knobs=knobs)
    console = Console()
    if not console.is_terminal:
        console = Console(width=200)  # a log or a pipe: do not wrap the table at 80 columns
    table = Table(title=f"hosts in {inv.path}", title_justify="left")
    columns = ["host", "reachable", "auth", "root", "python", "labkit", *TOOLS, "kernel", "cc",
               "slow start after idle", "MTU to peers"] + (["cannot set"] if knobs else [])
    for column in columns:
        table.add_column(column, no_wrap=column not in ("MTU to peers", "cannot set"))
    for result in results:
        row = [
            result.name,
            _mark(result.reachable),
            _mark(result.auth if result.reachable else None),
            result.privilege or "-",
            (result.python or "-").removeprefix("Python "),
            result.labkit or ("not deployed" if result.auth else "-"),
            *(_mark(result.tools.get(tool)) for tool in TOOLS),
            result.kernel or "-",
            result.congestion_control or "-",
            result.slow_start_after_idle or "-",
            "\n".join(route.describe() for route in result.routes) or "-",
        ]
        if knobs:
            row.append(", ".join(knob.split(" (")[0] for knob in result.blocked) or "-")
        table.add_row(*row)
    console.print(table)
    for result in results:
        if result.auth and not result.error and not result.refusal:
            console.print(result.deploy_line(), highlight=False, soft_wrap=True, markup=False)
    failed = [result for result in results if not result.ok]
    for result in failed:
        # Connection errors already start with the host's name.
        lines = [result.error] if result.error else []
        lines += [result.refusal] if result.refusal and not result.error else []
        lines += [f"cannot set {knob}: {reason}" for knob, reason in result.blocked.items()]
        for text in lines:
            text = text if text.startswith(f"{result.name}: ") else f"{result.name}: {text}"
            console.print(text, style="red", highlight=False, soft_wrap=True, markup=False)
    if failed:
        # SystemExit, not click's Exit: labkit's main runs click with standalone_mode=False. 2: a host deploy would
        # refuse is bad input (the inventory's python), which the line above says how to fix.
        raise SystemExit(2 if any(result.refusal for result in failed) else 1)
