"""The profile pass of a batch: profiles of passing candidates, best first, within a time budget.

A search that evaluates through batch folders gets one GPU round trip per round, so the profiles
its next prompts need (the nodes it will expand) must come back with the verdicts. A request may
ask for one (`"profile": true`, written by the search within its run's profile budget); the runner
first judges every request (correctness and timing need nothing else), then profiles the passing
candidates that asked, fastest first and round-robin over folders (each problem's best is the node
most likely expanded next), until `budget_s` is spent. The profile runs through the judge's own
sandboxed worker (one trial, no timing, `config.profile`; ncu picks its kernels from the stored
verdict's per-kernel split, passed as `config.profile_kernels`), whose report is added to the verdict
already written; what the budget left out is said in the runner's log. A profile that fails, times
out or cannot even start changes nothing in the verdict but its `profile`, which then says why
(and `stage_seconds["profile"]`), and the pass goes on with the next candidate.
"""
from __future__ import annotations

import json
import time
from itertools import zip_longest
from pathlib import Path

from ..config import JudgeConfig
from ..verdict import Verdict

PROFILE_OVERRIDES = {"trials": 1, "time": False, "baselines": [], "profile": True, "energy_ms": 0.0}
MIN_SECONDS = 30.0  # a profile needs at least this much of the budget to be worth starting


def wants_profile(request: Path) -> bool:
    try:
        data = json.loads(request.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("profile") is True


def _speed(verdict: Verdict) -> float:
    return max((v for v in (verdict.speedup or {}).values() if isinstance(v, (int, float))), default=0.0)


def candidates(folder: Path) -> list[tuple[Path, Verdict]]:
    """(request, verdict) of the passing, unprofiled candidates that asked for a profile, fastest first."""
    from .batch import REQUEST_SUFFIX, read_verdicts

    found = []
    for name, verdict in read_verdicts(folder).items():
        request = folder / f"{name}{REQUEST_SUFFIX}"
        if verdict.passed and verdict.profile is None and request.is_file() and wants_profile(request):
            found.append((request, verdict))
    return sorted(found, key=lambda item: -_speed(item[1]))


def _profile_one(request: Path, pool, base: JudgeConfig | None, left: float,
                 shares: dict | None = None) -> tuple[dict, float]:
    """(the verdict's new `profile`, the seconds it took): the report, or a record of why there is none.
    `shares`: the stored verdict's per-kernel split, from which ncu picks its kernels (the profile job
    does not time, so it has none of its own)."""
    from .batch import read_request
    from ..profiling import failed_record

    start = time.monotonic()
    try:
        job = read_request(request, base)
        settings = {**job.config.to_dict(), **PROFILE_OVERRIDES}
        settings["timeout_s"] = min(job.config.timeout_s, left)
        settings["profile_kernels"] = shares or None
        job.config = JudgeConfig.from_dict(settings)
        profiled = pool.judge_many([job])[0]
    except Exception as exc:  # noqa: BLE001 -- one candidate's profile must not stop the pass or touch its verdict
        return failed_record(f"the profile run could not be made: {type(exc).__name__}: {exc}"), \
            round(time.monotonic() - start, 3)
    seconds = profiled.stage_seconds.get("profile", round(time.monotonic() - start, 3))
    if profiled.profile is not None:
        return profiled.profile, seconds
    why = profiled.error or f"its run ended {profiled.status} at {profiled.stage or 'start'} before the profile"
    return failed_record(f"the profile run failed: {why}"), seconds


def profile_pass(folders: list[Path], pool, base: JudgeConfig | None, budget_s: float, log=None) -> list[str]:
    """Profile what asked for it (see the module docstring); returns the names profiled."""
    from ...files import atomic_write
    from .batch import request_name, verdict_path

    queues = [candidates(Path(f)) for f in folders]
    ordered = [item for row in zip_longest(*queues) for item in row if item is not None]
    start, done = time.monotonic(), []
    for index, (request, verdict) in enumerate(ordered):
        left = budget_s - (time.monotonic() - start)
        if left < MIN_SECONDS:
            if log:
                log(f"profile budget of {budget_s:.0f} s spent: {len(ordered) - index} passing candidates "
                    "not profiled")
            break
        verdict.profile, verdict.stage_seconds["profile"] = _profile_one(request, pool, base, left, verdict.kernels)
        atomic_write(verdict_path(request), verdict.to_json())
        done.append(request_name(request))
        if log:
            log(f"{request_name(request)}: profiled ({verdict.profile.get('status', '?')}, "
                f"{verdict.stage_seconds['profile']:.0f} s)")
    return done
