"""The rerun that locates an asynchronous CUDA fault: when it runs, with what settings and
environment, what it records, and that it never changes the verdict or blames the candidate for
its own failure. The rerun is replaced by a fake (the `rerun` seam) except in the end-to-end tests."""
from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.judge import JudgeConfig, judge, locate
from kernelwright.judge.request import SourceText, make_request
from kernelwright.judge.locate import SANITIZER, attach_fault, rerun_config
from kernelwright.judge.verdict import FAIL, INFO, PASS, ProcessInfo, TrialResult, Verdict

DATA = Path(__file__).parent / "data"  # hand-written samples: data/README.md
SANITIZER_TRITON = (DATA / "sanitizer_triton.log").read_text()
SANITIZER_NO_TARGET = (DATA / "sanitizer_no_target.log").read_text()
SOURCE = (DATA / "oob_candidate.py.txt").read_text()
BLOCKING_TRITON = ("ModelNew.forward raised RuntimeError: Triton Error [CUDA]: an illegal memory access was "
                   "encountered (/tmp/kw-locate-q/runner/oob.py, line 17)")

FAULT = "CUDA error: an illegal memory access was encountered"


class FakeRerun:
    """Records each rerun asked for and answers with the verdicts given, in order."""

    def __init__(self, *answers: Verdict):
        self.answers, self.calls = list(answers), []

    def __call__(self, request, config, env, wrap, wall_s):
        self.calls.append({"config": config, "env": env, "wrap": wrap, "wall_s": wall_s})
        return self.answers.pop(0)


def failed(message: str, trial: int = 2, device: str = "cuda") -> Verdict:
    trials = [TrialResult(trial=i, seed=42 + i, variant="v", ok=i < trial) for i in range(trial + 1)]
    trials[-1].message = message
    return Verdict(problem="p", candidate="oob", status=FAIL, stage="check", device=device, trials=trials,
                   error=f"trial {trial} (v inputs): {message}")


def answer(message: str = "", stdout: str = "", status: str = FAIL) -> Verdict:
    verdict = Verdict(problem="p", candidate="oob", status=status, error=message or None,
                      process=ProcessInfo(exit_code=0, stdout_tail=stdout))
    if message:
        verdict.trials = [TrialResult(trial=0, seed=42, variant="v", ok=False, message=message)]
    return verdict


@pytest.fixture
def request_(tmp_path):
    return make_request(SourceText("x = 1", "prob"), SourceText(SOURCE, "oob"), JudgeConfig(), tmp_path)


def no_sanitizer(name):
    return None


def test_a_fault_in_trial_2_is_rerun_up_to_it_with_launch_blocking_and_located(request_):
    verdict = failed(f"ModelNew.forward raised RuntimeError: {FAULT} (/tmp/kw-judge-z/runner/oob.py, line 18)")
    rerun = FakeRerun(answer(BLOCKING_TRITON))
    attach_fault(verdict, request_, JudgeConfig(), {"PYTHONPATH": "x"}, rerun=rerun, which=no_sanitizer)
    assert len(rerun.calls) == 1
    call = rerun.calls[0]
    assert call["env"] == {"PYTHONPATH": "x", "CUDA_LAUNCH_BLOCKING": "1"} and call["wrap"] is None
    settings = call["config"]
    assert settings.trials == 3 and not settings.time and not settings.profile and settings.baselines == ()
    assert settings.locate_fault_s == 0 and not settings.mps and call["wall_s"] <= 120
    assert verdict.status == FAIL and verdict.stage == "check"  # the verdict stands
    assert verdict.fault["kernel"] == "add_one_kernel" and verdict.fault["where"].startswith("line 17 of oob.py")
    assert verdict.fault["tool"] == "CUDA_LAUNCH_BLOCKING=1" and "locate_fault" in verdict.stage_seconds


def test_the_sanitizer_runs_the_rerun_where_installed_and_its_report_is_kept(request_):
    verdict = failed(FAULT)
    rerun = FakeRerun(answer(BLOCKING_TRITON, stdout=SANITIZER_TRITON))
    attach_fault(verdict, request_, JudgeConfig(), None, rerun=rerun, which=lambda name: f"/usr/bin/{name}")
    wrap = rerun.calls[0]["wrap"]
    assert len(rerun.calls) == 1 and wrap[3:5] == ["--", f"/usr/bin/{SANITIZER}"]
    assert wrap[1:3] == ["-m", "kernelwright.judge.locate"] and "memcheck" in wrap
    assert rerun.calls[0]["env"]["CUDA_LAUNCH_BLOCKING"] == "1" and rerun.calls[0]["wall_s"] < 120
    assert verdict.fault["tool"].startswith("compute-sanitizer") and verdict.fault["kernel"] == "add_one_kernel"
    assert "out of bounds" in verdict.fault["report"] and "oob.py:14" in verdict.fault["where"]


