"""The ``labkit`` command line: click only, one module per command (``labkit/cli/<command>.py``).

Each module turns flags into one library call and renders what it returns;
the work itself lives in the library (``labkit/experiments/<command>.py`` for
the experiments). Subcommands are imported only when they are invoked, so
``labkit --help`` and ``labkit --version`` never pay for grpc, pandas or
paramiko.
"""

from __future__ import annotations

import importlib
import signal
import sys

import click

from labkit.version import __version__
from labkit.errors import LabkitError

# name -> "module:attribute" of a click command; imported on first use.
_SUBCOMMANDS = {
    "echo": ("labkit.cli.echo:echo", "Serve and call the gRPC echo service."),
    "testbed": ("labkit.cli.testbed:testbed", "Bring the local two-host WAN testbed up, down, or show it."),
    "demo": ("labkit.cli.demo:demo", "The main job: the idle-connection experiment on a fresh local testbed."),
    "hosts": ("labkit.cli.hosts:hosts", "Check the hosts of an inventory: reachable, tools, kernel, MTU."),
    "deploy": ("labkit.cli.deploy:deploy", "Install this labkit on the hosts of an inventory (wheel over SFTP, venv)."),
    "sweep": ("labkit.cli.sweep:sweep", "Sweep request size × idle gap × background traffic × kernel settings between hosts."),
    "series": ("labkit.cli.series:series", "Ping vs gRPC echo (warm, cold) vs raw TCP echo over time, on one schedule between hosts."),
    "upload": ("labkit.cli.upload:upload", "Chunked upload over gRPC streaming vs one HTTP/2 POST, with and without TLS."),
    "load": ("labkit.cli.load:load", "The cost of a call under load: gRPC (ghz) and HTTP/2 (h2load) against one echo server."),
    "latency-under-load": ("labkit.cli.latency_under_load:latency_under_load",
                           "Probes before, during and after a saturating load: what a shared queue adds, per direction."),
    "hop": ("labkit.cli.hop:hop", "The cost of one call: wrk through a front relay over gRPC, HTTP/2 or NATS vs the back direct."),
    "runs": ("labkit.cli.runs:runs", "List and inspect runs, and clean up after a killed one."),
    "import": ("labkit.cli.import_:import_logs", "Import ping, Go echo, idle-step, iperf3 or ghz logs into a run."),
    "report": ("labkit.cli.report:report", "Run the notebooks that apply to a run; figures and an HTML summary in RUN/report/."),
    "explain": ("labkit.cli.explain:explain", "Explain each call of a run in round trips: its components and one cause."),
    "compare": ("labkit.cli.compare:compare", "What changed between two runs (or --runs groups), and what it did, cell by cell."),
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported only when used."""

    def __init__(self, *args, lazy_subcommands: dict[str, tuple[str, str]], **kwargs):
        super().__init__(*args, **kwargs)
        self._lazy = lazy_subcommands

    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | set(self._lazy))

    def get_command(self, ctx, name):
        if name in self._lazy:
            target, _ = self._lazy[name]
            module_name, attribute = target.split(":")
            return getattr(importlib.import_module(module_name), attribute)
        return super().get_command(ctx, name)

    def format_commands(self, ctx, formatter):
        # Use the short help kept in the table, so listing commands imports nothing.
        rows = [(name, self._lazy[name][1]) for name in sorted(self._lazy)]
        rows += [
            (name, cmd.get_short_help_str())
            for name, cmd in sorted(self.commands.items())
            if name not in self._lazy
        ]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(
    cls=LazyGroup,
    lazy_subcommands=_SUBCOMMANDS,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(__version__, prog_name="labkit")
def cli():
    """labkit: measure network and RPC latency, and explain it.

    Typical session on the built-in local testbed:

    \b
      labkit testbed up --one-way-delay 100ms
      labkit testbed status
      labkit testbed down

    Every subcommand has its own --help.
    """


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: one-line errors, exit status 2 on bad input."""
    take_sigint_back()
    try:
        cli.main(args=argv, prog_name="labkit", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.Abort:
        # Not at the top: `labkit --help` loads this module alone, and cli.options brings the experiments.
        from labkit.cli.options import interrupted_exit_status

        click.echo("labkit: interrupted", err=True)
        sys.exit(interrupted_exit_status())
    except click.UsageError as exc:
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
        click.echo(f"labkit: error: {exc.format_message()}{hint}", err=True)
        sys.exit(2)
    except LabkitError as exc:
        click.echo(f"labkit: error: {exc.message}", err=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        click.echo(f"labkit: error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except OSError as exc:  # what the file system refused (a permission, a full disk) and no caller explained
        click.echo(f"labkit: error: {os_error_line(exc)}", err=True)
        sys.exit(2)
    sys.exit(0)


def take_sigint_back() -> None:
    """Let SIGINT interrupt labkit even when it was started with SIGINT ignored.

    A shell starts `labkit sweep ... &` with SIGINT ignored, and Python installs
    its KeyboardInterrupt handler only where SIGINT is not ignored: such a run
    would go on to the end on Ctrl-C or `kill -INT`. ping and iperf3 install
    their handlers explicitly; so does labkit. Every process it starts then gets
    SIGINT's default too (an exec resets a handled signal, not an ignored one).
    """
    signal.signal(signal.SIGINT, signal.default_int_handler)


def os_error_line(exc: OSError) -> str:
    """An OSError in one line: the file and what went wrong with it."""
    reason = (exc.strerror or str(exc) or type(exc).__name__).splitlines()[0]
    return f"{exc.filename}: {reason[0].lower()}{reason[1:]}" if exc.filename else reason


if __name__ == "__main__":
    main()
