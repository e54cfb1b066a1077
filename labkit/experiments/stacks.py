"""The gRPC stack as a dimension of every experiment: which implementation serves, which calls, and the knobs in force.

``--server-impl python,go``, ``--client-impl python,go`` and a sweepable
``--grpc-option KEY=V1,V2`` (grpc-go's names, :mod:`labkit.echo.options`)
multiply an experiment's cells like any other knob; the value ``default``
leaves the option unset (``static-stream-window=default,32MiB``: grpc-go's
own dynamic windows against a static 32 MiB). Keys joined by ``+`` are one
knob that sets each of them to the same value
(``static-stream-window+static-conn-window=default,32MiB``: both windows
static, as a tuning guide sets them, not one without the other). A :class:`Stack` is one
combination; a cell carries it in its id (only where it differs from the
default, Python on both sides with no option, so runs made before this
dimension existed keep their cell ids and resume as they were) and in its
rows (``client_impl``, ``server_impl``, ``grpc_options``).

An option applies to the sides that take it (``pool`` to the client,
``max-concurrent-streams`` to the server, windows to both). A stack whose
Python side would be given an option grpcio has no equivalent of is left out
of the plan, with the reason, rather than run with the knob silently
missing.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from labkit.echo.options import IMPLEMENTATIONS, OPTIONS, grpcio_arguments, parse_grpc_options
from labkit.errors import LabkitError

DEFAULT_IMPL = "python"
DEFAULT_OPTION = "default"  # an option value that leaves the option unset


@dataclass(kw_only=True)
class StackChoice:
    """The stack settings of an experiment's config: a base class, keyword-only so they follow the config's own fields.

    ``grpc_option`` items are ``KEY=V1,V2``: every value is its own cells.
    """

    client_impl: list[str] = field(default_factory=lambda: [DEFAULT_IMPL])
    server_impl: list[str] = field(default_factory=lambda: [DEFAULT_IMPL])
    grpc_option: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Stack:
    """One gRPC stack: the implementation of each side and the options (``key=value``, sorted by key)."""

    client_impl: str | None = DEFAULT_IMPL  # None: the client is a tool (ghz, h2load), not labkit's
    server_impl: str = DEFAULT_IMPL
    grpc_options: tuple[str, ...] = ()

    @property
    def id_suffix(self) -> str:
        """What the stack adds to a cell id: nothing for the default stack."""
        parts = []
        if self.client_impl not in (DEFAULT_IMPL, None):
            parts.append(f"client={self.client_impl}")
        if self.server_impl != DEFAULT_IMPL:
            parts.append(f"server={self.server_impl}")
        if self.grpc_options:
            parts.append("opt=" + ";".join(self.grpc_options))
        return "".join(f"|{part}" for part in parts)

    def columns(self) -> dict[str, str | None]:
        """The row columns of the stack."""
        return {"client_impl": self.client_impl, "server_impl": self.server_impl,
                "grpc_options": ";".join(self.grpc_options) or None}

    def _side_options(self, side: str) -> tuple[str, ...]:
        return tuple(item for item in self.grpc_options if side in OPTIONS[item.partition("=")[0]].sides)

    def client_options(self) -> tuple[str, ...]:
        """The options the client side takes (its agent's plan's ``grpc_options``)."""
        return self._side_options("client")

    def server_options(self) -> tuple[str, ...]:
        """The options the server side takes (its :class:`~labkit.echo.plans.ServePlan`'s ``grpc_options``)."""
        return self._side_options("server")

    @property
    def server_key(self) -> tuple:
        """Cells whose stacks share this key can share one running server."""
        return (self.server_impl, self.server_options())

    def label(self) -> str:
        """``go→python static-stream-window=33554432``: client→server, then the options."""
        text = f"{self.client_impl or 'tool'}→{self.server_impl}"
        return f"{text} {' '.join(self.grpc_options)}" if self.grpc_options else text


def option_values(items: list[str]) -> dict[str, list[str]]:
    """``["static-stream-window=64KiB,32MiB", "pool=4"]`` -> each knob's values, checked (unknown keys and bad values
    refused). A knob is a key, or keys joined by ``+`` (see :func:`knob_keys`)."""
    values: dict[str, list[str]] = {}
    seen: set[str] = set()
    for item in items:
        knob, sep, text = str(item).partition("=")
        knob = knob.strip()
        choices = [value.strip() for value in text.split(",") if value.strip()]
        if not sep or not choices:
            raise LabkitError(f"--grpc-option {item!r} is not KEY=VALUE[,VALUE...]")
        for key in knob_keys(knob):
            if key not in OPTIONS:
                raise LabkitError(f"--grpc-option {key}: unknown; known: {', '.join(OPTIONS)}")
            if key in seen:
                raise LabkitError(f"--grpc-option {key} is given twice; list its values once, comma-separated")
            seen.add(key)
            for choice in choices:
                if choice != DEFAULT_OPTION:
                    parse_grpc_options([f"{key}={choice}"], OPTIONS[key].sides[0])  # refuses a bad value with one line
        values[knob] = choices
    return values


def knob_keys(knob: str) -> list[str]:
    """The option keys one ``--grpc-option`` knob sets: ``a+b`` -> ``["a", "b"]``."""
    return [key.strip() for key in knob.split("+")]


def plan_stacks(client_impls: list[str] | None, server_impls: list[str], grpc_options: list[str],
                *, clients: tuple[str, ...] = IMPLEMENTATIONS) -> tuple[list[Stack], list[str]]:
    """Every stack of the lists, and one line for each left out.

    ``clients`` are the client implementations the experiment has; asking
    for another is an error. ``client_impls`` None means the client is a
    tool (load's ghz and h2load): options then apply to the server only, and
    one only a client takes is refused. A Python side given an option grpcio
    cannot set is left out with the reason.
    """
    if client_impls is None:
        client_only = [key for knob in option_values(grpc_options) for key in knob_keys(knob)
                       if "server" not in OPTIONS[key].sides]
        if client_only:
            raise LabkitError(f"--grpc-option {client_only[0]} is a client option, and this experiment's "
                              "clients are tools (ghz, h2load): give server options only")
    else:
        unknown = [impl for impl in client_impls if impl not in IMPLEMENTATIONS]
        if unknown or not client_impls:
            raise LabkitError(f"--client-impl takes {', '.join(IMPLEMENTATIONS)}, not {', '.join(unknown) or 'nothing'}")
        missing = [impl for impl in client_impls if impl not in clients]
        if missing:
            raise LabkitError(f"this experiment has no {', '.join(missing)} client; --client-impl takes {', '.join(clients)}")
    return _plan(client_impls, server_impls, grpc_options)


def _plan(client_impls, server_impls, grpc_options) -> tuple[list[Stack], list[str]]:
    unknown = [impl for impl in server_impls if impl not in IMPLEMENTATIONS]
    if unknown or not server_impls:
        raise LabkitError(f"--server-impl takes {', '.join(IMPLEMENTATIONS)}, not {', '.join(unknown) or 'nothing'}")
    values = option_values(grpc_options)
    option_sets = [tuple(f"{key}={value}" for knob, value in zip(values, combo) if value != DEFAULT_OPTION
                         for key in knob_keys(knob))
                   for combo in itertools.product(*values.values())]
    stacks, left_out = [], []
    clients = dict.fromkeys(client_impls) if client_impls is not None else [None]
    for client, server, options in itertools.product(clients, dict.fromkeys(server_impls), option_sets):
        stack = Stack(client, server, tuple(sorted(options)))
        try:
            for side, impl in (("client", client), ("server", server)):
                if impl == "python":
                    grpcio_arguments(parse_grpc_options(stack._side_options(side), side),
                                     impl_hint=f"left out for a Python {side}")
        except LabkitError as exc:
            left_out.append(f"{stack.label()}: {exc.message}")
            continue
        stacks.append(stack)
    if not stacks:
        raise LabkitError("no stack is left to run: " + "; ".join(left_out))
    return stacks, left_out


def go_tools(sides) -> dict[str, set[str]]:
    """labkit-go on every host that runs a Go side of a stack: ``sides`` are ``(client host, server host, stack)``
    (a cell's); what a plan states in ``Plan.tools``, so that each such host has it before the first cell."""
    tools: dict[str, set[str]] = {}
    for client, server, stack in sides:
        for host, impl in ((client, stack.client_impl), (server, stack.server_impl)):
            if impl == "go":
                tools.setdefault(host, set()).add("labkit-go")
    return tools
