"""`serve(fd)`: the runner's loop on the call channel whose socket is file descriptor `fd`; the
supervisor calls it in the confined child it forked (`supervisor.Supervisor._runner_child`)."""
from __future__ import annotations

import socket

from .session import Session


def serve(fd: int) -> int:
    """Answer the checker until it says finish or goes away; the exit code of the runner."""
    sock = socket.socket(fileno=fd)
    try:
        return Session(sock).serve()
    finally:
        sock.close()
