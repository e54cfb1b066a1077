"""A throwaway echo server used only to record real client output for the parser tests.

It is not labkit's server (that lives in labkit/echo, owned elsewhere). It serves
echo.EchoService/Echo on 127.0.0.1 from the committed stubs in labkit/proto.
With ``--fail-every N`` every N-th call is aborted with RESOURCE_EXHAUSTED, so
that ghz reports a real statusCodeDistribution and errorDistribution. It also
answers the stand-in idle-step client (tests/data/tools/idle_step_client).

Usage: python echo_server_stub.py PORT [--fail-every N]
It prints "ready" once listening and stops on SIGTERM or after 60 s.
"""

from __future__ import annotations

import argparse
import itertools
import signal
import sys
import threading
from concurrent import futures

import grpc

from labkit.proto import echo_pb2, echo_pb2_grpc


class _Echo(echo_pb2_grpc.EchoServiceServicer):
    def __init__(self, fail_every: int) -> None:
        self._fail_every = fail_every
        self._counter = itertools.count(1)
        self._lock = threading.Lock()

    def Echo(self, request, context):  # noqa: N802 (gRPC method name)
        with self._lock:
            n = next(self._counter)
        if self._fail_every and n % self._fail_every == 0:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"test failure on call {n}")
        return echo_pb2.EchoResponse(payload_length=len(request.payload))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("--fail-every", type=int, default=0)
    args = parser.parse_args()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    echo_pb2_grpc.add_EchoServiceServicer_to_server(_Echo(args.fail_every), server)
    server.add_insecure_port(f"127.0.0.1:{args.port}")
    server.start()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    print("ready", flush=True)
    done.wait(timeout=60)
    server.stop(grace=None)
    sys.exit(0)


if __name__ == "__main__":
    main()
