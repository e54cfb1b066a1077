"""`labkit hosts check`: the hosts of an inventory, reachable or not, and their network facts."""

from __future__ import annotations

import click


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
def check(inventory, names, accept_new_host_keys, timeout):
    """Connect to every host of INVENTORY (or only NAMES) in parallel and show what labkit will find.

    Exit status 1 if any host cannot be used.
    """
    from rich.console import Console
    from rich.table import Table

    from labkit.hosts.check import TOOLS, check_hosts
    from labkit.hosts.inventory import load_inventory

    inv = load_inventory(inventory)
    results = check_hosts(inv, list(names), accept_new_host_keys=accept_new_host_keys, connect_timeout=timeout)
    console = Console()
    if not console.is_terminal:
        console = Console(width=200)  # a log or a pipe: do not wrap the table at 80 columns
    table = Table(title=f"hosts in {inv.path}", title_justify="left")
    for column in ("host", "reachable", "auth", "python", "labkit", *TOOLS, "kernel", "cc",
                   "slow start after idle", "MTU to peers"):
        table.add_column(column, no_wrap=column not in ("MTU to peers",))
    for result in results:
        table.add_row(
            result.name,
            _mark(result.reachable),
            _mark(result.auth if result.reachable else None),
            (result.python or "-").removeprefix("Python "),
            result.labkit or ("not deployed" if result.auth else "-"),
            *(_mark(result.tools.get(tool)) for tool in TOOLS),
            result.kernel or "-",
            result.congestion_control or "-",
            result.slow_start_after_idle or "-",
            "\n".join(route.describe() for route in result.routes) or "-",
        )
    console.print(table)
    failed = [result for result in results if not result.ok]
    for result in failed:
        # Connection errors already start with the host's name.
        text = result.error if result.error.startswith(f"{result.name}: ") else f"{result.name}: {result.error}"
        console.print(text, style="red", highlight=False, soft_wrap=True, markup=False)
    if failed:
        # SystemExit, not click's Exit: labkit's main runs click with standalone_mode=False.
        raise SystemExit(1)