def test_a_sanitizer_that_shows_nothing_leaves_the_rest_of_the_budget_to_launch_blocking(request_, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(locate.time, "monotonic", lambda: clock[0])

    class SlowRerun(FakeRerun):  # each rerun takes all the time it is given
        def __call__(self, request, config, env, wrap, wall_s):
            clock[0] += wall_s
            return super().__call__(request, config, env, wrap, wall_s)

    verdict = failed(FAULT)
    rerun = SlowRerun(answer("the judge process timed out", stdout=SANITIZER_NO_TARGET), answer(BLOCKING_TRITON))
    attach_fault(verdict, request_, JudgeConfig(locate_fault_s=100), None, rerun=rerun,
                 which=lambda name: "/usr/bin/x")
    assert [c["wrap"] is None for c in rerun.calls] == [False, True]
    assert [c["wall_s"] for c in rerun.calls] == [60, 40]  # 100 s in all
    assert verdict.fault["tool"] == "CUDA_LAUNCH_BLOCKING=1"
    assert verdict.stage_seconds["locate_fault"] == 100


def test_no_rerun_for_a_pass_a_system_error_another_failure_or_a_zero_budget_and_no_sanitizer_on_a_cpu(request_):
    error = Verdict(problem="p", candidate="c", status="error", stage="load",
                    error=f"the reference Model (problem file) raised RuntimeError: {FAULT}")
    for verdict, config in ((Verdict(problem="p", candidate="c", status=PASS), JudgeConfig()), (error, JudgeConfig()),
                            (failed("ValueError: wrong shape"), JudgeConfig()),
                            (failed(FAULT), JudgeConfig(locate_fault_s=0))):
        rerun = FakeRerun()
        attach_fault(verdict, request_, config, None, rerun=rerun)
        assert rerun.calls == [] and verdict.fault == {} and not verdict.flags
    rerun = FakeRerun(answer(BLOCKING_TRITON))
    attach_fault(failed(FAULT, device="cpu"), request_, JudgeConfig(), None, rerun=rerun,
                 which=lambda name: "/usr/bin/x")
    assert rerun.calls[0]["wrap"] is None  # no sanitizer without a GPU


def test_a_rerun_that_cannot_run_or_finds_nothing_is_a_note_never_the_candidates(request_):
    def broken(*args):
        raise OSError("no room for the scratch folder")

    verdict = failed(FAULT)
    attach_fault(verdict, request_, JudgeConfig(), None, rerun=broken, which=no_sanitizer)
    assert verdict.status == FAIL and verdict.fault == {} and verdict.error.endswith(FAULT)
    note = verdict.flags[-1]
    assert note.severity == INFO and "not located" in note.message and "could not run: OSError" in note.message
    verdict = failed(FAULT)
    attach_fault(verdict, request_, JudgeConfig(), None, rerun=FakeRerun(answer(status=PASS)), which=no_sanitizer)
    assert verdict.fault == {} and "did not recur" in verdict.flags[-1].message


def test_the_fault_classifier_is_a_seam(request_):
    verdict = failed("XID 13: graphics engine exception (/x/oob.py, line 17)")
    rerun = FakeRerun(answer("XID 13: graphics engine exception (/x/oob.py, line 17)"))
    classify = lambda text: "XID 13" if "XID 13" in text else ""  # noqa: E731
    attach_fault(verdict, request_, JudgeConfig(), None, rerun=rerun, classify=classify, which=no_sanitizer)
    assert verdict.fault["where"].startswith("line 17 of oob.py") and verdict.fault["kernel"] == "add_one_kernel"


def test_a_fault_after_the_trials_reruns_them_all_and_the_timing():
    verdict = Verdict(problem="p", candidate="c", status=FAIL, stage="time", error=FAULT,
                      trials=[TrialResult(trial=i, seed=42 + i, variant="v", ok=True) for i in range(5)])
    settings = rerun_config(verdict, JudgeConfig(trials=5, profile=True))
    assert settings.trials == 5 and settings.time and not settings.profile


# ------------------------------------------------------------------ end to end, on this machine

PROBLEM = SourceText('''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.rand(64, 64)]

def get_init_inputs():
    return []
''', "relu_problem")  # hand-written test problem in KernelBench format

# hand-written: reports a fault the way torch does, and whether launch blocking reached its process
CANDIDATE = SourceText('''
import os
import torch.nn as nn


def launch(x):
    blocking = os.environ.get("CUDA_LAUNCH_BLOCKING", "unset")
    raise RuntimeError(f"CUDA error: an illegal memory access was encountered (blocking: {blocking})")


class ModelNew(nn.Module):
    def forward(self, x):
        return launch(x)
''', "fault_candidate")


def test_a_judged_fault_is_rerun_in_a_fresh_sandboxed_runner_with_launch_blocking():
    verdict = judge(PROBLEM, CANDIDATE, JudgeConfig(device="cpu", trials=2, time=False))
    assert verdict.status == FAIL and "blocking: unset" in verdict.error  # judged without it
    assert verdict.fault["tool"] == "CUDA_LAUNCH_BLOCKING=1"
    assert "blocking: 1" in verdict.fault["report"]  # the rerun's runner had it
    assert verdict.fault["where"].startswith("line 8 of fault_candidate.py: `raise RuntimeError(")
    assert verdict.stage_seconds["locate_fault"] > 0


@pytest.mark.gpu
def test_an_out_of_bounds_triton_kernel_is_located_on_the_gpu(tmp_path):
    candidate = tmp_path / "oob.py"
    candidate.write_text(OOB_TRITON)
    verdict = judge(GPU_PROBLEM, candidate, JudgeConfig(trials=2, baselines=()))
    assert verdict.status == FAIL, (verdict.status, verdict.error, [f.message for f in verdict.flags])
    assert verdict.fault, [f.message for f in verdict.flags]
    assert verdict.fault["kernel"] == "far_read_kernel", verdict.fault
    assert "oob.py" in verdict.fault["where"] and "far_read_kernel[" in verdict.fault["where"], verdict.fault


GPU_PROBLEM = SourceText('''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x * 2

def get_inputs():
    return [torch.rand(1 << 20)]

def get_init_inputs():
    return []
''', "double_problem")  # hand-written test problem in KernelBench format

# hand-written: reads 2**31 elements past its input, then runs a second kernel whose sync reports it
OOB_TRITON = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def far_read_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs.to(tl.int64) + (1 << 40))  # 4 TiB past x: never mapped, however much is
    tl.store(out_ptr + offs, x * 2, mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        far_read_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        return out + 0
'''
