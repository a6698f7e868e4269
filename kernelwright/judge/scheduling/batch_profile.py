"""The profiles of a batch: passing candidates that asked for one, as their verdicts come in, within a budget.

A search that evaluates through batch folders gets one GPU round trip per round, so the profiles
its next prompts need (the nodes it will expand) must come back with the verdicts. A request may
ask for one (`"profile": true`, written by the search within its run's profile budget). While the
runner judges, each passing candidate that asked gets its profile job submitted to the same pool
as soon as its verdict is written (`ProfileFeed`: profiles interleaved with the judging, issue 32,
point 1), until `budget_s` seconds after the first one started. After the last verdict, the runner
waits for them, then `profile_pass` takes what is left (candidates whose verdicts were written by
an earlier call, or that the budget left out): fastest first and round-robin over folders (each
problem's best is the node most likely expanded next), within what the budget left. The profile
runs through the judge's own sandboxed worker (one trial, no timing, `config.profile`; ncu picks its
kernels from the stored verdict's per-kernel split, passed as `config.profile_kernels`), whose
report is added to the verdict already written; what the budget left out is said in the runner's
log. A profile that fails, times out or cannot even start changes nothing in the verdict but its
`profile`, which then says why (and `stage_seconds["profile"]`), and the others go on.
"""
from __future__ import annotations

import json
import threading
import time
from concurrent.futures import Future, wait
from itertools import zip_longest
from pathlib import Path

from ...files import atomic_write
from ..config import JudgeConfig
from ..profiling import failed_record
from ..verdict import Verdict
from .batch_folder import REQUEST_SUFFIX, read_request, read_verdicts, request_name, verdict_path

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
    found = []
    for name, verdict in read_verdicts(folder).items():
        request = folder / f"{name}{REQUEST_SUFFIX}"
        if verdict.passed and verdict.profile is None and request.is_file() and wants_profile(request):
            found.append((request, verdict))
    return sorted(found, key=lambda item: -_speed(item[1]))


def profile_job(request: Path, base: JudgeConfig | None, left: float, shares: dict | None = None):
    """The judge job that profiles `request`'s candidate: one trial, no timing, `config.profile`, at most
    `left` seconds. `shares`: the stored verdict's per-kernel split, from which ncu picks its kernels
    (the profile job does not time, so it has none of its own). Raises what reading the request raises."""
    job = read_request(request, base)
    settings = {**job.config.to_dict(), **PROFILE_OVERRIDES}
    settings["timeout_s"] = min(job.config.timeout_s, left)
    settings["profile_kernels"] = shares or None
    job.config = JudgeConfig.from_dict(settings)
    return job


def profile_record(profiled: Verdict, started: float) -> tuple[dict, float]:
    """(the verdict's new `profile`, the seconds it took) from the profile job's verdict."""
    seconds = profiled.stage_seconds.get("profile", round(time.monotonic() - started, 3))
    if profiled.profile is not None:
        return profiled.profile, seconds
    why = profiled.error or f"its run ended {profiled.status} at {profiled.stage or 'start'} before the profile"
    return failed_record(f"the profile run failed: {why}"), seconds


def not_made(exc: BaseException, started: float) -> tuple[dict, float]:
    return failed_record(f"the profile run could not be made: {type(exc).__name__}: {exc}"), \
        round(time.monotonic() - started, 3)


def _profile_one(request: Path, pool, base: JudgeConfig | None, left: float,
                 shares: dict | None = None) -> tuple[dict, float]:
    """(the verdict's new `profile`, the seconds it took): the report, or a record of why there is none."""
    start = time.monotonic()
    try:
        profiled = pool.judge_many([profile_job(request, base, left, shares)])[0]
    except Exception as exc:  # noqa: BLE001 -- one candidate's profile must not stop the pass or touch its verdict
        return not_made(exc, start)
    return profile_record(profiled, start)


def write_profile(request: Path, verdict: Verdict, record: tuple[dict, float], log=None) -> None:
    """The verdict already written, with its profile (or why there is none) added: nothing else changes."""
    verdict.profile, verdict.stage_seconds["profile"] = record
    atomic_write(verdict_path(request), verdict.to_json())
    if log:
        log(f"{request_name(request)}: profiled ({verdict.profile.get('status', '?')}, "
            f"{verdict.stage_seconds['profile']:.0f} s)")


