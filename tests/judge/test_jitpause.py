"""jitpause: a Triton JIT compile in the middle of a trial gives the device's shared hold up, so a
worker waiting to time another candidate is not held up by seconds of CPU work (issue 14)."""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernelwright.judge import jitpause
from kernelwright.judge.gpulock import DeviceLock, NoLock

ROOT = Path(__file__).resolve().parents[2]


def exclusive_free(lock: DeviceLock) -> bool:
    """Whether another open file could take the lock exclusively now (as a timing worker would)."""
    with open(lock.folder / f"{lock.key}.lock", "a+") as other:
        try:
            fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(other.fileno(), fcntl.LOCK_UN)
        return True


def test_a_shared_hold_let_go_frees_the_device_and_is_taken_again(tmp_path):
    lock = DeviceLock("gpu-test", tmp_path)
    assert lock.let_go() is False  # no hold to give up
    with lock.shared():
        assert not exclusive_free(lock)
        assert lock.let_go() is True
        assert exclusive_free(lock)
        lock.take_again()
        assert not exclusive_free(lock)
    assert exclusive_free(lock)
    assert NoLock("none").let_go() is False


def _step_off(calls: list):
    """A stand-in for the worker's off_device: records when the device would be let go and taken again."""

    @contextlib.contextmanager
    def step_off():
        calls.append("off")
        yield
        calls.append("on")

    return step_off


def test_install_wraps_triton_compile_and_uninstall_restores_it(monkeypatch):
    compiler = pytest.importorskip("triton.compiler")
    calls = []

    def fake_compile(src, target=None, options=None):
        calls.append(("compile", src))
        return "kernel"

    monkeypatch.setattr(compiler, "compile", fake_compile)
    uninstall = jitpause.install(_step_off(calls))
    assert compiler.compile is not fake_compile
    assert jitpause.install(_step_off(calls))() is None  # already wrapped: a second install changes nothing
    assert compiler.compile("src", target="t") == "kernel"
    assert calls == ["off", ("compile", "src"), "on"]
    uninstall()
    assert compiler.compile is fake_compile


def test_install_wraps_the_c_compiler_runs_of_a_first_launch(monkeypatch):
    build = pytest.importorskip("triton.runtime.build")
    calls = []

    def fake_build(name, src, srcdir, *args):  # the launcher's or the driver utilities' C compile
        calls.append(("build", name))
        return "lib.so"

    monkeypatch.setattr(build, "_build", fake_build)
    uninstall = jitpause.install(_step_off(calls))
    assert build._build is not fake_build
    assert build._build("__triton_launcher", "main.c", "/tmp", [], [], [], []) == "lib.so"
    assert calls == ["off", ("build", "__triton_launcher"), "on"]
    uninstall()
    assert build._build is fake_build


PROBE = textwrap.dedent("""\
    import json, os, sys, tempfile
    from pathlib import Path
    from kernelwright.judge.request import make_request
    from kernelwright.judge.checker.main import evaluate
    from kernelwright.judge.checker.stages.context import ResultWriter
    from kernelwright.judge.config import JudgeConfig

    cache = Path(os.environ["KW_PROBE_CACHE"])
    config = JudgeConfig(device="cpu", baselines=(), trials=2, time=False, cache_dir=str(cache))
    request = make_request(Path(sys.argv[1]), Path(sys.argv[2]), config, Path(tempfile.mkdtemp()))
    verdict = evaluate(request, ResultWriter(request, ""), {}, [])
    print(json.dumps({"trials_ok": [t.ok for t in verdict.trials], "error": verdict.error,
                      "device_lock": verdict.device_lock}))
    """)

PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.rand(64)]


def get_init_inputs():
    return []
"""
CANDIDATE = """import fcntl, os
from pathlib import Path
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):  # where a first launch would compile: is the device free for a timer?
        with open(Path(os.environ["KW_PROBE_CACHE"]) / "locks" / "cpu.lock", "a+") as lock, \\
                open(os.environ["KW_PROBE_SEEN"], "a") as seen:
            try:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                seen.write("device free\\n")
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
            except BlockingIOError:
                seen.write("device held\\n")
        return torch.relu(x)
"""


def test_the_runner_runs_only_while_its_checker_holds_the_device(tmp_path):
    """The candidate's process (the runner) runs between its checker's takings of the device only
    stopped: everything it does in a call, a JIT compile included, is inside the checker's shared
    hold (no timer of another evaluation runs beside it). The checker's own compiles (its
    comparison kernel) still give the hold up (`jitpause`, above)."""
    pytest.importorskip("triton")
    (tmp_path / "problem.py").write_text(PROBLEM)
    (tmp_path / "candidate.py").write_text(CANDIDATE)
    cache, seen = tmp_path / "cache", tmp_path / "seen.txt"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "KW_PROBE_CACHE": str(cache), "KW_PROBE_SEEN": str(seen)}
    done = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path / "problem.py"), str(tmp_path / "candidate.py")],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen.read_text().split("\n")[:-1] == ["device held"] * 3, found  # two trials and the refill
    assert found["device_lock"]["shared"]["holds"] >= 2
    assert found["trials_ok"] == [True, True], found["error"]  # correct: only the rules' own-kernel checks object
