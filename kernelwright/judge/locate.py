"""The rerun that locates an asynchronous CUDA fault: `attach_fault(verdict, request, config, env)`.

A candidate whose kernel faults (illegal memory access, misaligned address, device-side assert,
unspecified launch failure) fails with an error raised wherever CUDA next waited for the GPU, so
its verdict names the wrong line. When the verdict reports such a fault, the judge evaluates the
candidate once more, in a fresh sandboxed supervisor with a fresh runner, with CUDA_LAUNCH_BLOCKING=1
(each launch waits for its kernel: the launch that faulted raises), under
`compute-sanitizer --tool memcheck` when that is on PATH and the time allows, and only as far as the
failing call (the trials up to it; the timing when it failed there; no profile, no baselines).
What the rerun shows becomes `verdict.fault` (`judge/faults.py`: tool, kernel, where, report).

The verdict's status never changes: the candidate already failed, and the rerun adds only where.
The rerun is bounded (`config.locate_fault_s` in all; 0: none); when it cannot run, finds nothing
or runs out of time, `fault` stays empty and an info note says why: never the candidate's failure.
The candidate can tell it is being rerun (CUDA_LAUNCH_BLOCKING is in its environment) and could
print misleading sanitizer lines; neither can change what was judged, only its own repair hint.

`python -m kernelwright.judge.locate -- COMMAND...` brings up the loopback of the sandbox's network
namespace (compute-sanitizer reaches its target over TCP, as ncu does) and runs COMMAND.
"""
from __future__ import annotations

import os
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

from . import faults
from .config import JudgeConfig
from .profilehost import loopback_up
from .verdict import FAIL, INFO, PASS, Flag, Verdict

SANITIZER = "compute-sanitizer"
MIN_SANITIZER_S = 60.0  # below this the sanitizer (10-100x slower) is not tried: launch blocking alone
SANITIZER_SHARE = 0.6  # of the budget, for the sanitizer's run; the rest for a plain rerun if it shows nothing
SANITIZER_FLAGS = ("--tool", "memcheck", "--target-processes", "all", "--require-cuda-init", "no",
                   "--print-limit", "4", "--show-backtrace", "no")

# (request, config, env, wrap, wall_s) -> the rerun's verdict: `api.rerun`, a fake in the tests
Rerun = Callable[..., Verdict]


def attach_fault(verdict: Verdict, request, config: JudgeConfig, env: dict[str, str] | None,
                 rerun: Rerun, classify: Callable[[str], str] = faults.async_fault,
                 which: Callable[[str], str | None] = shutil.which) -> None:
    """Fill `verdict.fault` when the verdict failed with an asynchronous CUDA fault (see the module);
    `rerun` judges the request's candidate again (`api.rerun`)."""
    if verdict.status != FAIL or config.locate_fault_s <= 0 or verdict.fault:
        return  # only the candidate's failures: a system error or a faulting reference is not rerun
    kind = classify(failure_text(verdict))
    if not kind:
        return
    started = time.monotonic()
    try:
        fault, note = locate(verdict, request, config, env, rerun, classify, which)
    except Exception as exc:  # noqa: BLE001 - the judge's own rerun failed: the verdict stands as it is
        fault, note = {}, f"the rerun could not run: {type(exc).__name__}: {exc}"
    seconds = round(time.monotonic() - started, 3)
    verdict.stage_seconds["locate_fault"] = seconds
    if fault:
        verdict.fault = fault
    else:
        verdict.flags.append(Flag("judge_note", INFO, f"the asynchronous CUDA fault ({kind}) was not located: "
                                  f"{note or 'the rerun showed nothing more'} ({seconds:g} s)"))


