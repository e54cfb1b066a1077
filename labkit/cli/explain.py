"""``labkit explain RUN``: the command line of :mod:`labkit.explain`."""

from __future__ import annotations

import click

from labkit.store import find_run

#: How the table abbreviates each component (ms, then in base RTTs when it is one or more of them).
SHORT = {"handshake": "hs", "tls": "tls", "http2-setup": "h2", "request-rounds": "rounds", "server": "srv",
         "retransmission": "rtx", "queueing": "queue", "remainder": "rest"}


@click.command()
@click.argument("run")
@click.option("--call", "seq", type=click.IntRange(0), help="Only the calls with this seq (one per cell).")
@click.option("--format", "output", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="table: one line per call; json: one JSON object per line.")
@click.option("--runs-dir", type=click.Path(file_okay=False), help="Where runs live. [default: $LABKIT_RUNS or data/runs]")
def explain(run, seq, output, runs_dir):
    """Explain each call of RUN in round trips: what its latency was made of, and why it took more than one.

    Every call (of a sweep, series, latency-under-load or upload run) is cut into handshake, tls,
    http2-setup, request-rounds (one base RTT per round trip the request
    needed), server (the server's own time), retransmission, queueing (time
    above the base RTT) and remainder (the client's own time), each in ms and
    in round trips of the base RTT (the ping minimum before the run). Its
    cause is the part that took the most beyond one round trip:
    cwnd-restart-after-idle, cwnd-limited, receive-window-limited, handshake,
    tls, http2-setup, server, retransmission, queueing, or none. With a
    capture (--capture on the run) it reads the packets; without one, the
    TCP state recorded around each call and the kernel's rules, and says so
    (evidence). Where the run knows what a warm probe waited in the path's
    queues each way (a testbed's latency-under-load run keeps the link's
    record of it; elsewhere the server's stamps give each way's delay), its
    queueing is that wait, and the cause says in which direction: out (the
    request's way) or back (the reply's).

    RUN is a run directory, a run id, or a unique part of one.
    """
    from labkit.explain import explain_run, json_lines

    explained = explain_run(find_run(run, runs_dir), seq)
    if output == "json":
        for line in json_lines(explained):
            click.echo(line)
        return
    print_table(explained)


def print_table(explained) -> None:
    """One line per call: its cell, seq, latency in ms and in RTTs, rounds, cause, and the components that took time."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("cell", "seq", "ms", "RTTs", "rounds", "cause", "evidence", "components (ms)"):
        table.add_column(column, justify="right" if column in ("seq", "ms", "RTTs", "rounds") else "left")
    for row in explained.itertuples():
        parts = " ".join(f"{SHORT[c['name']]} {c['ms']:.1f}" for c in row.components if abs(c["ms"]) >= 0.05)
        cause = f"{row.cause} ({row.queue_direction})" if row.cause == "queueing" and row.queue_direction else row.cause
        table.add_row(_cell_label(row.cell_id, row.probe), str(row.seq), f"{row.rtt_ms:.1f}",
                      f"{row.rtt_ms / row.base_rtt_ms:.2f}", str(row.rounds), cause, row.evidence, parts)
    console = Console()
    if not console.is_terminal:
        console = Console(width=200)  # a pipe or a log file: never cut a value
    console.print(table)
    causes = explained["cause"].value_counts()
    console.print(f"{len(explained)} calls; base RTT {explained['base_rtt_ms'].iat[0]:.2f} ms (ping minimum); causes: "
                  + ", ".join(f"{name} {count}" for name, count in causes.items()), highlight=False)
    console.print("hs: TCP handshake, h2: HTTP/2 preface and SETTINGS, rounds: one base RTT per round trip of the "
                  "request, srv: server, rtx: retransmission, queue: above the base RTT, rest: the client's own time",
                  highlight=False)
    if explained["queue_direction"].notna().any():
        console.print("queueing (out): the request waited in the path's queue; (back): the reply did; evidence "
                      "emulator: the testbed link's record of every packet's wait; one-way: the server's stamps",
                      highlight=False)


def _cell_label(cell_id: str, probe: str) -> str:
    """The cell id without its host pair, and the probe where the run has several kinds of call."""
    label = cell_id.split("|", 1)[1] if "|" in cell_id else cell_id
    return label if probe in ("echo", label) else f"{label} {probe}"
