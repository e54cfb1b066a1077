"""What every experiment command shares: a TOML experiment file, flags over it, --resume, SIGTERM.

An experiment file holds the same settings as the command's flags, as a
``[<command>]`` table or at the top level; lists may be TOML arrays or comma
strings, and each value is checked by the very click type of its flag, so a
file and a command line accept and refuse the same things. Flags given on the
command line override the file; paths in the file are relative to the file.
"""

from __future__ import annotations

import signal
import tomllib
from pathlib import Path

import click

from labkit.errors import LabkitError


def stop_cleanly_on_sigterm() -> None:
    """Make SIGTERM stop an experiment like Ctrl-C: processes stopped, settings restored, run marked interrupted."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)


def read_experiment_file(path: str, *, section: str, fields: dict[str, str], path_keys=("inventory",)) -> dict:
    """Config fields from an experiment file.

    ``fields`` maps flag names (``gaps``) to config fields (``gaps_s``);
    ``path_keys`` are the flags whose values are paths.
    """
    try:
        data = tomllib.loads(Path(path).read_text())
    except FileNotFoundError:
        raise LabkitError(f"experiment file {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise LabkitError(f"{path}: {exc}") from None
    data = {key.replace("-", "_"): value for key, value in data.get(section, data).items()}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise LabkitError(f"{path}: unknown keys {', '.join(unknown)} (known: {', '.join(sorted(fields))})")
    for key in path_keys:
        # Paths in the file are relative to the file, not to the shell's directory.
        if isinstance(data.get(key), str) and not Path(data[key]).expanduser().is_absolute():
            data[key] = str((Path(path).parent / data[key]).resolve())
    options = {param.name: param for param in click.get_current_context().command.params}
    values = {}
    for key, value in data.items():
        param = options.get(key)
        if param is not None and not isinstance(value, bool):
            text = ",".join(str(item) for item in value) if isinstance(value, list) else str(value)
            try:
                value = param.type.convert(text, param, None)
            except click.BadParameter as exc:
                raise LabkitError(f"{path}: {key}: {exc.message}") from None
        values[fields[key]] = value
    return values


def config_values(inventory: str | None, config_file: str | None, options: dict, *, section: str,
                  fields: dict[str, str], path_keys=("inventory",)) -> dict:
    """The settings of a new run: the experiment file, then INVENTORY, then the flags given."""
    values = read_experiment_file(config_file, section=section, fields=fields, path_keys=path_keys) if config_file else {}
    if inventory:
        values["inventory"] = inventory
    for option, value in options.items():
        if value is not None:
            values[fields[option]] = value
    if "inventory" not in values:
        raise click.UsageError("give an INVENTORY (or `inventory = ...` in --config)")
    if not Path(values["inventory"]).is_file():
        raise LabkitError(f"inventory {values['inventory']} does not exist")
    return values


def refuse_options_with_resume(inventory: str | None, config_file: str | None, options: dict) -> None:
    """--resume continues with the run's recorded settings; other settings would contradict them."""
    given = [f"--{key.replace('_', '-')}" for key, value in options.items() if value is not None]
    given += ["INVENTORY"] if inventory else []
    given += ["--config"] if config_file else []
    if given:
        raise click.UsageError(f"--resume takes the run's own configuration; drop {', '.join(given)}")
