"""nats-server (the NATS server of ``labkit hop``): how labkit starts it, and where its log says it listens.

nats-server logs to stderr; with ``-p -1`` it picks a free port and says which
in ``Listening for client connections on HOST:PORT``, then ``Server is ready``.
"""

from __future__ import annotations

import re

_LISTENING = re.compile(r"\[INF\] Listening for client connections on (\S+):(\d+)$")
_READY = re.compile(r"\[INF\] Server is ready$")


def nats_server_argv(nats_server: str, address: str) -> list[str]:
    """nats-server bound to ``address`` only, on a free port, with no monitoring, cluster or JetStream (its defaults)."""
    return [nats_server, "-a", address, "-p", "-1"]


def nats_client_url(log_lines: list[str]) -> str | None:
    """``nats://HOST:PORT`` once the log says the server listens and is ready; None before."""
    url = None
    for line in log_lines:
        if match := _LISTENING.search(line.rstrip()):
            host = match.group(1)
            url = f"nats://{host}:{match.group(2)}"
        elif _READY.search(line.rstrip()) and url:
            return url
    return None
