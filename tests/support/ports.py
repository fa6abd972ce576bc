"""Free TCP ports on 127.0.0.1 for tests that start a server or tell one where to listen."""

from __future__ import annotations

import socket


def free_ports(count: int = 1) -> list[int]:
    """``count`` distinct ports free now (all held at once while they are chosen, so none repeats)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def free_port() -> int:
    return free_ports(1)[0]
