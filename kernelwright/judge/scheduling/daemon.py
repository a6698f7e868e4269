"""The judge daemon: one process per user and key that outlives a `kernelwright judge` call, so
consecutive calls reuse its warm `JudgePool` (and the pool's fork server: torch, Triton and the
judge imported once) instead of each paying a fresh interpreter's imports.

`python -m kernelwright.judge.scheduling.daemon SOCKET --digest D [--idle S]` (started by the CLI,
`kernelwright.cli.judge_daemon`, or in the foreground by `kernelwright judge --serve`). Nothing
about how a candidate is judged changes: every request goes through `JudgePool.submit`, so each
candidate still runs in a fresh process forked for it (its own scratch folder, confinement, time
limits, bounded output, no network, the judge's caches not writable), and several requests at
once share the GPU through the pool's lanes and memory admission as in any pool.

Who may ask (checked on every connection, before anything is read): a process of the same user
(SO_PEERCRED), not carrying no_new_privs (every process of a candidate does: the worker sets it
before any candidate code runs) and not below the daemon in the process tree (every evaluation
is); the socket is 0600 in a 0700 folder of the user's (`daemon_key.socket_path`).

Each connection carries one request (a JSON line): `{"op": "judge", "digest", "problem",
"candidate", "config"}` is answered by `{"accepted": pid}` at once and `{"verdict": {...}}` when
it is judged; `{"op": "hello"}` by the daemon's pid, digest and uptime; `{"op": "stop"}` ends it.
A request whose digest is not the daemon's is refused (`{"stale": ...}`) and the daemon ends.

The daemon ends after `idle` seconds without a request in flight, when its package changes on
disk (it would be stale), on SIGTERM or SIGINT; its pools and fork servers end with it (a fork
server also ends when the daemon is killed: it watches a pipe only the daemon holds).
"""
from __future__ import annotations

import argparse
import fcntl
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from .. import trusted
from ..api import device_hint
from ..config import JudgeConfig
from ..proctree import no_new_privs
from ..service import is_descendant, peer_credentials
from ..wire import receive, send
from .daemon_key import PACKAGE, DaemonUnavailable
from .forkserver import package_digest
from .pool import JudgePool, visible_gpus

POLL_S = 0.5
STALE_CHECK_S = 5.0


