"""The checker's call channel to a real runner process (CPU): loading, building, shared inputs,
calls, the candidate's errors and its death."""
from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import torch

from kernelwright.judge.checker.link import RunnerGone, RunnerLink
from kernelwright.judge.checker.main import spawn_runner
from kernelwright.problem import load_problem

REPO = Path(__file__).resolve().parents[3]
PROBLEM = REPO / "examples" / "problems" / "row_softmax.py"
SIZES = {"batch_size": 4, "dim": 100}


def _link(tmp_path: Path, candidate_source: str | None = None):
    candidate = REPO / "examples" / "candidates" / "row_softmax.py"
    if candidate_source is not None:
        candidate = tmp_path / "candidate.py"
        candidate.write_text(candidate_source)
    runner = spawn_runner(PROBLEM, candidate, env={"TRITON_INTERPRET": "1"})
    link = RunnerLink(runner.sock, "cpu", timeout_s=120, runner_pid=runner.pid)
    reply = link.load(problem_path=str(PROBLEM), candidate_path=str(candidate), overrides=SIZES, seed=42,
                      device="cpu", cache_dir=str(tmp_path / "cache"), allow_tf32=False, backward=None)
    return runner, link, reply


def test_calls_run_on_the_shared_inputs_and_come_back_as_the_checkers_copies(tmp_path):
    runner, link, reply = _link(tmp_path)
    try:
        assert reply["ok"], reply
        assert link.build()["ok"]
        problem = load_problem(PROBLEM, overrides=SIZES)
        for seed in (1, 2):
            pristine = problem.make_inputs(seed, "given", "cpu")
            link.share(pristine)
            result = link.call(pristine, phase="trials", record=seed == 1)
            assert result.error is None and result.ms > 0 and result.types == ["Tensor"]
            assert torch.allclose(result.outputs[0], torch.softmax(pristine[0], dim=1), atol=1e-5)
            assert torch.equal(link.shared[0], pristine[0])  # the candidate left its input alone
        observed = link.report()
        assert observed["recorded"] == [1] and observed["launches"]["triton"] == {"softmax_kernel": 2}
        assert set(observed["calls"]) == {"1", "2"}
    finally:
        link.finish()
        runner.kill()


def test_the_candidates_errors_are_replies_and_its_death_is_runner_gone(tmp_path):
    source = ("import os, torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
              "    def forward(self, x):\n        if float(x.sum()) > 0:\n            raise ValueError('positive')\n"
              "        os._exit(3)\n")
    runner, link, reply = _link(tmp_path, source)
    try:
        assert reply["ok"] and link.build()["ok"]
        x = torch.ones(4, 100)
        link.share([x])
        result = link.call([x], phase="trials")
        assert "ValueError: positive" in result.error and "candidate.py, line 7" in result.error
        with pytest.raises(RunnerGone):
            link.call([-x], phase="trials")
        assert "exited with code 3" in runner.status()
    finally:
        runner.kill()


def test_a_candidate_that_does_not_import_is_a_load_error(tmp_path):
    runner, link, reply = _link(tmp_path, "import torch\nraise RuntimeError('broken at import')\n")
    try:
        assert not reply["ok"] and "broken at import" in reply["error"]
        assert reply["compile"]["ok"] is False
    finally:
        runner.kill()


def _state_becomes(pid: int, state: str, within_s: float = 30.0) -> bool:
    import time

    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == state:
            return True
        time.sleep(0.01)
    return False


def test_a_frozen_runner_continues_when_thawed(tmp_path):
    runner, link, reply = _link(tmp_path)
    try:
        runner.loaded()  # stopped between holds from now on
        assert _state_becomes(runner.pid, "T")
        runner.thaw()
        assert link.build()["ok"]
    finally:
        os.kill(runner.pid, signal.SIGCONT)
        runner.kill()


@pytest.mark.gpu
def test_gpu_calls_are_fenced_timed_and_copied_without_the_sandbox(tmp_path):
    """The GPU protocol alone (no Landlock, no stopping the runner, no MPS: the runner times
    itself): flag words through CUDA IPC, outputs copied at `done` (predicted from the second
    call on). The sandboxed path with MPS is test_red_team's and test_gpu_judge's."""
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    candidate = REPO / "examples" / "candidates" / "row_softmax.py"
    runner = spawn_runner(PROBLEM, candidate)
    try:
        link = RunnerLink(runner.sock, "cuda", self_time=True, timeout_s=120, runner_pid=runner.pid)
        assert link.load(problem_path=str(PROBLEM), candidate_path=str(candidate), overrides=SIZES, seed=42,
                         device="cuda", cache_dir=str(tmp_path / "cache"), allow_tf32=False, backward=None)["ok"]
        assert link.build()["ok"]
        problem = load_problem(PROBLEM, overrides=SIZES)
        late = []
        for seed in range(4):
            pristine = [x.cuda() for x in problem.make_inputs(seed, "given", "cpu")]
            link.share(pristine)
            result = link.call(pristine, phase="timed")
            assert result.error is None and result.ms > 0, result.error
            assert torch.allclose(result.outputs[0], torch.softmax(pristine[0], dim=1), atol=1e-5)
            late.append(result.late)
        assert late == [True, False, False, False]  # the first copy when the reply came, later ones at `done`
        times = link.runner_times(link.report())
        assert len(times) == 4 and all(t > 0 for t in times.values())
        link.finish()
    finally:
        runner.kill()


# ------------------------------------------------------------------ a fault shared through MPS


def _faulting_link(monkeypatch, error: Exception) -> RunnerLink:
    import socket

    mine, theirs = socket.socketpair()
    theirs.close()
    link = RunnerLink(mine, "cuda", on_device=True)

    def raise_in_call(*_args, **_kwargs):  # what this process's next CUDA call raises after the candidate's fault
        raise error

    monkeypatch.setattr(link, "_call_device", raise_in_call)
    return link


def test_a_cuda_fault_raised_here_during_a_call_is_the_candidates_failed_call(monkeypatch):
    link = _faulting_link(monkeypatch, RuntimeError("CUDA error: an illegal memory access was encountered"))
    result = link.call([], phase="trials")
    assert result.error_type == "CudaFault" and "illegal memory access" in result.error
    assert "shares the GPU's MPS server" in result.error and link.faulted


def test_any_other_error_of_this_process_during_a_call_stays_the_judges(monkeypatch):
    link = _faulting_link(monkeypatch, RuntimeError("CUDA error: out of memory"))
    with pytest.raises(RuntimeError, match="out of memory"):
        link.call([], phase="trials")
    assert not link.faulted


def test_a_fault_after_the_candidate_ran_fails_it_and_before_it_ran_is_the_judges():
    from types import SimpleNamespace

    from kernelwright.judge.checker.main import candidate_fault

    fault = RuntimeError("CUDA error: device-side assert triggered")
    assert "device-side assert" in candidate_fault(SimpleNamespace(link=SimpleNamespace(n=3)), fault)
    assert candidate_fault(SimpleNamespace(link=SimpleNamespace(n=0)), fault) == ""  # no call yet: the judge's
    assert candidate_fault(SimpleNamespace(link=None), fault) == ""
    assert candidate_fault(SimpleNamespace(link=SimpleNamespace(n=3)), ValueError("a judge bug")) == ""
