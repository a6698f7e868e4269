"""`kernelwright judge PROBLEM CANDIDATE` through the user's judge daemon (kernelwright/judge/scheduling/daemon.py).

The first call starts a daemon for its key (kernelwright/judge/scheduling/daemon_key.py: versions, source,
interpreter, devices, environment) and leaves it running; later calls with the same key send it
their request and print the verdict it returns, without importing torch here. A daemon ends after
an idle timeout ($KW_JUDGE_DAEMON_IDLE, `--daemon-idle`, default 300 s). When no daemon can be
used, or it ends before answering, the call judges in its own process as before and says why on
stderr (and in the verdict, a `judge_note` flag). `--no-daemon` or $KW_JUDGE_DAEMON=0 turns it off.
"""
from __future__ import annotations

import fcntl
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelwright.judge.request import default_cache_dir
from kernelwright.judge.scheduling.daemon_key import PACKAGE, DaemonUnavailable, absolute_path_list, daemon_key, key_digest, socket_path
from kernelwright.judge.service import peer_credentials
from kernelwright.judge.verdict import INFO, Flag, Verdict
from kernelwright.judge.wire import receive, send

START_TIMEOUT_S = 60.0  # the daemon listens before its pool imports anything: seconds are plenty
STALE_WAIT_S = 10.0
LOG_LIMIT = 1 << 20


@dataclass
class DaemonAnswer:
    """What the daemon answered: the verdict (a dict), or None and why not (`note`)."""

    verdict: dict[str, Any] | None
    note: str = ""
    stale: bool = False


def cache_dir_of(config) -> Path:
    return default_cache_dir(config).expanduser().resolve()


def address(config) -> tuple[Path, str]:
    """The socket and key digest of the daemon this call may use (raises DaemonUnavailable)."""
    cache = cache_dir_of(config)
    digest = key_digest(daemon_key(cache))
    return socket_path(cache, digest), digest


def judge_through_daemon(problem: Path, candidate: Path, config, idle_s: float) -> DaemonAnswer:
    """The verdict from the daemon of this key (started when none runs), else None and why."""
    config.cache_dir = str(cache_dir_of(config))  # the daemon must not resolve it from another folder
    try:
        path, digest = address(config)
    except DaemonUnavailable as exc:
        return DaemonAnswer(None, str(exc))
    request = {"op": "judge", "digest": digest, "problem": str(problem.resolve()),
               "candidate": str(candidate.resolve()), "config": config.to_dict()}
    answer = DaemonAnswer(None, "no attempt")
    for _ in range(2):  # a stale daemon is replaced once
        try:
            conn = connect(path) or start_and_connect(path, digest, idle_s)
        except DaemonUnavailable as exc:
            return DaemonAnswer(None, str(exc))
        answer = ask(conn, request, backstop_s(config))
        if not answer.stale:
            return answer
        wait_gone(path)
    return answer


def connect(path: Path) -> socket.socket | None:
    """A connection to the daemon at `path`, or None when none listens there."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(path))
    except (FileNotFoundError, ConnectionRefusedError):
        conn.close()
        return None
    except OSError as exc:
        conn.close()
        raise DaemonUnavailable(f"cannot reach the judge daemon at {path}: {exc}") from exc
    _pid, uid = peer_credentials(conn)
    if uid != os.getuid():
        conn.close()
        raise DaemonUnavailable(f"the process listening at {path} belongs to uid {uid}, not to this user")
    return conn


def start_and_connect(path: Path, digest: str, idle_s: float) -> socket.socket:
    """Start the daemon (one caller at a time: others wait, then connect to it) and connect."""
    with open(str(path) + ".start", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        conn = connect(path)
        if conn is not None:
            return conn
        process = spawn(path, digest, idle_s)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            conn = connect(path)
            if conn is not None:
                return conn
            if process.poll() is not None:
                raise DaemonUnavailable(f"the judge daemon exited at start ({process.returncode}): {log_tail(path)}")
            time.sleep(0.05)
        raise DaemonUnavailable(f"the judge daemon did not listen within {START_TIMEOUT_S:g} s: {log_tail(path)}")


def spawn(path: Path, digest: str, idle_s: float) -> subprocess.Popen:
    """`python -m kernelwright.judge.scheduling.daemon` in a session of its own, with this call's environment."""
    log_path = Path(str(path) + ".log")
    if log_path.is_file() and log_path.stat().st_size > LOG_LIMIT:
        log_path.unlink()
    env = dict(os.environ)  # the package this call imported comes first, as the judge's workers get it
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE.parent), absolute_path_list(env.get("PYTHONPATH", ""))]))
    with open(log_path, "ab") as log:
        return subprocess.Popen([sys.executable, "-m", "kernelwright.judge.scheduling.daemon", str(path), "--digest", digest,
                                 "--idle", str(idle_s)], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                cwd=str(path.parent), env=env, start_new_session=True, close_fds=True)


