"""``HOST:PORT`` addresses for ``--bind`` and ``--target``.

Kept apart from the server and client so the CLI can validate flags without
importing grpc. gRPC would accept a malformed address and fail later with a
vague message (or, for a bind address, listen somewhere unexpected); checking
here turns that into one clear usage error (see :data:`labkit.cli.params.BIND_ADDRESS`).
"""

from __future__ import annotations

import re

# A host is a bracketed IPv6 literal, or a name / IPv4 literal without colons.
_ADDRESS_RE = re.compile(r"^(?P<host>\[[0-9A-Fa-f:.%\w]+\]|[A-Za-z0-9_.-]+):(?P<port>\d{1,5})$")


def parse_host_port(text: str, *, allow_port_zero: bool) -> tuple[str, int]:
    """Split ``HOST:PORT`` (IPv6 as ``[::1]:PORT``) into the host as written and the port number.

    Port 0 ("pick a free port") makes sense for a bind address only.
    """
    match = _ADDRESS_RE.match(str(text).strip())
    if not match:
        hint = " (write IPv6 addresses in brackets, e.g. [::1]:50051)" if str(text).count(":") > 1 else ""
        raise ValueError(f"{text!r} is not HOST:PORT{hint}")
    host, port = match.group("host"), int(match.group("port"))
    lowest = 0 if allow_port_zero else 1
    if not lowest <= port <= 65535:
        raise ValueError(f"port {port} in {text!r} is out of range [{lowest}, 65535]")
    return host, port
