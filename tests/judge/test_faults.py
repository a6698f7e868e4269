"""Reading a located CUDA fault from recorded rerun output: compute-sanitizer's memcheck log (the
documented block layout, new and old `at` lines) and the runner's error with launch blocking."""
from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.agents.repairer import cuda_fault
from kernelwright.judge import faults

DATA = Path(__file__).parent / "data"  # hand-written samples: data/README.md

# memcheck on a Triton kernel that reads past its input (CUDA 12 layout), with the host backtrace,
# a second error, the API error that followed and the summary; the program's own line before it
SANITIZER_TRITON = (DATA / "sanitizer_triton.log").read_text()

# the older layout of the `at` line (offset first, then file:line:function), a CUDA extension
SANITIZER_OLD = (DATA / "sanitizer_old_layout.log").read_text()

SANITIZER_ASSERT = (DATA / "sanitizer_assert.log").read_text()

# the sanitizer could not attach: no fault is read from its own error lines
SANITIZER_NO_TARGET = (DATA / "sanitizer_no_target.log").read_text()

SOURCE = (DATA / "oob_candidate.py.txt").read_text()

# the runner's paragraph for the same failure with CUDA_LAUNCH_BLOCKING=1: raised by the launch (line 17)
BLOCKING_TRITON = ("ModelNew.forward raised RuntimeError: Triton Error [CUDA]: an illegal memory access was "
                   "encountered (/tmp/kw-locate-q/runner/oob.py, line 17)")
# without launch blocking torch reports it at a later call, with its advice
ASYNC_TORCH = ("trial 0 (signed inputs): ModelNew.forward raised RuntimeError: CUDA error: an illegal memory access "
               "was encountered\nCUDA kernel errors might be asynchronously reported at some other API call, so the "
               "stacktrace below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
               " (/tmp/kw-judge-z/runner/oob.py, line 18)")


def test_the_first_error_block_of_a_triton_kernel_names_kernel_line_and_access():
    fault = faults.from_sanitizer(SANITIZER_TRITON, "oob.py")
    assert fault["tool"] == "compute-sanitizer --tool memcheck"
    assert fault["kernel"] == "add_one_kernel" and fault["where"] == "oob.py:14"
    report = fault["report"].splitlines()
    assert report[0] == "Invalid __global__ read of size 4 bytes"
    assert "by thread (96,0,0) in block (3,0,0)" in report and "Address 0x7f3c2e000400 is out of bounds" in report
    assert not any("Host Frame" in line or "backtrace" in line for line in report)
    assert "(97,0,0)" not in fault["report"]  # only the first block


def test_the_older_at_line_layout_and_a_file_outside_the_candidate_keep_their_path():
    fault = faults.from_sanitizer(SANITIZER_OLD, "cand.py")
    assert fault["kernel"] == "scale_kernel(float*, int)" and fault["where"] == "/home/user/ext/scale.cu:6"
    assert "is misaligned" in fault["report"]


def test_an_api_error_block_has_no_kernel_and_a_failed_attach_is_no_fault():
    fault = faults.from_sanitizer(SANITIZER_ASSERT)
    assert fault["kernel"] == "" and fault["report"].startswith("Program hit cudaErrorAssert")
    assert "Host Frame" not in fault["report"]
    assert faults.from_sanitizer(SANITIZER_NO_TARGET) == {}
    assert faults.from_sanitizer("plain program output\nno sanitizer here\n") == {}


def test_launch_blocking_names_the_launch_line_and_the_kernel_it_launches():
    fault = faults.from_launch_blocking(BLOCKING_TRITON, SOURCE, "oob")
    assert fault["tool"] == "CUDA_LAUNCH_BLOCKING=1" and fault["kernel"] == "add_one_kernel"
    assert fault["where"].startswith("line 17 of oob.py: `add_one_kernel[")
    assert fault["report"] == BLOCKING_TRITON


def test_launch_blocking_reads_nothing_from_errors_that_are_not_faults_or_name_no_line():
    assert faults.from_launch_blocking("ModelNew.forward raised ValueError: bad shape (/x/oob.py, line 3)", SOURCE) == {}
    assert faults.from_launch_blocking("RuntimeError: CUDA error: an illegal memory access was encountered", SOURCE) == {}


@pytest.mark.parametrize("code, kernel", [
    ("add_one_kernel[(triton.cdiv(n, 256),)](x, out, n, BLOCK=256)", "add_one_kernel"),
    ("self.k[grid](x, y)", "self.k"),
    ("out = scale_ext.scale(x, 2.0)", "scale_ext.scale"),
    ("return out", ""),
])
def test_the_kernel_a_line_launches(code, kernel):
    assert faults.launched_kernel(code) == kernel


def test_both_tools_merge_into_one_record():
    both = faults.merged(faults.from_sanitizer(SANITIZER_TRITON, "oob.py"),
                         faults.from_launch_blocking(BLOCKING_TRITON, SOURCE, "oob.py"))
    assert both["kernel"] == "add_one_kernel" and both["tool"].startswith("compute-sanitizer")
    assert both["where"].startswith("line 17 of oob.py") and both["where"].endswith("the faulting access at oob.py:14")
    assert both["report"].startswith("Invalid __global__ read")
    assert faults.merged({}, {"tool": "t", "kernel": "", "where": "w", "report": "r"})["where"] == "w"


@pytest.mark.parametrize("text", [ASYNC_TORCH, BLOCKING_TRITON, "misaligned address", SANITIZER_ASSERT,
                                  "CUDA error: unspecified launch failure", "kernel launch failed on purpose"])
def test_the_judge_and_the_repairer_recognise_the_same_faults(text):
    assert faults.async_fault(text) == cuda_fault(text)
