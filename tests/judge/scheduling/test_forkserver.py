"""The fork server (judge/scheduling/forkserver.py): who it forks for, when it refuses (then the evaluation
starts cold and says why), and that it dies with its owner. Whole evaluations forked from it,
attacks included: tests/judge/test_integrity.py (the "warm" arena)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelwright.judge import JudgeConfig, sandbox
from kernelwright.judge.api import PACKAGE_ROOT, warm_launcher
from kernelwright.judge.scheduling.forkserver import ForkServer, ForkServerError, package_digest
from kernelwright.judge.sandbox import COLD, SandboxSpec


def _env() -> dict[str, str]:
    env = sandbox.scrubbed_environ()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_ROOT), os.environ.get("PYTHONPATH")]))
    return env


@pytest.fixture(scope="module")
def server():
    handle = ForkServer(env=_env()).start(timeout_s=240)
    yield handle
    handle.close()


def test_a_request_with_the_wrong_token_is_refused(server, tmp_path):
    right, server.token = server.token, "not-the-token"
    try:
        with pytest.raises(ForkServerError, match="wrong token"):
            server.spawn(["x"], str(tmp_path), _env(), None)
    finally:
        server.token = right
    assert server.alive()


ASK_WITH_NO_NEW_PRIVS = r'''
import ctypes, json, os, sys
ctypes.CDLL(None).prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS, as every candidate process carries
from kernelwright.judge.scheduling.forkserver import ForkServer, ForkServerError
server = ForkServer(env={}, socket_path=sys.argv[1], token=sys.argv[2])
try:
    server.spawn(["x"], os.getcwd(), {}, None)
    print(json.dumps({"forked": True}))
except ForkServerError as exc:
    print(json.dumps({"refused": str(exc)}))
'''


def test_a_process_carrying_no_new_privs_is_refused_even_with_the_token(server, tmp_path):
    out = subprocess.run([sys.executable, "-c", ASK_WITH_NO_NEW_PRIVS, server.socket_path, server.token],
                         capture_output=True, text=True, timeout=120, env={**os.environ}, cwd=tmp_path)
    reply = json.loads(out.stdout.strip().splitlines()[-1])
    assert "no_new_privs" in reply["refused"]
    assert server.alive()


def test_requests_whose_import_time_variables_differ_are_not_forked(server):
    assert server.accepts(_env()) == ""
    assert "LD_PRELOAD" in server.accepts({**_env(), "LD_PRELOAD": "/tmp/evil.so"})
    assert "PYTHONPATH" in server.accepts({**_env(), "PYTHONPATH": "/elsewhere"})


def test_triton_interpret_is_an_import_time_variable(server):
    """triton.language makes its own @jit helpers (tl.sum's, tl.max's combine functions) when it is
    imported: a child that interprets Triton cannot be forked from a server that compiles it."""
    assert "TRITON_INTERPRET" in server.accepts({**_env(), "TRITON_INTERPRET": "0" if server.env.get(
        "TRITON_INTERPRET") == "1" else "1"})


def test_a_cpu_pool_forks_its_evaluations_with_triton_interpreted(monkeypatch):
    """A CPU pool started without TRITON_INTERPRET in its environment (a batch runner on a machine
    without a GPU): its fork server imports triton in interpreter mode, so a correct candidate whose
    kernel reduces with tl.max passes, forked warm (it failed with "Cannot call @triton.jit'd outside
    of the scope of a kernel" when the server had imported triton compiled)."""
    from kernelwright.judge.scheduling.pool import JudgePool

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    config = JudgeConfig(device="cpu", time=False, trials=1, overrides={"batch_size": 4, "dim": 100})
    with JudgePool(config, gpus=[], cpu_workers=1, warm=True) as pool:
        [verdict] = pool.judge_many([(PACKAGE_ROOT / "examples/problems/row_softmax.py",
                                      PACKAGE_ROOT / "examples/candidates/row_softmax.py")])
    assert verdict.status == "pass", verdict.error
    assert verdict.process.isolation["start"].startswith("warm")


def test_the_server_dies_with_its_owner(tmp_path):
    owner = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom kernelwright.judge.scheduling.forkserver import ForkServer\n"
         f"s = ForkServer(env={_env()!r}).start(timeout_s=240)\nprint(s.process.pid, flush=True)\ntime.sleep(600)"],
        stdout=subprocess.PIPE, text=True, env={**os.environ}, cwd=tmp_path)
    try:
        pid = int(owner.stdout.readline())
    finally:
        owner.kill()
        owner.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.1)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_a_changed_package_is_seen_and_other_commands_start_cold(tmp_path):
    launcher = warm_launcher(JudgeConfig(no_network=False), force=True)
    try:
        spec = SandboxSpec(argv=[sys.executable, "-c", "pass"], workdir=tmp_path, timeout_s=5,
                           output_limit_bytes=1000, no_network=False)
        assert launcher(spec, _env()).process is None
        assert "not the judge's supervisor" in launcher(spec, _env()).start
        spec.argv = [sys.executable, "-m", "kernelwright.judge.supervisor", "request.json"]
        (tmp_path / "pkg").mkdir()
        (tmp_path / "pkg" / "changed.py").write_text("x = 1\n")
        launcher.package = tmp_path / "pkg"
        launch = launcher(spec, _env())
        assert launch.process is None and "changed on disk" in launch.start
    finally:
        launcher.close()


