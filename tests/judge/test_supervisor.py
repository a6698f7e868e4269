"""The supervisor's own rules: what it accepts from the worker, and that it stays free of torch."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelwright.judge import JudgeConfig
from kernelwright.judge.request import SourceText, make_request
from kernelwright.judge.supervisor import Supervisor, device_label
from tests.tiny_problem import TINY

REPO = Path(__file__).resolve().parents[2]


def _supervisor(tmp_path: Path, phase: str) -> Supervisor:
    request = make_request(SourceText("x = 1", "p"), SourceText("y = 2", "c"), JudgeConfig(cache_dir=str(tmp_path)),
                           tmp_path, phase=phase)
    request.save(tmp_path / "request.json")
    return Supervisor(tmp_path / "request.json", phase, parent_pid=0)


def test_baseline_parameters_are_accepted_once_and_only_in_an_evaluation(tmp_path):
    evaluation = _supervisor(tmp_path, "evaluate")
    assert evaluation._baselines({})["error"].startswith("no baseline parameters")
    assert evaluation._seal({"overrides": {"n": 4}, "device": "cpu"}) == {"ok": True}
    assert "already given" in evaluation._seal({"overrides": {"n": 1 << 30}, "device": "cpu"})["error"]
    assert evaluation.sealed["overrides"] == {"n": 4}
    (tmp_path / "c").mkdir()
    compile_phase = _supervisor(tmp_path / "c", "compile")
    assert "compile phase" in compile_phase._seal({"overrides": {}, "device": "cpu"})["error"]


def test_device_names_come_from_the_machine_not_from_the_worker():
    import platform

    assert device_label("cpu", "NVIDIA H100 80GB HBM3") == f"cpu:{platform.processor() or platform.machine()}"


def test_lock_files_only_in_the_lock_folders_with_plain_names(tmp_path):
    supervisor = _supervisor(tmp_path, "evaluate")
    from kernelwright.judge.gpulock import lock_folder

    folder = lock_folder("cpu", supervisor.cache)
    folder.mkdir(parents=True)
    assert supervisor._make_lock({"folder": str(folder), "key": "cpu"}) == {"ok": True}
    assert (folder / "cpu.lock").exists() and (folder / "cpu.turnstile").exists()
    assert "not a device lock" in supervisor._make_lock({"folder": str(tmp_path), "key": "cpu"})["error"]
    assert "not a device lock" in supervisor._make_lock({"folder": str(folder), "key": "../../x"})["error"]


_NO_TORCH = r"""
import sys
from pathlib import Path
from kernelwright.judge import supervisor, buildservice, baseline, compile as kwc
from kernelwright.judge.config import JudgeConfig
kwc.toolchain()
supervisor.device_label("cpu", "")
problem = Path(sys.argv[1])
problem.write_text("x = 1\n")
baseline.cache_key(problem, {}, JudgeConfig(), "cuda", "compile_default", device_label="GPU")
print("torch" in sys.modules, "triton" in sys.modules)
"""


def test_the_supervisor_side_never_imports_torch_or_triton(tmp_path):
    done = subprocess.run([sys.executable, "-c", _NO_TORCH, str(tmp_path / "p.py")], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.stdout.split() == ["False", "False"], done.stderr


def test_the_worker_may_not_write_where_the_supervisor_keeps_its_record(tmp_path, monkeypatch):
    supervisor = _supervisor(tmp_path, "evaluate")
    monkeypatch.chdir(tmp_path)  # a cwd that holds trusted/: refused
    with pytest.raises(RuntimeError, match="trusted folder"):
        supervisor.worker_writable()


def test_the_checker_is_told_an_active_mps_server_by_an_empty_note_so_it_times_the_runner_itself(monkeypatch):
    """An active server must reach the checker as "" (its own events time the calls); an unset
    variable reads as "no server" there, and the runner would time itself (the candidate's clock)."""
    from kernelwright.judge.checker import main as checker
    from kernelwright.judge.mps import Mps
    from kernelwright.judge.supervisor import checker_mps_note

    assert checker_mps_note(Mps(env={"CUDA_MPS_PIPE_DIRECTORY": "/tmp/p"}), "") == ""
    assert checker_mps_note(Mps(note="nvidia-cuda-mps-control is not installed"), "") == \
        "nvidia-cuda-mps-control is not installed"
    assert checker_mps_note(None, "").startswith("no MPS server")
    import socket

    def note() -> str:  # the checker's view (runner_from_env takes the descriptor over: a copy each time)
        mine, theirs = socket.socketpair()
        with mine, theirs:
            monkeypatch.setenv(checker.RUNNER_FD, str(os.dup(theirs.fileno())))
            runner = checker.runner_from_env()
            runner.sock.close()
            return runner.mps_note

    monkeypatch.setenv(checker.MPS_NOTE, "")
    assert note() == ""  # the checker's link then times with its own events
    monkeypatch.delenv(checker.MPS_NOTE)
    assert note()  # unset: no server, the runner times itself



@pytest.mark.skipif(sys.platform != "linux", reason="Landlock is Linux-only")
def test_with_stack_dumps_asked_for_the_candidate_still_runs_confined(tmp_path, monkeypatch):
    """$KW_DEBUG_STACKS starts faulthandler's watchdog, a thread: started before the runner confined
    itself, Landlock bound only the main thread and every verdict said `unconfined` (H200 smoke run,
    2026-11-28). It starts after confinement now."""
    from kernelwright.judge.api import judge
    from kernelwright.judge.confine import landlock_abi
    from kernelwright.judge.supervisor import DEBUG_STACKS

    if landlock_abi()[0] < 1:
        pytest.skip(f"no Landlock here: {landlock_abi()[1]}")
    monkeypatch.setenv(DEBUG_STACKS, "600")
    problem = TINY.format(scale=1)
    verdict = judge(SourceText(problem, "relu"), SourceText(problem.replace("class Model", "class ModelNew"), "relu_new"),
                    JudgeConfig(device="cpu", trials=1, time=False, baselines=(), cache_dir=str(tmp_path)))
    report = verdict.process.isolation["confinement"]
    assert verdict.process.confined and report["threads"] == 1, report
    assert not [f for f in verdict.flags if f.code == "unconfined"]


def test_launch_blocking_reaches_the_candidates_process_only():
    """The fault-locating rerun sets CUDA_LAUNCH_BLOCKING=1 for the candidate's launches; in the
    checker it would turn its stream waits on the runner's flags into host waits (a deadlock when
    the runner faults before writing `done`)."""
    import inspect

    from kernelwright.judge import supervisor

    assert "CUDA_LAUNCH_BLOCKING" in supervisor.RUNNER_ONLY
    checker_child = inspect.getsource(supervisor.Supervisor._checker_child)
    runner_child = inspect.getsource(supervisor.Supervisor._runner_child)
    assert "RUNNER_ONLY" in checker_child and "RUNNER_ONLY" not in runner_child