def locate(verdict: Verdict, request, config: JudgeConfig, env: dict[str, str] | None, rerun: Rerun,
           classify: Callable[[str], str], which: Callable[[str], str | None]) -> tuple[dict[str, str], str]:
    """(the fault record, '') or ({}, why not): the sanitizer's run where it can, else (or when it
    showed nothing) a plain run with launch blocking, within `config.locate_fault_s` together."""
    budget = float(config.locate_fault_s)
    deadline = time.monotonic() + budget
    settings = rerun_config(verdict, config)
    blocking_env = {**(env or {}), "CUDA_LAUNCH_BLOCKING": "1"}
    source, name = candidate_source(request), request.candidate_label
    notes = []
    sanitizer = which(SANITIZER) if str(verdict.device).startswith("cuda") else None
    if sanitizer and budget >= MIN_SANITIZER_S:
        wrap = [sys.executable, "-m", "kernelwright.judge.locate", "--", sanitizer, *SANITIZER_FLAGS]
        again = rerun(request, settings, blocking_env, wrap, budget * SANITIZER_SHARE)
        fault = faults.merged(faults.from_sanitizer(process_output(again), name),
                              from_verdict(again, source, name, classify))
        if fault:
            return fault, ""
        notes.append("compute-sanitizer reported no error" + _ended(again))
    left = deadline - time.monotonic()
    if left < 5:
        return {}, "; ".join(notes + ["no time left for the rerun"])
    again = rerun(request, settings, blocking_env, None, left)
    fault = from_verdict(again, source, name, classify)
    if fault:
        return fault, ""
    if again.status == PASS:
        notes.append("the rerun with CUDA_LAUNCH_BLOCKING=1 passed (the fault did not recur)")
    else:
        notes.append("the rerun with CUDA_LAUNCH_BLOCKING=1 raised no fault in the candidate's file" + _ended(again))
    return {}, "; ".join(notes)


def rerun_config(verdict: Verdict, config: JudgeConfig) -> JudgeConfig:
    """The settings of the rerun: as far as the failing call and no further (trial i runs with seed
    config.seed + i whatever the count, so trials=i+1 repeats it), no profile, no baselines; the
    timing only when the fault happened there; no private MPS server (the sanitizer needs none)."""
    failed = next((t for t in verdict.trials if not t.ok), None)
    in_trials = failed is not None or verdict.stage in ("load", "compile", "check")
    trials = failed.trial + 1 if failed is not None else config.trials
    return replace(config, trials=max(1, trials), time=config.time and not in_trials, profile=False,
                   baselines=(), energy_ms=0.0, locate_fault_s=0.0, mps=False)


def failure_text(verdict: Verdict) -> str:
    """What the verdict says went wrong: its error, the failing trials' messages, the flags'."""
    parts = [verdict.error or ""] + [t.message for t in verdict.trials if not t.ok]
    parts += [f.message for f in verdict.reject_flags()]
    return "\n".join(p for p in parts if p)


def from_verdict(again: Verdict, source: str, name: str, classify: Callable[[str], str]) -> dict[str, str]:
    """The launch line the rerun's error names, when that error is an asynchronous fault."""
    for text in [t.message for t in again.trials if not t.ok] + [again.error or ""]:
        if classify(text):
            found = faults.from_launch_blocking(text, source, name, classify)
            if found:
                return found
    return {}


def process_output(verdict: Verdict) -> str:
    process = verdict.process
    return (process.stdout_tail + "\n" + process.stderr_tail) if process is not None else ""


def candidate_source(request) -> str:
    if request.candidate_source is not None:
        return request.candidate_source
    try:
        return Path(request.candidate_path or "").read_text()
    except (OSError, UnicodeDecodeError):
        return ""


def _ended(verdict: Verdict) -> str:
    process = verdict.process
    if process is not None and process.timed_out:
        return " (it ran out of time)"
    return ""


def main(argv: list[str] | None = None) -> None:
    """`-- COMMAND...`: the loopback up in this network namespace, then COMMAND in this process."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        raise SystemExit("usage: python -m kernelwright.judge.locate -- COMMAND...")

    print(f"kernelwright locate: {loopback_up()}", file=sys.stderr, flush=True)
    os.execvp(args[0], args)


if __name__ == "__main__":
    main()
