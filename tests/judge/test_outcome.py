"""Whose fault a verdict is: the candidate's (incorrect) or the system's (not judged).

The verdicts are written by hand in the shapes the judge writes them (the OOM texts are those of
the H100 suite run of docs/benchmarks.md, trimmed); no judge runs here.
"""
from __future__ import annotations

from kernelwright.judge.scheduling.admission import OOM_ALONE, OOM_RETRIED
from kernelwright.judge.outcome import CORRECT, INCORRECT, NOT_JUDGED, outcome
from kernelwright.judge.verdict import INFO, REJECT, CompileResult, Flag, ProcessInfo, TrialResult, Verdict

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 6.00 GiB. GPU 0 has a total capacity of 79.18 GiB"


def make(status: str, stage: str, error: str | None = None, **fields) -> Verdict:
    return Verdict(problem="p.py", candidate="c.py", status=status, stage=stage, error=error, **fields)


def test_a_pass_is_correct_and_a_wrong_result_or_a_rejection_is_the_candidates():
    assert outcome(make("pass", "done")).kind == CORRECT
    wrong = outcome(make("fail", "check", "trial 0: max abs error 3.1",
                         trials=[TrialResult(0, 0, "normal", False, message="max abs error 3.1")]))
    assert (wrong.kind, wrong.reason) == (INCORRECT, "wrong result")
    rejected = outcome(make("fail", "check", "caches outputs", flags=[Flag("output_cache", REJECT, "cached")]))
    assert (rejected.kind, rejected.reason) == (INCORRECT, "rejected by a check")


def test_compile_errors_crashes_and_timeouts_of_the_candidate_are_its_own():
    compiled = outcome(make("error", "compile", "the candidate does not load: SyntaxError at line 3",
                            compile=CompileResult(ok=False, log="SyntaxError")))
    assert (compiled.kind, compiled.reason) == (INCORRECT, "compile error")
    crash = outcome(make("fail", "check", "the judge process was killed by SIGSEGV in the check stage",
                         process=ProcessInfo(exit_code=-11, signal="SIGSEGV")))
    assert (crash.kind, crash.reason) == (INCORRECT, "crash")
    hang = outcome(make("fail", "time", "timed out in the time stage after 60 s",
                        process=ProcessInfo(timed_out=True)))
    assert (hang.kind, hang.reason) == (INCORRECT, "timeout")


def test_system_errors_are_not_judged_and_say_why():
    internal = outcome(make("error", "check", "internal judge error: Traceback (most recent call last):\n"
                            "  File \"worker.py\", line 1\nKeyError: 'x'"))
    assert (internal.kind, internal.reason, internal.detail) == (NOT_JUDGED, "internal judge error", "KeyError: 'x'")
    reference = outcome(make("error", "load", "the reference Model (problem file) raised RuntimeError: boom"))
    assert reference.kind == NOT_JUDGED and "load stage" in reference.reason and "boom" in reference.detail
    died = outcome(make("error", "load", "timed out in the load stage after 300 s",
                        process=ProcessInfo(timed_out=True)))
    assert died.kind == NOT_JUDGED  # a timeout before the candidate's code ran is not its own
    machine = outcome(make("error", "compile", "the candidate does not load: No module named 'triton'"))
    assert machine.kind == NOT_JUDGED and "pip install triton" in machine.detail


def test_out_of_memory_is_the_candidates_only_with_the_gpu_to_itself():
    # the suite run's shape: OOM in the judge's own guard while other processes held the GPU, no flag
    shared = outcome(make("error", "check", "internal judge error: Traceback (most recent call last):\n"
                          f"  File \"guards.py\", line 227\n{OOM}"))
    assert shared.kind == NOT_JUDGED and shared.detail.startswith("torch.OutOfMemoryError")
    reference = outcome(make("error", "load", f"the reference Model (problem file) raised OutOfMemoryError: {OOM}"))
    assert reference.kind == NOT_JUDGED and "shared" in reference.reason
    in_trial = make("fail", "check", "trial 0 raised", trials=[TrialResult(0, 0, "normal", False, message=OOM)])
    assert outcome(in_trial).kind == NOT_JUDGED  # the pool did not confirm it alone
    in_trial.flags += [Flag(OOM_RETRIED, INFO, "judged again alone"), Flag(OOM_ALONE, INFO, "alone")]
    alone = outcome(in_trial)
    assert (alone.kind, alone.reason) == (INCORRECT, "out of GPU memory with the GPU to itself")


def test_verdict_dicts_of_any_shape_are_read_field_by_field():
    assert outcome(make("fail", "check", "wrong").to_dict()).kind == INCORRECT
    assert outcome({"status": "pass", "stage": "done"}).kind == CORRECT  # no schema_version: a fixture
    sparse = {"status": "error", "stage": "check", "error": "internal judge error: x", "trials": [{"ok": False}],
              "process": {"wall_s": 3.0}, "flags": [{"code": "f", "severity": "warn"}]}
    assert outcome(sparse).kind == NOT_JUDGED and outcome(sparse).text() == "internal judge error: x"
