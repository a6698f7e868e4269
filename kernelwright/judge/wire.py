"""One JSON object per line over a stream socket: how the supervisor's service (`service`) and the
judge daemon (`daemon`, `cli.judge_daemon`) frame their messages. Standard library only.

`receive` reads at most `limit` bytes of a line, so a peer that never ends its line (a candidate
process talking to its supervisor, say) costs the reader that much memory and no more.
"""
from __future__ import annotations

import json
import socket
from typing import Any, BinaryIO


def send(conn: socket.socket, message: dict[str, Any]) -> None:
    conn.sendall(json.dumps(message).encode() + b"\n")


def receive(reader: BinaryIO, limit: int = 1 << 28) -> dict[str, Any] | None:
    """The next message from `reader` (`conn.makefile("rb")`); None when the other end closed first;
    ValueError when the line is longer than `limit` or not JSON."""
    line = reader.readline(limit)
    if not line.endswith(b"\n"):
        if len(line) >= limit:
            raise ValueError("message too long")
        return None
    return json.loads(line)
