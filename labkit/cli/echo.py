"""``labkit echo serve|call|...``: thin wrappers over labkit/echo/ (server.py, client.py and the agents).

Each agent's parameters are named as the fields of its plan (:mod:`labkit.echo.plans`), their defaults read from
it: a command's flags are its plan, which the experiments' command lines are built from. grpc is imported inside
the commands, so ``labkit echo --help`` stays fast.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from contextlib import closing

import click

from labkit.cli.options import stop_cleanly_on_sigterm
from labkit.cli.params import BIND_ADDRESS, BOUNDED_DURATION, DURATION, TARGET_ADDRESS, choice_list, size_list
from labkit.echo import upload_agent
from labkit.echo.options import grpcio_arguments, merged, parse_grpc_options
from labkit.echo.plans import (CALL_ORDERS, PROBES, UPLOAD_TRANSPORTS, CallPlan, SeriesPlan, ServePlan, UploadFilePlan,
                               UploadPlan, go_twin_args)
from labkit.echo.tcpinfo import TcpInfoSampler
from labkit.errors import LabkitError
from labkit.files import read_pem_certificates, read_tls_pair
from labkit.hosts.layout import local_tool
from labkit.limits import AT_MOST, MAX_FILE_BYTES, MAX_KEEPALIVE_MS, MAX_MESSAGE_BYTES, MAX_REPEATS, MAX_REQUEST_BYTES, MAX_TICKS, MAX_WARMUP
from labkit.units import format_duration


class EchoGroup(click.Group):
    """``labkit echo``: with ``--impl go`` a subcommand is replaced by its twin in the ``labkit-go`` binary.

    The process execs the binary with the same arguments (:func:`~labkit.echo.plans.go_twin_args`), so its PID,
    stdout and signals are the Go program's: whoever started ``labkit echo serve --impl go`` holds the Go server
    itself.
    """

    def parse_args(self, ctx, args):
        twin = go_twin_args(args)
        if twin is not None:
            _exec_go(twin[0], twin[1:])
        return super().parse_args(ctx, args)


def _exec_go(subcommand: str, args: list[str]) -> None:
    binary = local_tool("labkit-go")
    if binary is None:
        # On a host it is missing when the machine labkit ran from had no copy for this machine type to send
        # (its run said so as it opened the hosts); `labkit deploy` sends only what that machine has either.
        raise LabkitError(f"labkit-go is not installed here: build it with scripts/bootstrap.sh, or run labkit from a "
                          f"{platform.machine()} machine that has it, which sends its copy to each host a run needs "
                          f"it on")
    sys.stdout.flush()
    os.execv(binary, [str(binary), subcommand, *args])


IMPL = click.option("--impl", type=click.Choice(["python", "go"]), default="python", show_default=True,
                    expose_value=False, help="python: grpcio (this process); go: grpc-go (labkit-go, same flags).")
GRPC_OPTION = click.option("--grpc-option", "grpc_options", multiple=True, metavar="KEY=VALUE",
                           help="A gRPC knob by its grpc-go name, e.g. static-stream-window=32MiB (repeatable); "
                                "grpcio refuses those it has no equivalent of. See labkit.echo.options.")


@click.group(cls=EchoGroup)
def echo():
    """Serve and call the gRPC echo service (proto/echo.proto), in Python (grpcio) or Go (grpc-go)."""


@echo.command()
@click.option("--bind", required=True, type=BIND_ADDRESS, help="HOST:PORT to listen on; port 0 picks a free port.")
@click.option(
    "--max-message-bytes",
    type=click.IntRange(1, MAX_MESSAGE_BYTES),
    default=None,
    help="Largest message accepted; larger ones get RESOURCE_EXHAUSTED. [default: 4194304]",
)
@click.option("--tls-cert", type=click.Path(exists=True, dir_okay=False), help="PEM certificate chain; serve TLS only.")
@click.option("--tls-key", type=click.Path(exists=True, dir_okay=False), help="PEM private key for --tls-cert.")
@click.option(
    "--reflection/--no-reflection",
    default=True,
    show_default=True,
    help="Serve gRPC reflection so grpcurl and ghz work without the .proto.",
)
@click.option("--grace", "grace_s", type=BOUNDED_DURATION, default=format_duration(ServePlan.grace_s),
              show_default=True, help=f"Time in-flight calls get to finish on stop ({AT_MOST}).")
@click.option(
    "--permit-keepalive-ms",
    type=click.IntRange(1, MAX_KEEPALIVE_MS),
    default=None,
    help="Accept client keepalive pings this often, even between calls. By default gRPC's "
    "policy applies (pings without calls refused, at most one per 5 min), as on most real servers.",
)
@click.option(
    "--tcp-echo-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Also serve the raw TCP echo (4-byte length-prefixed; see labkit.echo.tcp_echo) on this port "
    "of the --bind host; 0 picks a free one, reported as tcp_echo_port in the ready line.",
)
@click.option(
    "--http2-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Also serve POST /upload over HTTP/2 (see labkit.echo.http2) on this port of the --bind host: "
    "h2c with prior knowledge, or TLS with ALPN h2 given --tls-cert/--tls-key. 0 picks a free one, "
    "reported as http2_port in the ready line.",
)
@click.option(
    "--max-upload-bytes",
    type=click.IntRange(0, MAX_FILE_BYTES),
    default=None,
    help="Largest HTTP/2 upload body accepted; larger ones get 413. [default: 1073741824]",
)
@click.option(
    "--stream-idle-timeout",
    "stream_idle_s",
    type=BOUNDED_DURATION,
    default=None,
    help="A stream (EchoStream, Upload) that sends nothing this long is cancelled (grpcio only: its streams hold "
    f"pool threads, at most all but 8 of them, so a unary call is always served; {AT_MOST}). [default: 60s]",
)
@GRPC_OPTION
@IMPL
def serve(**flags):
    """Run the echo server until SIGTERM or SIGINT.

    Once listening it prints one JSON line on stdout,
    {"event": "ready", "port": N, ...}, for a parent process to read.
    """
    from labkit.echo import server

    plan = ServePlan(**flags)
    plan.check()
    options = {}
    if plan.tls_cert is not None:
        cert_pem, key_pem = read_tls_pair(plan.tls_cert, plan.tls_key)
        options.update(tls_cert_pem=cert_pem, tls_key_pem=key_pem)
    if plan.max_message_bytes is not None:
        options["max_message_bytes"] = plan.max_message_bytes
    if plan.permit_keepalive_ms is not None:
        options["permit_keepalive_ms"] = plan.permit_keepalive_ms
    if plan.tcp_echo_port is not None:
        options["tcp_echo_port"] = plan.tcp_echo_port
    if plan.stream_idle_s is not None:
        options["stream_idle_s"] = plan.stream_idle_s
    if plan.http2_port is not None:
        options.update(http2_port=plan.http2_port, max_upload_bytes=plan.max_upload_bytes)
    if plan.grpc_options:
        options["grpc_options"] = parse_grpc_options(plan.grpc_options, "server")
        grpcio_arguments(options["grpc_options"])  # refuse, before listening, what grpcio cannot set
    server.serve_until_signalled(plan.bind, grace_s=plan.grace_s, reflection_enabled=plan.reflection, **options)


@echo.command()
@click.option("--target", required=True, type=TARGET_ADDRESS, help="HOST:PORT of an echo server.")
@click.option(
    "--sizes",
    required=True,
    type=size_list(minimum=0, maximum=MAX_REQUEST_BYTES),
    help=f"Comma-separated request sizes in bytes, e.g. 1000,14000,16k (each at most {MAX_REQUEST_BYTES}).",
)
@click.option("--repeats", type=click.IntRange(1, MAX_REPEATS), default=CallPlan.repeats, show_default=True,
              help="Calls per size.")
@click.option(
    "--gap",
    "gap_s",
    type=BOUNDED_DURATION,
    default=format_duration(CallPlan.gap_s),
    show_default=True,
    help=f"Idle time between the end of one call and the start of the next (e.g. 1s, 100ms; {AT_MOST}).",
)
@click.option(
    "--background-gap",
    "background_gap_s",
    type=BOUNDED_DURATION,
    default=None,
    help=f"Also send a 1-byte call on the same channel this often (not recorded; {AT_MOST}).",
)
@click.option("--cold", is_flag=True, help="Open a new channel (connection) for every call.")
@click.option("--warmup", type=click.IntRange(0, MAX_WARMUP), default=CallPlan.warmup, show_default=True,
              help="Unrecorded calls first.")
@click.option("--seed", type=int, default=None, help="Seed for reproducible payload bytes (and --order shuffled).")
@click.option(
    "--order",
    type=click.Choice(CALL_ORDERS),
    default=CallPlan.order,
    show_default=True,
    help="sequential: all repeats of one size, then the next size; shuffled: recorded calls in random order.",
)
@click.option(
    "--keepalive-ms",
    type=click.IntRange(1, MAX_KEEPALIVE_MS),
    default=None,
    help="Send HTTP/2 keepalive pings this often, also between calls (the server must permit them).",
)
@click.option(
    "--tcp-info",
    is_flag=True,
    help="Add the connection's TCP state (ss -tin: cwnd, ssthresh, rto, srtt, mss, retrans) before and after each call.",
)
@click.option("--timeout", "timeout_s", type=BOUNDED_DURATION, default=format_duration(CallPlan.timeout_s),
              show_default=True, help=f"Deadline of each call ({AT_MOST}).")
@click.option("--tls-ca", type=click.Path(exists=True, dir_okay=False), help="PEM root certificate; use TLS.")
@click.option("--tls-server-name", default=None, help="Name to verify in the server certificate instead of HOST.")
@GRPC_OPTION
@IMPL
def call(**flags):
    """Time Echo calls and print one JSON line per call on stdout.

    Fields: seq, payload_bytes, t_start_utc_ns, rtt_ns, ok, grpc_code, cold,
    background (the --background-gap in seconds, or null), and error when ok
    is false. Failed calls are recorded and the run goes on. A summary,
    background calls included, goes to stderr.
    """
    from labkit.echo import client

    plan = CallPlan(**flags)
    plan.check()
    tls_root_pem = None
    if plan.tls_ca:
        tls_root_pem = read_pem_certificates(plan.tls_ca, "--tls-ca")

    channel_options = client.keepalive_options(plan.keepalive_ms) if plan.keepalive_ms else []
    if plan.grpc_options:
        channel_options = merged(channel_options, grpcio_arguments(parse_grpc_options(plan.grpc_options, "client")))
    hooks = []
    if plan.tcp_info:
        hooks.append(TcpInfoSampler(plan.target))
    summary = client.CallSummary()
    calls = client.run_calls(
        plan.target,
        plan.sizes,
        plan.repeats,
        plan.gap_s,
        background_gap_s=plan.background_gap_s,
        cold=plan.cold,
        warmup=plan.warmup,
        seed=plan.seed,
        shuffle=plan.order == "shuffled",
        timeout_s=plan.timeout_s,
        channel_options=channel_options,
        hooks=hooks,
        tls_root_pem=tls_root_pem,
        tls_server_name=plan.tls_server_name,
        summary=summary,
    )
    stop_cleanly_on_sigterm()  # SIGTERM ends the calls as Ctrl-C does: the summary, then exit status 143
    try:
        # closing(): on Ctrl-C between two calls the generator is closed at
        # once, which stops the background sender and closes the channel.
        with closing(calls):
            for row in calls:
                # Flush every line: a parent process streams these as they come.
                sys.stdout.write(json.dumps(row) + "\n")
                sys.stdout.flush()
    except KeyboardInterrupt:
        click.echo(f"labkit echo call: interrupted after {summary.describe()}", err=True)
        raise  # labkit.cli.main turns this into exit status 130 (143 after SIGTERM)
    click.echo(f"labkit echo call: {summary.describe()}", err=True)
    if summary.recorded_failed and not summary.recorded_ok:
        sys.exit(1)  # every call failed: the rows say why, the status says that nothing was measured


@echo.command("series-agent", hidden=True)
@click.option("--address", required=True, help="The server's data address (ping, gRPC and TCP echo go there).")
@click.option("--grpc-port", type=click.IntRange(1, 65535), default=None, help="Port of the gRPC echo service.")
@click.option("--tcp-echo-port", type=click.IntRange(1, 65535), default=None, help="Port of the raw TCP echo.")
@click.option("--probes", required=True, type=choice_list(PROBES), help=f"Comma-separated: {','.join(PROBES)}.")
@click.option("--first-tick", type=click.IntRange(0, MAX_TICKS), default=SeriesPlan.first_tick, show_default=True,
              help="Number of the first tick.")
@click.option("--ticks", type=click.IntRange(1, MAX_TICKS), required=True, help="How many ticks to run.")
@click.option("--interval", "interval_s", type=DURATION, required=True, help="Time between ticks.")
@click.option("--payload-bytes", type=click.IntRange(0, MAX_REQUEST_BYTES), default=SeriesPlan.payload_bytes,
              show_default=True)
@click.option("--timeout", "timeout_s", type=DURATION, default=format_duration(SeriesPlan.timeout_s), show_default=True,
              help="Deadline of each call and ping.")
@click.option("--spread/--together", default=SeriesPlan.spread, show_default=True,
              help="Spread the probes evenly over each tick, or send them all at the tick.")
@IMPL
def series_agent(**flags):
    """The client side of `labkit series`: every probe on one schedule, JSON lines on stdout.

    Started by `labkit series` on the client host; the protocol is described in
    labkit.echo.series_agent.
    """
    from labkit.echo import series_agent  # here: at the top the name would be this command's

    sys.exit(series_agent.main(SeriesPlan(**flags)))


@echo.command("upload-file", hidden=True)
@click.option("--path", "path", required=True, help="The file on this host.")
@click.option("--size", type=click.IntRange(1, MAX_FILE_BYTES), default=None,
              help="Generate it with this many bytes unless it is there.")
@click.option("--seed", type=int, default=UploadFilePlan.seed, show_default=True, help="Seed of the generated bytes.")
def upload_file(**flags):
    """The file of `labkit upload` on this host: generate it (seeded) or hash it; one JSON line."""
    plan = UploadFilePlan(**flags)
    plan.check()
    if plan.size is not None:
        facts = upload_agent.make_file(plan.path, plan.size, plan.seed)
    else:
        facts = upload_agent.file_facts(plan.path)
    click.echo(json.dumps({"event": "file", **facts}))


@echo.command("upload-agent", hidden=True)
@click.option("--transport", type=click.Choice(UPLOAD_TRANSPORTS), required=True)
@click.option("--target", required=True, type=TARGET_ADDRESS, help="HOST:PORT of the gRPC or HTTP/2 endpoint.")
@click.option("--file", required=True, type=click.Path(dir_okay=False), help="The file to upload.")
@click.option("--sha256", default=None, help="The file's SHA-256; the agent refuses a file that differs.")
@click.option("--chunk-size", type=click.IntRange(1, MAX_REQUEST_BYTES), required=True, help="Bytes per chunk.")
@click.option("--repeats", type=click.IntRange(1, MAX_REPEATS), default=UploadPlan.repeats, show_default=True,
              help="Uploads to make.")
@click.option("--warmup", type=click.IntRange(0, MAX_WARMUP), default=UploadPlan.warmup, show_default=True,
              help="Untimed 1-byte uploads first.")
@click.option("--timeout", "timeout_s", type=BOUNDED_DURATION, default=format_duration(UploadPlan.timeout_s),
              show_default=True, help=f"Deadline of each upload ({AT_MOST}).")
@click.option("--tls-ca", type=click.Path(exists=True, dir_okay=False), help="PEM root certificate; use TLS.")
@click.option("--tls-server-name", default=None, help="Name to verify in the server certificate instead of HOST.")
@click.option("--declare-length", type=click.IntRange(min=0), default=None,
              help="Declare this length to the server instead of the file's (tests its check).")
@GRPC_OPTION
@IMPL
def upload_agent_command(**flags):
    """The client side of `labkit upload`: one cell's uploads, one JSON line each (see labkit.echo.upload_agent)."""
    plan = UploadPlan(**flags)
    plan.check()
    channel_options = []
    if plan.grpc_options:
        channel_options = grpcio_arguments(parse_grpc_options(plan.grpc_options, "client"))

    data = upload_agent.load_file(plan.file, plan.sha256)
    tls_root_pem = None
    if plan.tls_ca:
        tls_root_pem = read_pem_certificates(plan.tls_ca, "--tls-ca")

    def emit(row):
        # Flush every line: the controller appends each upload to the run as it arrives.
        sys.stdout.write(json.dumps(row) + "\n")
        sys.stdout.flush()

    uploads = upload_agent.run_uploads(
        plan, data, tls_root_pem=tls_root_pem, channel_options=channel_options,
        ready=lambda **facts: emit({"event": "ready", "transport": plan.transport, "target": plan.target, **facts}),
    )
    with closing(uploads):
        for row in uploads:
            emit(row)
