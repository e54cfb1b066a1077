"""``labkit deploy``: the command line of :mod:`labkit.deploy`."""

from __future__ import annotations

import click

from labkit.cli.params import choice_list
from labkit.errors import LabkitError
from labkit.hosts.layout import TOOLS


@click.command("deploy")
@click.argument("inventory", type=click.Path(dir_okay=False))
@click.argument("hosts", nargs=-1)
@click.option("--offline/--online", "offline", default=None,
              help="Install from an uploaded wheelhouse, or from the package index "
                   "[default: offline on the testbed and where the index is unreachable]. A host whose Python has no "
                   "venv or pip always gets the uploaded wheels, unpacked into its labkit_dir.")
@click.option("--accept-new-host-keys", is_flag=True,
              help="Record the key of a host seen for the first time in known_hosts (a changed key is still refused).")
@click.option("--force", is_flag=True, help="Reinstall even where the same build is already deployed.")
@click.option("--wheel", type=click.Path(exists=True, dir_okay=False),
              help="Deploy this labkit wheel instead of building one from the source tree.")
@click.option("--tools", type=choice_list(("all", "none", *TOOLS)), default="all", show_default=True,
              help=f"The static tools of this machine to send to each host's bin/ ({', '.join(TOOLS)}), or none. "
                   "An experiment sends those it needs as it starts, so none loses nothing; a copy already there "
                   "with the same SHA-256 is not sent again.")
def deploy(inventory, hosts, offline, accept_new_host_keys, force, wheel, tools):
    """Install this labkit on HOSTS of INVENTORY (default: all) so sweeps can run there."""
    # Imported here: labkit.deploy builds wheels and reads every installed package's metadata, which the commands
    # that never deploy should not load.
    from labkit.deploy import deploy as deploy_to

    if len(tools) > 1 and {"all", "none"} & set(tools):
        raise click.BadParameter("give all, none, or tool names", param_hint="'--tools'")
    mode = "auto" if offline is None else ("offline" if offline else "online")
    results = deploy_to(inventory, list(hosts), mode=mode, accept_new_host_keys=accept_new_host_keys, force=force,
                        wheel=wheel, tools=None if tools == ["all"] else [] if tools == ["none"] else tools)
    failed = [result.host for result in results if result.status == "failed"]
    if failed:
        raise LabkitError(f"deploy failed on {', '.join(failed)}")