def log_tail(path: Path) -> str:
    try:
        lines = Path(str(path) + ".log").read_text(errors="replace").strip().splitlines()
    except OSError:
        return "no log"
    return " | ".join(lines[-5:])[-1500:] or "no output"


def backstop_s(config) -> float:
    """How long a call waits for its verdict: twice the judge's own backstop, and ten minutes more
    for waiting on GPU memory beside other judges."""
    return 2 * (3 * config.compile_timeout_s + 3 * config.timeout_s) + 600.0


def ask(conn: socket.socket, request: dict[str, Any], timeout_s: float) -> DaemonAnswer:
    """Send one request; the verdict, or why there is none."""
    pid = None
    with conn, conn.makefile("rb") as reader:
        try:
            conn.settimeout(timeout_s)
            send(conn, request)
            first = receive(reader)
            if first is None or "accepted" not in first:
                return refused(first)
            pid = first["accepted"]
            final = receive(reader)
        except socket.timeout:
            return DaemonAnswer(None, f"the judge daemon (pid {pid}) gave no verdict within {timeout_s:g} s")
        except (OSError, ValueError) as exc:
            final, why = None, f"{type(exc).__name__}: {exc}"
        else:
            why = "it crashed or was killed"
    if final is None or "verdict" not in final:
        detail = (final or {}).get("error") or why
        return DaemonAnswer(None, f"the judge daemon (pid {pid}) ended before it gave a verdict ({detail})")
    return DaemonAnswer(final["verdict"], f"judged by the judge daemon (pid {pid})")


def refused(message: dict[str, Any] | None) -> DaemonAnswer:
    if message is None:
        return DaemonAnswer(None, "the judge daemon closed the connection without answering")
    if "stale" in message:
        return DaemonAnswer(None, f"a stale judge daemon was replaced: {message['stale']}", stale=True)
    return DaemonAnswer(None, f"the judge daemon refused the request: {message.get('error', message)}")


def wait_gone(path: Path) -> None:
    deadline = time.monotonic() + STALE_WAIT_S
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def judge(problem: Path, candidate: Path, config, use_daemon: bool, idle_s: float, say):
    """The verdict (a `Verdict`) of `kernelwright judge`: through the daemon when `use_daemon`,
    else, or when the daemon cannot answer, in this process (`say` tells the user why)."""
    if use_daemon:
        answer = judge_through_daemon(problem, candidate, config, idle_s)
        if answer.verdict is not None:
            return Verdict.from_dict(answer.verdict)
        note = f"{answer.note}; judged in this process instead"
        say(f"kernelwright judge: {note}")
    from kernelwright.judge.scheduling.pool import judge_one  # noqa: PLC0415 -- the judge's pool pulls api.py, the sandbox and the supervisor (0.1-0.3 s): kept out of the CLI's start; on a GPU: memory admission shared with every judge process

    verdict = judge_one(problem, candidate, config)
    if use_daemon:
        verdict.flags.append(Flag("judge_note", INFO, note))
    return verdict


def serve(config, idle_s: float | None) -> int:
    """`kernelwright judge --serve`: this process becomes the daemon of its key (in the foreground)."""
    from kernelwright.judge.scheduling import daemon  # noqa: PLC0415 -- the judge daemon's modules pull the fork server and the sandbox (25 ms): kept out of the CLI's start

    config.cache_dir = str(cache_dir_of(config))
    path, digest = address(config)
    return daemon.run(path, digest, idle_s)