class JudgeDaemon:
    """See the module docstring. `pool_factory(config, gpus)` makes a `JudgePool` (tests may pass another)."""

    def __init__(self, socket_path: str | Path, digest: str, idle_s: float | None, pool_factory=None):
        self.socket_path, self.digest, self.idle_s = Path(socket_path), digest, idle_s
        self.pool_factory = pool_factory or _default_pool
        self.started = time.monotonic()
        self.package = package_digest(PACKAGE)
        self.pools: dict[tuple[str, bool], Any] = {}
        self.served = 0
        self.in_flight = 0
        self.last_activity = time.monotonic()
        self.stopping = threading.Event()
        self._guard = threading.Lock()
        self._lock_file = None
        self.listener: socket.socket | None = None

    # ------------------------------------------------------------------ life

    def bind(self) -> None:
        """Take the key's lock and listen; raises DaemonUnavailable when another daemon holds it."""
        self._lock_file = open(str(self.socket_path) + ".lock", "a+")
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            self._lock_file.close()
            raise DaemonUnavailable(f"another judge daemon serves {self.socket_path}") from exc
        try:
            self.socket_path.unlink()  # left by a daemon that was killed: it no longer holds the lock
        except FileNotFoundError:
            pass
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_mask = os.umask(0o177)  # the socket is made 0600, never briefly wider
        try:
            self.listener.bind(str(self.socket_path))
        finally:
            os.umask(old_mask)
        os.chmod(self.socket_path, 0o600)
        self.listener.listen(64)

    def serve(self) -> None:
        """Answer connections until idle, stale or stopped; then close everything."""
        last_check = time.monotonic()
        try:
            while not self.stopping.is_set():
                self.listener.settimeout(POLL_S)
                try:
                    conn, _ = self.listener.accept()
                except socket.timeout:
                    conn = None
                if conn is not None:
                    with self._guard:
                        self.last_activity = time.monotonic()
                    conn.settimeout(None)
                    threading.Thread(target=self._handle, args=(conn,), name="kw-judged-conn", daemon=True).start()
                if time.monotonic() - last_check > STALE_CHECK_S:
                    last_check = time.monotonic()
                    self._stop_if_stale()
                self._stop_if_idle()
        finally:
            self.close()

    def _stop_if_idle(self) -> None:
        with self._guard:
            idle = self.in_flight == 0 and self.idle_s is not None and \
                time.monotonic() - self.last_activity > self.idle_s
        if idle:
            self.stopping.set()

    def _stop_if_stale(self) -> None:
        if self.in_flight == 0 and (package_digest(PACKAGE) != self.package or trusted.compromised()):
            self.stopping.set()

    def close(self) -> None:
        self.stopping.set()
        if self.listener is not None:
            self.listener.close()
            try:
                self.socket_path.unlink()
            except FileNotFoundError:
                pass
        for pool in list(self.pools.values()):
            pool.close(wait=False)
        self.pools.clear()
        if self._lock_file is not None:
            self._lock_file.close()

    # ------------------------------------------------------------------ requests

    def refusal(self, conn: socket.socket) -> str:
        """"" when the peer may send requests, else why not (see the module docstring)."""
        pid, uid = peer_credentials(conn)
        if uid != os.getuid():
            return f"process {pid} belongs to another user (uid {uid})"
        if no_new_privs(pid) is not False:
            return f"process {pid} carries no_new_privs (candidate code) or cannot be inspected"
        if is_descendant(pid, os.getpid()):
            return f"process {pid} runs below the judge daemon (an evaluation)"
        return ""

    def _handle(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as reader:
            try:
                why = self.refusal(conn)
                if why:
                    send(conn, {"error": why})
                    return
                request = receive(reader, limit=1 << 20)
                if request is not None:
                    self._answer(conn, request)
            except (OSError, ValueError) as exc:
                try:
                    send(conn, {"error": f"bad request: {exc}"})
                except OSError:
                    pass

    def _answer(self, conn: socket.socket, request: dict[str, Any]) -> None:
        op = request.get("op")
        if op == "hello":
            send(conn, self.hello())
        elif op == "stop":
            send(conn, {"stopping": os.getpid()})
            self.stopping.set()
        elif op != "judge":
            send(conn, {"error": f"unknown op {op!r}"})
        elif request.get("digest") != self.digest:
            send(conn, {"stale": f"this daemon serves key {self.digest}, not {request.get('digest')}; it ends"})
            self.stopping.set()
        elif self.stopping.is_set():
            send(conn, {"error": "the judge daemon is ending"})
        else:
            self._judge(conn, request)

    def hello(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "digest": self.digest, "uptime_s": round(time.monotonic() - self.started, 1),
                "served": self.served, "in_flight": self.in_flight}

    def _judge(self, conn: socket.socket, request: dict[str, Any]) -> None:
        with self._guard:
            self.in_flight += 1
            self.last_activity = time.monotonic()
        try:
            send(conn, {"accepted": os.getpid()})
            config = JudgeConfig.from_dict(request["config"])
            pool = self.pool_for(config)
            verdict = pool.submit(request["problem"], request["candidate"], config).result()
            with self._guard:
                self.served += 1
                served = self.served
            if verdict.process is not None:
                launcher = getattr(pool, "_launcher", None)
                server = getattr(launcher, "server", None)
                verdict.process.isolation["daemon"] = {
                    "pid": os.getpid(), "uptime_s": round(time.monotonic() - self.started, 1), "request": served,
                    "fork_server_pid": getattr(getattr(server, "process", None), "pid", None)}
            send(conn, {"verdict": verdict.to_dict()})
        finally:
            with self._guard:
                self.in_flight -= 1
                self.last_activity = time.monotonic()

    def pool_for(self, config: JudgeConfig):
        """The pool (and its fork server) for the request's device and network setting, made once."""
        device = device_hint(config, None)
        key = (device, bool(config.no_network))
        with self._guard:
            if key not in self.pools:
                gpus = list(visible_gpus())[:1] if device != "cpu" else []
                self.pools[key] = self.pool_factory(JudgeConfig(device=config.device if gpus else "cpu",
                                                                no_network=config.no_network), gpus)
            return self.pools[key]


def _default_pool(config: JudgeConfig, gpus: list[int]):
    """As `pool.judge_one` judges one candidate (the first GPU, no precompile), but warm (unless
    $KW_JUDGE_WARM=0) and with the pool's lanes, so calls that arrive together are judged together."""
    return JudgePool(config, gpus=gpus, precompile=False)


def run(socket_path: str | Path, digest: str, idle_s: float | None) -> int:
    daemon = JudgeDaemon(socket_path, digest, idle_s)
    try:
        daemon.bind()
    except DaemonUnavailable as exc:
        print(f"kernelwright judge daemon: {exc}", file=sys.stderr, flush=True)
        return 0
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: daemon.stopping.set())
    print(f"kernelwright judge daemon {os.getpid()} serving {socket_path} (key {digest}, idle "
          f"{'none' if idle_s is None else f'{idle_s:g} s'})", file=sys.stderr, flush=True)
    daemon.serve()
    print(f"kernelwright judge daemon {os.getpid()} ended after {daemon.served} verdicts", file=sys.stderr, flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernelwright.judge.scheduling.daemon")
    parser.add_argument("socket")
    parser.add_argument("--digest", required=True)
    parser.add_argument("--idle", type=float, default=None, help="seconds without requests before it ends")
    args = parser.parse_args(argv)
    return run(args.socket, args.digest, args.idle)


if __name__ == "__main__":
    raise SystemExit(main())
