"""Requests from confined candidate processes to their trusted supervisor, over a UNIX socket.

A confined worker cannot write the judge's caches, so what must land there is done for it by the
supervisor (`kernelwright.judge.supervisor`), a process that never runs candidate code: building
an extension (`build`), measuring baselines (`baselines`), making device lock files (`lock`). The
worker finds the socket through `$KW_JUDGE_SERVICE`. Messages are one JSON object per line each
way (`wire`, at most `MAX_MESSAGE` bytes); a reply with an "error" key raises `ServiceError` in the caller. The server answers only
processes below the supervisor (SO_PEERCRED), each connection in its own thread.

Nothing a caller sends is trusted: the handlers treat every field as data (a build is keyed by the
hash the supervisor computes of what it received; baselines are measured for the parameters the
worker registered before any candidate code existed, see `supervisor`).
"""
from __future__ import annotations

import os
import socket
import struct
import tempfile
import threading
import traceback
from pathlib import Path
from typing import Any, Callable

from . import wire

ENV_VAR = "KW_JUDGE_SERVICE"
MAX_MESSAGE = 1 << 24  # bytes of one request or reply line: a caller is candidate code, its lines are bounded
SOCKET_NAME = "service.sock"
_MAX_PATH = 100  # sun_path holds 108 bytes


class ServiceError(RuntimeError):
    """The supervisor refused or failed a request, or there is no supervisor to ask."""


def available() -> bool:
    return bool(os.environ.get(ENV_VAR))


def call(op: str, **fields: Any) -> dict[str, Any]:
    """Send one request to the supervisor and return its reply (blocks until it answers)."""
    path = os.environ.get(ENV_VAR)
    if not path:
        raise ServiceError("no judge supervisor in this process tree")
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(path)
            wire.send(sock, {"op": op, **fields})
            with sock.makefile("rb") as reader:
                reply = wire.receive(reader, MAX_MESSAGE) or {}
    except (OSError, ValueError) as exc:
        raise ServiceError(f"the judge supervisor did not answer {op!r}: {exc}") from exc
    if "error" in reply:
        raise ServiceError(str(reply["error"]))
    return reply


Handler = Callable[[dict[str, Any]], dict[str, Any]]


class Server:
    """Listens on a UNIX socket; `start()` serves in daemon threads (call it after any fork)."""

    def __init__(self, folder: Path, handlers: dict[str, Handler],
                 permit: Callable[[int], frozenset[str] | None] | None = None):
        self.handlers = handlers
        self.permit = permit  # peer pid -> the ops it may ask (None: every op), when given
        self.owner = os.getpid()
        self.path, self._tmp = socket_path(folder)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(self.path))
        self.sock.listen(16)
        self._closed = False

    def start(self) -> None:
        threading.Thread(target=self._accept, name="kw-service", daemon=True).start()

    def close(self) -> None:
        self._closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread (close alone does not)
        except OSError:
            pass
        try:
            self.sock.close()
            self.path.unlink(missing_ok=True)
            if self._tmp:
                os.rmdir(self._tmp)
        except OSError:
            pass

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as reader:
            try:
                pid = peer_pid(conn)
                if not is_descendant(pid, self.owner):
                    reply: dict[str, Any] = {"error": "only processes of this evaluation may ask"}
                else:
                    message = wire.receive(reader, MAX_MESSAGE) or {}
                    allowed = self.permit(pid) if self.permit is not None else None
                    if allowed is not None and str(message.get("op")) not in allowed:
                        reply = {"error": f"this process may not ask {message.get('op')!r}"}
                    else:
                        reply = self._handle(message)
                wire.send(conn, reply)
            except (OSError, ValueError):
                pass

    def _handle(self, message: dict[str, Any]) -> dict[str, Any]:
        handler = self.handlers.get(str(message.get("op")))
        if handler is None:
            return {"error": f"unknown request {message.get('op')!r}"}
        try:
            return handler(message)
        except Exception as exc:  # noqa: BLE001 - a failed request is an answer, not a dead supervisor
            return {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc(limit=4)[-1500:]}


def socket_path(folder: Path) -> tuple[Path, str | None]:
    """`folder/service.sock`, or a short folder of its own when that path is too long for a socket."""
    path = folder / SOCKET_NAME
    if len(str(path)) <= _MAX_PATH:
        return path, None
    short = tempfile.mkdtemp(prefix="kw-svc-")
    return Path(short) / "s", short


def peer_credentials(conn: socket.socket) -> tuple[int, int]:
    """(pid, uid) of the process at the other end of a UNIX socket (SO_PEERCRED)."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", creds)
    return pid, uid


def peer_pid(conn: socket.socket) -> int:
    return peer_credentials(conn)[0]


def is_descendant(pid: int, ancestor: int, depth: int = 64) -> bool:
    for _ in range(depth):
        if pid == ancestor:
            return True
        if pid <= 1:
            return False
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat[stat.rfind(")") + 2:].split()[1])
    return False
