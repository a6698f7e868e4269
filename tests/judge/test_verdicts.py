"""End to end: real KernelBench problems (shrunk by overrides), hand-written candidates in
tests/judge/candidates/, each judged in its own sandboxed worker process.

All candidates are judged once, through the pool (two at a time), by a module fixture; each test
then checks one verdict. Trials are reduced where a test is not about trials.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelwright.judge import JudgeConfig
from kernelwright.judge.scheduling.pool import JudgeJob, JudgePool
from kernelwright.judge.verdict import ERROR, FAIL, PASS, REJECT

CANDIDATES = Path(__file__).parent / "candidates"
RELU, SOFTMAX, GEMM = "level1/19_ReLU.py", "level1/23_Softmax.py", "level2/63_Gemm_ReLU_Divide.py"
# hand-written (not KernelBench): signed inputs, K = 2048; not shrunk, the long reduction is the point
MATMUL_SIGNED = Path(__file__).parent / "problems" / "matmul_signed.py"
SIZES = {
    RELU: {"batch_size": 8, "dim": 256},
    SOFTMAX: {"batch_size": 4, "dim": 300},
    GEMM: {"batch_size": 16, "in_features": 64, "out_features": 32},
    MATMUL_SIGNED: {},
}
FAST_TIMING = {"warmup_ms": 1.0, "rep_ms": 5.0, "min_reps": 3, "baselines": ()}
# name -> (problem, extra config); the candidate file is candidates/<name>.py
CASES = {
    "relu_correct": (RELU, {"trials": 5}),
    "relu_wrong": (RELU, {}),
    "relu_shape": (RELU, {"trials": 1}),
    "relu_raise": (RELU, {}),
    "relu_hang": (RELU, {"timeout_s": 3}),
    "relu_segfault": (RELU, {}),
    "relu_exit": (RELU, {}),
    "relu_mutate": (RELU, {"trials": 2}),
    "relu_cache": (RELU, {"trials": 2}),
    "relu_uninit": (RELU, {"trials": 2}),
    "relu_empty": (RELU, {"trials": 2}),
    "relu_patch_timers": (RELU, {"trials": 1}),
    "relu_patch_compare": (RELU, {"trials": 1}),
    "syntax_error": (RELU, {}),
    "missing_modelnew": (RELU, {}),
    "wrong_signature": (RELU, {}),
    "softmax_correct": (SOFTMAX, {}),
    "softmax_torch": (SOFTMAX, {"trials": 1}),
    "softmax_zeros": (SOFTMAX, {"trials": 1, "overrides": {"batch_size": 2, "dim": 32768}}),
    "softmax_compile": (SOFTMAX, {"trials": 1}),
    "gemm_relu_divide_correct": (GEMM, {}),
    "matmul_blocked_k": (MATMUL_SIGNED, {"trials": 3, "shrink": False}),
    # the same correct ReLU, timed and profiled: stage times, energy and profile on the verdict
    "relu_timed_profiled": (RELU, {"trials": 2, "time": True, "profile": True, **FAST_TIMING}),
}


# cases that judge another case's candidate file under other settings
SAME_CANDIDATE = {"relu_timed_profiled": "relu_correct"}


def _candidate_file(name: str) -> Path:
    return CANDIDATES / f"{SAME_CANDIDATE.get(name, name)}.py"


@pytest.fixture(scope="module")
def verdicts(kernelbench, tmp_path_factory):
    jobs = []
    cache = str(tmp_path_factory.mktemp("judge_cache"))  # fresh build/lock/baseline caches
    for name, (problem, extra) in CASES.items():
        settings = {"time": False, "trials": 3, "overrides": SIZES[problem], "cache_dir": cache, **extra}
        path = problem if isinstance(problem, Path) else kernelbench / problem
        jobs.append(JudgeJob(path, _candidate_file(name), JudgeConfig(**settings), name=name))
    with JudgePool(cpu_workers=2) as pool:
        results = pool.judge_many(jobs)
    return dict(zip(CASES, results, strict=False))


def flag_codes(verdict, severity=REJECT) -> set[str]:
    return {f.code for f in verdict.flags if f.severity == severity}


def test_correct_relu_passes_all_trials_and_variants(verdicts):
    v = verdicts["relu_correct"]
    assert v.status == PASS and v.stage == "done", v.error
    assert len(v.trials) == 5 and all(t.ok for t in v.trials)
    assert {t.variant for t in v.trials} >= {"given", "signed"}
    assert v.overrides == SIZES[RELU] and v.device == ("cuda" if torch.cuda.is_available() else "cpu")
    assert v.compile.ok and v.compile.backend == "triton"
    assert v.process.exit_code == 0 and not v.flags


def test_correct_softmax_and_level2_gemm_pass(verdicts):
    for name in ("softmax_correct", "gemm_relu_divide_correct"):
        v = verdicts[name]
        assert v.status == PASS, (name, v.error)
        assert all(t.rel_l2_err is not None and t.rel_l2_err < 1e-5 for t in v.trials)


def test_wrong_result_fails_on_the_signed_variant(verdicts):
    v = verdicts["relu_wrong"]
    assert v.status == FAIL and v.stage == "done"
    assert v.trials[0].ok  # torch.rand inputs are all positive: leaky ReLU looks right there
    bad = [t for t in v.trials if not t.ok]
    assert bad and bad[0].variant != "given" and bad[0].max_abs_err > 1e-3
    assert "differs from the reference" in v.error


def test_wrong_shape_is_reported(verdicts):
    v = verdicts["relu_shape"]
    assert v.status == FAIL and not v.trials[0].shape_ok
    assert "(2048,)" in v.error and "(8, 256)" in v.error


def test_exception_in_forward_names_file_and_line(verdicts):
    v = verdicts["relu_raise"]
    assert v.status == FAIL and v.stage == "check"
    assert "kernel launch failed on purpose" in v.error and "relu_raise.py, line 7" in v.error


def test_hang_becomes_a_timeout_verdict(verdicts):
    v = verdicts["relu_hang"]
    assert v.status == FAIL and v.stage == "check"
    assert v.process.timed_out and "timed out in the check stage" in v.error


def test_segfault_becomes_a_verdict_with_the_candidate_line(verdicts):
    v = verdicts["relu_segfault"]
    assert v.status == FAIL and v.stage == "check"
    assert "killed by SIGSEGV" in v.error and "segmentation fault" in v.error  # the runner died, the checker judged
    assert "relu_segfault.py" in v.error and "line 10" in v.error


def test_silent_exit_is_not_a_pass(verdicts):
    v = verdicts["relu_exit"]
    assert v.status == FAIL and "the candidate's process exited (code 0)" in v.error  # the checker judged on


def test_input_mutation_is_rejected(verdicts):
    v = verdicts["relu_mutate"]
    assert v.status == FAIL and "input_mutation" in flag_codes(v)
    assert all(t.ok for t in v.trials)  # the values are right: only the guard catches it


def test_output_cache_keyed_on_data_ptr_is_rejected(verdicts):
    v = verdicts["relu_cache"]
    assert v.status == FAIL and "output_cache" in flag_codes(v)
    assert "previous call's output" in v.error


def test_unwritten_output_is_rejected(verdicts):
    v = verdicts["relu_uninit"]
    assert v.status == FAIL and "uninitialized_output" in flag_codes(v)
    assert "1024 output elements" in v.error


def test_empty_output_without_any_kernel_is_rejected(verdicts):
    v = verdicts["relu_empty"]  # the classic exploit: torch.empty_like and hope for stale memory
    assert v.status == FAIL and "uninitialized_output" in flag_codes(v)
    assert not any(t.ok for t in v.trials)


def test_patched_timers_are_rejected(verdicts):
    v = verdicts["relu_patch_timers"]
    assert v.status == FAIL and "monkeypatch" in flag_codes(v)
    assert "torch.cuda.Event.elapsed_time" in v.error and "time.perf_counter" in v.error


def test_a_candidate_that_replaces_the_judges_comparison_is_judged_by_the_real_one(verdicts):
    v = verdicts["relu_patch_compare"]
    # it patched a copy of the comparison in its own process: the checker's, in another, judged it
    assert v.status == FAIL and v.trials and not any(t.ok for t in v.trials)
    assert "differs from the reference" in v.trials[0].message


def test_tf32_switch_is_rejected(verdicts):
    v = verdicts["relu_patch_timers"]
    assert "precision" in flag_codes(v) and "allow_tf32: False -> True" in v.error
    assert v.precision["allow_tf32"] is False and v.precision["settings"]["cuda.matmul.allow_tf32"] is False


def test_syntax_error_is_one_clear_paragraph_with_the_line(verdicts):
    v = verdicts["syntax_error"]
    assert v.status == ERROR and v.stage == "compile"
    assert "syntax_error.py, line 7" in v.error and "\n" not in v.error
    assert v.compile is not None and not v.compile.ok
    assert v.process is None  # answered from the source alone: no worker was started


def test_missing_modelnew_and_wrong_signature_are_load_errors(verdicts):
    missing, signature = verdicts["missing_modelnew"], verdicts["wrong_signature"]
    assert missing.status == ERROR and "must define class ModelNew" in missing.error
    assert signature.status == ERROR and "wrong_signature.py, line 7" in signature.error
    assert "forward must accept the 1 inputs" in signature.error


def test_torch_softmax_is_not_a_custom_kernel(verdicts):
    v = verdicts["softmax_torch"]
    assert v.status == FAIL and "torch_op" in flag_codes(v)
    assert v.ops.get("_softmax") and "_softmax" in v.error


def test_all_zero_softmax_over_a_wide_row_is_caught_by_rel_l2(verdicts):
    v = verdicts["softmax_zeros"]
    trial = v.trials[0]
    assert v.status == FAIL and not trial.ok
    assert trial.max_abs_err < 1e-4  # allclose(atol=1e-4) alone would have passed it
    assert trial.rel_l2_err == pytest.approx(1.0)


def test_torch_compile_hidden_from_the_source_scan_is_caught_at_run_time(verdicts):
    v = verdicts["softmax_compile"]
    assert v.status == FAIL and "torch_op" in flag_codes(v)
    assert "dynamo" in v.error
    assert "monkeypatch" not in flag_codes(v)  # dynamo's own patches of nn.Module are not the candidate's


def test_every_sandboxed_verdict_records_its_isolation(verdicts):
    for name, v in verdicts.items():
        if name in ("syntax_error", "missing_modelnew"):
            continue  # rejected before a worker was started
        assert v.process is not None, name
        assert "network" in v.process.isolation and isinstance(v.process.network_isolated, bool)
        assert v.config["trials"] >= 1


def test_correct_matmul_summing_in_another_order_passes_the_wide_trial(verdicts):
    """K = 2048 on signed inputs scaled to |x| >= 100: rounding differences of the sums (~3e-2)
    far exceed atol = 1e-4 where outputs cancel towards zero; the scale-aware rule (atol * RMS)
    accepts them, the relative L2 error (~3e-7) shows the result is right."""
    v = verdicts["matmul_blocked_k"]
    assert v.status == PASS, v.error
    wide = v.trials[2]
    assert wide.variant == "wide_pos" and wide.ok and wide.fallback_from is None
    assert wide.max_abs_err > 1e-3 and wide.atol_scale > 1e3
    assert wide.rel_l2_err < 1e-6
    assert all(t.max_abs_err is not None and t.max_rel_err is not None for t in v.trials)


def test_stage_seconds_energy_and_profile_of_a_timed_cpu_verdict(verdicts):
    v = verdicts["relu_timed_profiled"]
    assert v.status == PASS and v.stage == "done", v.error
    stages = v.stage_seconds
    for stage in ("imports", "setup", "reference", "compile", "check", "guards", "time", "profile", "overhead"):
        assert stage in stages and stages[stage] >= 0, stage
    if v.process.isolation["start"].startswith("cold"):  # a fresh interpreter imports torch itself
        assert stages["imports"] > 0.1
    else:  # forked from the fork server, which imported it once
        assert v.process.isolation["start"].startswith("warm")
    assert stages["check"] > 0  # real work was timed
    assert sum(stages.values()) == pytest.approx(v.process.wall_s, rel=0.05, abs=0.5)
    assert v.energy == {"available": False, "reason": "CPU run: GPU energy is not measured"}
    profile = v.profile
    assert profile["status"] == "partial" and profile["device"] == "cpu"  # no GPU: no ncu, said so
    assert any("No CUDA device" in f["text"] for f in profile["findings"])
    assert profile["plain_ms_per_call"] > 0


def test_untimed_verdicts_carry_no_energy_or_profile(verdicts):
    v = verdicts["relu_correct"]
    assert v.energy is None and v.profile is None
    assert "time" not in v.stage_seconds and v.stage_seconds["check"] > 0