class ProfileFeed:
    """Profiles started as the verdicts come in, interleaved with the judging (issue 32, point 1).

    The runner offers each verdict it writes (`offer`); a passing candidate whose request asks for a
    profile gets its profile job submitted to the same pool at once, so it queues with the candidates
    still to judge (the profile holds the GPU alone while ncu runs, as a timing does, so it never
    disturbs another's measurement) instead of waiting for the last verdict. Profiles are started
    until `budget_s` seconds after the first was; what completes is written into its verdict at once
    (a runner stopped later keeps it). `finish` waits for the profiles started, cancels those that
    had not begun when the budget ran out (the pass after it counts them as not profiled)."""

    def __init__(self, pool, base: JudgeConfig | None, budget_s: float, log=None):
        self.pool, self.base, self.budget_s, self.log = pool, base, budget_s, log
        self.first: float | None = None  # when the first profile was started
        self.done: list[str] = []
        self._running: dict[Future, tuple[Path, Verdict, float]] = {}
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)  # a started profile's record written (or it was cancelled)

    def left(self) -> float:
        """Seconds of the budget left (all of it before the first profile)."""
        return self.budget_s - (0.0 if self.first is None else time.monotonic() - self.first)

    def offer(self, request: Path, verdict: Verdict) -> None:
        if not (verdict.passed and verdict.profile is None and wants_profile(request)) or self.left() < MIN_SECONDS:
            return  # a candidate the budget leaves out stays unprofiled: the pass after `finish` says so
        started = time.monotonic()
        self.first = started if self.first is None else self.first
        try:
            future = self.pool.submit_job(profile_job(request, self.base, self.left(), verdict.kernels))
        except Exception as exc:  # noqa: BLE001 -- one candidate's profile must not stop the runner or touch its verdict
            self._write(request, verdict, not_made(exc, started))
            return
        with self._lock:
            self._running[future] = (request, verdict, started)
        future.add_done_callback(self._finished)

    def _finished(self, future: Future) -> None:
        with self._lock:
            request, verdict, started = self._running[future]
        try:
            if not future.cancelled():  # cancelled: not started within the budget, counted by the pass after `finish`
                try:
                    record = profile_record(future.result(), started)
                except Exception as exc:  # noqa: BLE001 -- the pool's own failure is not the candidate's
                    record = not_made(exc, started)
                self._write(request, verdict, record)
        finally:
            with self._lock:
                del self._running[future]
                self._settled.notify_all()

    def _write(self, request: Path, verdict: Verdict, record: tuple[dict, float]) -> None:
        with self._lock:
            write_profile(request, verdict, record, self.log)
            self.done.append(request_name(request))

    def cancel(self) -> None:
        """Cancel the profiles not started yet (an interrupted runner)."""
        with self._lock:
            futures = list(self._running)
        for future in futures:
            future.cancel()

    def finish(self) -> list[str]:
        """Wait for the profiles started (those not begun when the budget runs out are cancelled; one
        running is bounded by its own timeout); the names profiled, in completion order."""
        with self._lock:
            futures = list(self._running)
        wait(futures, timeout=max(0.0, self.left()))
        for future in futures:
            future.cancel()  # only those not started yet
        with self._lock:  # not `wait()` alone: it returns before a finished future's callback has written its record
            self._settled.wait_for(lambda: all(f.cancelled() for f in self._running))
        return list(self.done)


def profile_pass(folders: list[Path], pool, base: JudgeConfig | None, budget_s: float, log=None) -> list[str]:
    """Profile what asked for it (see the module docstring); returns the names profiled."""
    queues = [candidates(Path(f)) for f in folders]
    ordered = [item for row in zip_longest(*queues) for item in row if item is not None]
    start, done = time.monotonic(), []
    for index, (request, verdict) in enumerate(ordered):
        left = budget_s - (time.monotonic() - start)
        if left < MIN_SECONDS:
            if log:
                log(f"profile budget spent ({max(budget_s, 0.0):.0f} s were left for this pass): "
                    f"{len(ordered) - index} passing candidates not profiled")
            break
        write_profile(request, verdict, _profile_one(request, pool, base, left, verdict.kernels), log)
        done.append(request_name(request))
    return done