def test_a_failing_launcher_costs_only_the_warm_start(tmp_path):
    def broken(spec, env):
        raise ForkServerError("the server is gone")

    info = sandbox.run(SandboxSpec(argv=[sys.executable, "-c", "print('ran')"], workdir=tmp_path, timeout_s=60,
                                   output_limit_bytes=10_000, no_network=False, launcher=broken))
    assert info.exit_code == 0 and "ran" in info.stdout_tail
    assert info.isolation["start"].startswith(COLD) and "the server is gone" in info.isolation["start"]


def test_the_package_digest_follows_its_files(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    first = package_digest(tmp_path)
    (tmp_path / "a.py").write_text("x = 22\n")
    assert package_digest(tmp_path) != first


def test_a_warm_child_can_be_killed_through_its_handle(server, tmp_path):
    # a supervisor whose request file is missing exits by itself; a live one is stopped by signal
    process = server.spawn(["missing-request.json"], str(tmp_path), {**_env(), "HOME": str(tmp_path)}, None)
    process.send_signal(signal.SIGKILL)
    code = process.wait(timeout=60)
    assert code is not None and code != 0


def test_warm_starts_are_on_unless_turned_off(monkeypatch):
    """Measured on the H100: unset $KW_JUDGE_WARM means warm on a GPU and on the CPU; 0 turns them off."""
    from kernelwright.judge import api
    from kernelwright.judge.scheduling import forkserver
    from kernelwright.judge.config import JudgeConfig

    monkeypatch.setattr(forkserver, "Launcher", lambda env, no_network, package: ("launcher", no_network))
    monkeypatch.setattr(api.trusted, "compile_package", lambda package: None)
    monkeypatch.delenv("KW_JUDGE_WARM", raising=False)
    assert api.warm_launcher(JudgeConfig(device="cuda")) is not None
    assert api.warm_launcher(JudgeConfig(device="cpu")) is not None
    monkeypatch.setenv("KW_JUDGE_WARM", "0")
    assert api.warm_launcher(JudgeConfig(device="cuda")) is None and api.warm_launcher(JudgeConfig(device="cpu")) is None


def test_preloading_stops_at_the_module_that_starts_a_thread_and_the_refusal_names_it(tmp_path, monkeypatch):
    """On a GPU machine one import started the CUDA driver's thread: the server must stop there,
    refuse to serve, and say which module it was (the fork would copy one thread of two)."""
    import sys
    import threading

    from kernelwright.judge.scheduling import forkserver

    (tmp_path / "kw_starts_a_thread.py").write_text(
        "import threading, time\nthreading.Thread(target=time.sleep, args=(5,), daemon=True, name='kwspin').start()\n")
    (tmp_path / "kw_never_reached.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(forkserver, "PRELOAD", ("json", "kw_starts_a_thread", "kw_never_reached"))
    before = threading.active_count()
    missing, started_by = forkserver.preload()
    assert (missing, started_by) == ([], "kw_starts_a_thread")
    assert "kw_never_reached" not in sys.modules and threading.active_count() > before
    assert "after importing kw_starts_a_thread" in forkserver._fork_safe(started_by)
