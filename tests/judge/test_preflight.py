"""preflight.py: what a machine lacks to judge a backend, and verdicts that are the machine's fault."""
from __future__ import annotations

import shutil

import pytest

from kernelwright.judge import preflight
from kernelwright.judge.verdict import CompileResult, ProcessInfo, Verdict


def test_triton_present_here_and_missing_is_said_with_the_install_command(monkeypatch):
    assert preflight.missing_for("triton") == []  # the test environment has Triton
    monkeypatch.setattr(preflight, "has_module", lambda name: name != "triton")
    [message] = preflight.missing_for("triton")
    assert "Triton is not installed" in message and preflight.TRITON_INSTALL in message and "--eval batch" in message


def test_cuda_needs_a_gpu_nvcc_a_compiler_and_ninja(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(preflight, "has_module", lambda name: False)
    monkeypatch.setattr(preflight, "_nvcc", lambda: None)
    problems = preflight.missing_for("cuda", device="cpu")
    assert len(problems) == 4
    text = "\n".join(problems)
    for needed in ("CUDA GPU", "nvcc", "C++ compiler", "pip install ninja"):
        assert needed in text


def error_verdict(**fields) -> Verdict:
    return Verdict(problem="p", candidate="c", status="error", stage="compile", **fields)


@pytest.mark.parametrize("verdict, expected", [
    (error_verdict(error="the candidate does not load: c.py, line 9: running the module failed with "
                         "ModuleNotFoundError: No module named 'triton'"), "pip install triton"),
    (error_verdict(compile=CompileResult(ok=False, log="RuntimeError: Ninja is required to load C++ extensions")),
     "pip install ninja"),
    (error_verdict(compile=CompileResult(ok=False, errors=["OSError: CUDA_HOME environment variable is not set"])),
     "CUDA toolkit"),
    (error_verdict(process=ProcessInfo(stderr_tail="FileNotFoundError: [Errno 2] No such file or directory: 'c++'")),
     "compiler c++"),
    (error_verdict(error="RuntimeError: Failed to find C compiler. Please specify via CC"), "C compiler"),
])
def test_machine_failures_are_recognised(verdict, expected):
    assert expected in preflight.environment_error(verdict)
    assert expected in preflight.environment_error(verdict.to_dict())  # dicts (stored verdicts) too


@pytest.mark.parametrize("verdict", [
    error_verdict(error="No module named 'flash_attn'"),  # the candidate imports what does not exist
    error_verdict(error="SyntaxError: invalid syntax"),
    Verdict(problem="p", candidate="c", status="fail", stage="check",
            error="No module named 'triton'"),  # it ran: whatever it printed, it is judged on its output
    Verdict(problem="p", candidate="c", status="pass", stage="done"),
])
def test_the_candidates_own_failures_are_not_excused(verdict):
    assert preflight.environment_error(verdict) is None


@pytest.mark.gpu
def test_a_gpu_machine_has_what_both_backends_need():
    """On the GPU machine: Triton, a GPU, nvcc, a C++ compiler and ninja are all found."""
    assert preflight.missing_for("triton", "auto") == []
    assert preflight.missing_for("cuda", "auto") == []
