"""The judge daemon (kernelwright/judge/scheduling/daemon.py) driven through the real CLI: `python -m kernelwright
judge` processes, one per call, as a user or an agent runs them (CPU, Triton interpreted)."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from kernelwright.judge.wire import receive, send
from proc_tree import alive, descendants

REPO = Path(__file__).resolve().parents[3]
PROBLEM = REPO / "examples/problems/row_softmax.py"
CANDIDATE = REPO / "examples/candidates/row_softmax.py"
SIZES = ["--set", "batch_size=4", "--set", "dim=100", "--no-time", "--trials", "2"]


@pytest.fixture
def cache():
    """A short judge cache folder of its own (the daemon's socket lives in it); every daemon started
    under it is stopped (and checked gone, with its fork server) at the end."""
    folder = Path(tempfile.mkdtemp(prefix="kwd-"))
    yield folder
    for path in sockets(folder):
        try:
            ask(path, {"op": "stop"})
        except OSError:
            pass
    shutil.rmtree(folder, ignore_errors=True)


def env_for(cache: Path, idle_s: float = 60.0, **extra: str) -> dict[str, str]:
    return {**os.environ, "KW_JUDGE_DAEMON": "1", "KW_JUDGE_DAEMON_IDLE": str(idle_s), "KW_CACHE_DIR": str(cache),
            "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO), **extra}


def judge(env: dict[str, str], candidate: Path = CANDIDATE) -> tuple[dict, str]:
    done = subprocess.run([sys.executable, "-m", "kernelwright", "judge", str(PROBLEM), str(candidate), "--json",
                           "--device", "cpu", *SIZES], capture_output=True, text=True, timeout=300, env=env, cwd=REPO)
    assert done.stdout.strip(), done.stderr
    return json.loads(done.stdout), done.stderr


def sockets(cache: Path) -> list[Path]:
    return sorted(cache.glob("judged-*/*.sock"))


def ask(path: Path, message: dict) -> dict | None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn, conn.makefile("rb") as reader:
        conn.settimeout(60)
        conn.connect(str(path))
        send(conn, message)
        return receive(reader)


def daemon_of(verdict: dict) -> dict:
    return verdict["process"]["isolation"]["daemon"]


def wait_for(condition, timeout_s: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


def test_a_second_call_is_judged_by_the_same_daemon_and_fork_server(cache):
    env = env_for(cache)
    first, _ = judge(env)
    second, _ = judge(env)
    assert first["status"] == second["status"] == "pass"
    one, two = daemon_of(first), daemon_of(second)
    assert one["pid"] == two["pid"] and two["request"] == one["request"] + 1
    assert one["fork_server_pid"] == two["fork_server_pid"] and alive(two["fork_server_pid"])
    start = second["process"]["isolation"]["start"]
    assert start.startswith("warm: forked from the fork server") and f"pid {two['fork_server_pid']}" in start
    assert second["stage_seconds"]["imports"] == 0.0  # nothing imported again: forked from the warm server
    [path] = sockets(cache)
    assert oct(path.stat().st_mode & 0o777) == "0o600" and oct(path.parent.stat().st_mode & 0o777) == "0o700"


def test_two_calls_at_once_are_both_served_by_one_daemon(cache):
    env = env_for(cache)
    results: list = [None, None]

    def call(index: int) -> None:
        results[index] = judge(env)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    verdicts = [verdict for verdict, _ in results]
    assert [v["status"] for v in verdicts] == ["pass", "pass"]
    assert daemon_of(verdicts[0])["pid"] == daemon_of(verdicts[1])["pid"]  # the start lock let one daemon start
    assert len(sockets(cache)) == 1


def snooping_candidate(tmp: Path, socket_path: Path) -> Path:
    """A candidate whose constructor asks the daemon for a verdict of its own and to stop, and
    fails with what it was told (hand-written attack for this test)."""
    source = CANDIDATE.read_text().replace("class ModelNew(nn.Module):", f'''
def _ask_daemon(message):
    import json, socket
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(20)
            conn.connect({str(socket_path)!r})
            conn.sendall(json.dumps(message).encode() + b"\\n")
            return conn.makefile("rb").readline().decode().strip() or "closed"
    except OSError as exc:
        return f"unreachable {{exc}}"


class ModelNew(nn.Module):''', 1).replace("        super().__init__()", '''        super().__init__()
        replies = [_ask_daemon({"op": "judge", "digest": "x", "problem": "p", "candidate": "c", "config": {}}),
                   _ask_daemon({"op": "stop"})]
        raise RuntimeError("DAEMON SAID " + " || ".join(replies))''', 1)
    path = tmp / "snooping_candidate.py"
    path.write_text(source)
    return path


def test_a_candidate_cannot_send_the_daemon_requests(cache, tmp_path):
    env = env_for(cache)
    first, _ = judge(env)
    [path] = sockets(cache)
    verdict, _ = judge(env, snooping_candidate(tmp_path, path))
    assert verdict["status"] != "pass" and "DAEMON SAID" in (verdict["error"] or ""), verdict["error"]
    said = verdict["error"].split("DAEMON SAID", 1)[1]
    assert "accepted" not in said and "stopping" not in said
    assert said.count("no_new_privs") == 2 or "unreachable" in said, said
    hello = ask(path, {"op": "hello"})  # still serving: the stop request was refused
    assert hello["pid"] == daemon_of(first)["pid"] and hello["served"] == 2


ASK_CONFINED = r'''
import ctypes, json, socket, sys
ctypes.CDLL(None).prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS, as every candidate process carries
with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
    conn.connect(sys.argv[1])
    conn.sendall(b'{"op": "hello"}\n')
    print(conn.makefile("rb").readline().decode())
'''


def test_a_process_carrying_no_new_privs_is_refused(cache):
    env = env_for(cache)
    judge(env)
    [path] = sockets(cache)
    out = subprocess.run([sys.executable, "-c", ASK_CONFINED, str(path)], capture_output=True, text=True, timeout=60)
    assert "no_new_privs" in json.loads(out.stdout)["error"]
    assert "pid" in ask(path, {"op": "hello"})  # this test's own process may ask


def test_another_key_gets_a_new_daemon_and_a_stale_request_ends_the_old_one(cache):
    first, _ = judge(env_for(cache))
    other, _ = judge(env_for(cache, KW_TEST_DAEMON_KEY="another"))  # a variable in the key differs
    assert daemon_of(first)["pid"] != daemon_of(other)["pid"]
    assert len(sockets(cache)) == 2
    old = next(p for p in sockets(cache) if ask(p, {"op": "hello"})["pid"] == daemon_of(first)["pid"])
    reply = ask(old, {"op": "judge", "digest": "not-its-key", "problem": "p", "candidate": "c", "config": {}})
    assert "stale" in reply
    assert wait_for(lambda: not alive(daemon_of(first)["pid"]) and not old.exists())
    assert alive(daemon_of(other)["pid"])


SLOW = '''
import time as _time
_time.sleep(6)  # hand-written for this test: a slow import, so the daemon can be killed mid-request
'''


def test_a_daemon_killed_mid_request_gives_the_verdict_in_process_with_a_note(cache, tmp_path):
    env = env_for(cache)
    first, _ = judge(env)
    pid = daemon_of(first)["pid"]
    slow = tmp_path / "slow_candidate.py"
    slow.write_text(SLOW + CANDIDATE.read_text())
    [path] = sockets(cache)
    call = subprocess.Popen([sys.executable, "-m", "kernelwright", "judge", str(PROBLEM), str(slow), "--json",
                             "--device", "cpu", *SIZES], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=REPO)
    assert wait_for(lambda: ask(path, {"op": "hello"})["in_flight"] == 1)
    below = descendants(pid)
    os.kill(pid, signal.SIGKILL)
    out, err = call.communicate(timeout=300)
    verdict = json.loads(out)
    assert call.returncode == 0 and verdict["status"] == "pass"
    assert f"the judge daemon (pid {pid}) ended before it gave a verdict" in err and "judged in this process" in err
    notes = [f["message"] for f in verdict["flags"] if f["code"] == "judge_note"]
    assert notes and "ended before it gave a verdict" in notes[0]
    assert "daemon" not in verdict["process"]["isolation"]
    assert wait_for(lambda: not any(alive(p) for p in below))  # its fork server and evaluation went with it


def test_the_idle_timeout_ends_the_daemon_and_its_fork_server(cache):
    verdict, _ = judge(env_for(cache, idle_s=2.0))
    daemon = daemon_of(verdict)
    assert wait_for(lambda: not alive(daemon["pid"]) and not alive(daemon["fork_server_pid"]), timeout_s=60)
    assert sockets(cache) == []


def test_no_daemon_judges_in_the_calling_process(cache):
    verdict, err = judge({**env_for(cache), "KW_JUDGE_DAEMON": "0"})
    assert verdict["status"] == "pass" and "daemon" not in verdict["process"]["isolation"]
    assert sockets(cache) == [] and "daemon" not in err


def test_serve_runs_the_daemon_in_the_foreground_and_calls_use_it(cache):
    env = env_for(cache)
    served = subprocess.Popen([sys.executable, "-m", "kernelwright", "judge", "--serve", "--daemon-idle", "30"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    try:
        assert wait_for(lambda: sockets(cache) != [] or served.poll() is not None)
        verdict, _ = judge(env)
        assert verdict["status"] == "pass" and daemon_of(verdict)["pid"] == served.pid
        ask(sockets(cache)[0], {"op": "stop"})
        assert served.wait(timeout=60) == 0
    finally:
        if served.poll() is None:
            served.kill()
            served.wait()
    assert sockets(cache) == []
