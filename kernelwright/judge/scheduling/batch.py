"""Batch folders: judge requests written as files, verdicts written back beside them.

This is how a search running elsewhere (a laptop without a GPU) hands candidates to a GPU machine
that holds nothing but torch, triton and numpy: copy the folder over, run

    python -m kernelwright.judge.scheduling.batch DIR

and copy it back. Every `NAME.request.json` without a `NAME.verdict.json` is judged; each verdict
is written atomically (temporary file, then rename) as soon as it is ready, so an interrupted run
loses nothing and a rerun judges only what is left. One runner per folder at a time. Several
folders may be given; their requests are judged together.

On first contact the runner records its device in DIR/device.json (judge/target.py: the GPU's
facts and its measured copy/matmul peaks, measured once per device and cached): a search elsewhere
reads it to tell its agents where their code runs. It also times each reference a search asked for
(`NAME.reference.json` -> `NAME.reference_timing.json`: eager and torch.compile times, the eager
reference's kernels by share; judge/scheduling/reference_timing.py), so round 1's prompts have them. Requests that ask for a profile
(`"profile": true`) are profiled as their verdicts come in, in the same pool, within
--profile-budget; what is left after the last verdict, best first (judge/scheduling/batch_profile.py).

While the requests are judged, a baseline lane (judge/scheduling/baseline_lane.py, --baseline-lanes N, default
2, 0: off) measures the eager and torch.compile baselines of their problems ahead, first-judged
first, into the cache the candidates' judges read: a problem's first candidate no longer waits for
them while it holds its place on the GPU.

The request format: judge/scheduling/batch_folder.py.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ...files import atomic_write
from ..config import JudgeConfig
from ..outcome import outcome
from ..target import DEVICE_FILE
from ..verdict import ERROR, INFO, PEAK_KEY, Flag, Verdict
from . import baseline_lane
from .admission import names_oom
from .batch_folder import REQUEST_SUFFIX, BatchError, request_name, verdict_path, request_priority, read_request
from .batch_profile import ProfileFeed, profile_pass
from .pool import JudgePool, job_memory_key
from .reference_timing import measure_folders

DEFAULT_PROFILE_BUDGET_S = 300.0
REJUDGED = "rejudged_after_system_error"  # flag of a verdict judged again (--retry-errors)
DEFAULT_BASELINE_LANES = baseline_lane.DEFAULT_LANES
DEVICE_TIMEOUT_S = 900.0  # recording the device measures its peaks once (about a minute on an H100)


def pending(folder: str | Path, retry_errors: bool = False) -> list[Path]:
    """Request files that have no verdict yet, by name; with `retry_errors`, also those whose
    verdict is a system error (judge/outcome.py: not judged), to be judged again."""
    waiting = [p for p in Path(folder).glob(f"*{REQUEST_SUFFIX}") if not verdict_path(p).exists()]
    return sorted(waiting + (list(system_errors(folder)) if retry_errors else []))


def system_errors(folder: str | Path) -> dict[Path, str]:
    """Request files whose verdict is a system error, each with why (`system_error`)."""
    found = {}
    for request in Path(folder).glob(f"*{REQUEST_SUFFIX}"):
        why = system_error(verdict_path(request)) if verdict_path(request).exists() else None
        if why is not None:
            found[request] = why
    return found


def system_error(path: Path) -> str | None:
    """Why the verdict file at `path` is a system error (its outcome is "not judged", or it passed
    but a baseline ran out of GPU memory, so it has no speedup against it), else None (the
    candidate's own verdict, or a file that cannot be read: left as it is)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return verdict_system_error(data)


def verdict_system_error(data: dict[str, Any]) -> str | None:
    """The rule of `system_error` for a verdict's JSON dict (a verdict file, or a run's stored
    verdict: search/drivers/rejudged.py applies the same rule when it imports a re-judged one)."""
    try:
        found = outcome(data)
    except (AttributeError, TypeError, ValueError):
        return None
    if found.system_error:
        return found.text()
    return _baseline_oom(data) if found.kind == "correct" else None


def _baseline_oom(data: dict[str, Any]) -> str | None:
    """Which baselines of a verdict ran out of GPU memory (a shared GPU's fault, not the candidate's)."""
    errors = (data.get("baselines") or {}).get("errors") or {}
    kinds = sorted(k for k, text in errors.items() if names_oom(str(text)))
    return f"correct, but its {', '.join(kinds)} baseline(s) ran out of GPU memory: untimed against them" if kinds else None


def run_batch(folder: str | Path | list, pool: JudgePool | None = None, base: JudgeConfig | None = None,
              log=None, retry_errors: bool = False, baseline_lanes: int = 0, on_verdict=None) -> list[str]:
    """Judge every pending request in `folder` (or in each of a list of folders, together);
    returns the names judged (in completion order). `retry_errors`: requests whose verdict is a
    system error are judged again (the new verdict replaces it and says so); every other verdict
    is kept as it is. `baseline_lanes`: problems whose baselines are measured ahead at once
    (judge/scheduling/baseline_lane.py; 0: none, each problem's first candidate measures them).
    `on_verdict(request, verdict)` is called after each verdict is written (the profile feed)."""

    folders = [Path(f) for f in folder] if isinstance(folder, (list, tuple)) else [Path(folder)]
    jobs, paths, judged = [], [], []
    earlier = {p: why for f in folders for p, why in system_errors(f).items()} if retry_errors else {}
    waiting = [p for f in folders for p in pending(f)] + list(earlier)
    for path in sorted(waiting, key=lambda p: (request_priority(p), p.name)):  # the pool starts them in order
        try:
            jobs.append(read_request(path, base))
            paths.append(path)
        except BatchError as exc:
            atomic_write(verdict_path(path), _bad_request(path, str(exc)).to_json())
            judged.append(request_name(path))
    pool = pool or JudgePool(base)
    for key, peak in measured_peaks(folders, base).items():
        pool.admission.record(key, peak)
    lane = baseline_lane.start(jobs, pool, baseline_lanes, log)
    try:
        for index, verdict in pool.iter_judge(jobs):
            if earlier.get(paths[index]):
                verdict.flags.append(Flag(REJUDGED, INFO, f"judged again after a system error: {earlier[paths[index]]}"))
            atomic_write(verdict_path(paths[index]), verdict.to_json())
            judged.append(request_name(paths[index]))
            if log:
                log(f"{request_name(paths[index])}: {verdict.status} ({verdict.stage})")
            if on_verdict is not None:
                on_verdict(paths[index], verdict)
    finally:
        if lane is not None:
            lane.stop()
    return judged


def measured_peaks(folders: list[Path], base: JudgeConfig | None = None) -> dict[str, int]:
    """Memory key -> the largest GPU peak that the verdicts already in `folders` measured for it
    (admission.memory_key of their requests): a runner started again on a folder admits its
    problems by what they used, not as unknown problems one share of the GPU at a time."""
    peaks: dict[str, int] = {}
    for folder in folders:
        for request in Path(folder).glob(f"*{REQUEST_SUFFIX}"):
            try:
                peak = json.loads(verdict_path(request).read_text()).get("environment", {}).get(PEAK_KEY)
                if not isinstance(peak, int) or peak <= 0:
                    continue
                job = read_request(request, base)
                key = job_memory_key(job, job.config or JudgeConfig())
            except (OSError, ValueError, AttributeError, BatchError):
                continue  # no verdict yet, or a file that cannot be read: nothing known
            peaks[key] = max(peak, peaks.get(key, 0))
    return peaks


def record_device(folder: Path, log=None) -> None:
    """Write DIR/device.json on first contact, in a child process (measuring the peaks holds a CUDA
    context this runner does not need); a failure is logged, the batch goes on."""
    if (folder / DEVICE_FILE).is_file():
        return
    try:
        done = subprocess.run([sys.executable, "-m", "kernelwright.judge.target", str(folder)], capture_output=True,
                              text=True, timeout=DEVICE_TIMEOUT_S)
        message = (done.stdout or done.stderr).strip().splitlines()[-1:] if done.returncode else []
    except (OSError, subprocess.SubprocessError) as exc:
        message = [f"{type(exc).__name__}: {exc}"]
    if message and log:
        log(f"{folder}: the device could not be recorded: {message[0]}")


def _bad_request(path: Path, message: str) -> Verdict:
    return Verdict(problem="?", candidate=request_name(path), status=ERROR, stage="load",
                   error=f"bad judge request: {message}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernelwright.judge.scheduling.batch",
                                     description="Judge every NAME.request.json in DIR that has no NAME.verdict.json.")
    parser.add_argument("folders", type=Path, nargs="+", metavar="DIR")
    parser.add_argument("--compile-workers", type=int, default=None, help="parallel precompile processes")
    parser.add_argument("--cpu-workers", type=int, default=None, help="parallel evaluations without a GPU")
    parser.add_argument("--per-gpu", type=int, default=None,
                        help="evaluations at once on one GPU (default 4; memory admission still applies)")
    parser.add_argument("--gpus", default=None, help="comma-separated GPU indices (default: all visible)")
    parser.add_argument("--watch", type=float, default=0.0, metavar="SECONDS",
                        help="keep polling for new requests every SECONDS (stop with Ctrl-C)")
    parser.add_argument("--profile-budget", type=float, default=DEFAULT_PROFILE_BUDGET_S, metavar="SECONDS",
                        help="seconds for profiling passing candidates whose requests ask for it (0: none)")
    parser.add_argument("--baseline-lanes", type=int, default=DEFAULT_BASELINE_LANES, metavar="N",
                        help="problems whose eager and torch.compile baselines are measured ahead at once, in the "
                             f"order their requests are judged (default {DEFAULT_BASELINE_LANES}; 0: off)")
    parser.add_argument("--retry-errors", action="store_true",
                        help="judge again the requests whose verdict is a system error (an internal judge error, "
                             "out of GPU memory on a shared GPU, ...); every other verdict is kept")
    args = parser.parse_args(argv)
    for folder in args.folders:
        if not folder.is_dir():
            parser.error(f"{folder} is not a folder")
    gpus = [int(g) for g in args.gpus.split(",") if g.strip()] if args.gpus else None
    started = time.monotonic()
    log = lambda line: print(f"[{time.monotonic() - started:6.1f} s] {line}", flush=True)  # noqa: E731
    pool = JudgePool(JudgeConfig(), compile_workers=args.compile_workers, gpus=gpus, cpu_workers=args.cpu_workers,
                     per_gpu=args.per_gpu, log=log)  # every visible GPU unless --gpus; a failed GPU is logged
    retry = args.retry_errors  # once: a verdict that is a system error again waits for the next call
    try:
        while True:
            judged = judge_folders(args.folders, pool, None, args.profile_budget, log, retry, args.baseline_lanes)
            retry = False
            if not args.watch:
                print(f"{len(judged)} verdicts written to {', '.join(map(str, args.folders))}")
                return 0
            time.sleep(args.watch)
    except KeyboardInterrupt:
        return 130


def judge_folders(folders: list[Path], pool: JudgePool, base: JudgeConfig | None, profile_budget_s: float,
                  log=None, retry_errors: bool = False, baseline_lanes: int = DEFAULT_BASELINE_LANES) -> list[str]:
    """What the runner does: record the device, time the references the searches asked for before
    their first prompt (judge/scheduling/reference_timing.py), judge every pending request (with
    `retry_errors`, also those whose verdict is a system error) while `baseline_lanes` measure their
    problems' baselines ahead and the passing candidates that asked are profiled as their verdicts
    come in (`ProfileFeed`), then the profile pass over what is left, within what the budget left."""

    for folder in folders:
        record_device(Path(folder), log)
    measure_folders([Path(f) for f in folders], pool, log)  # round 1 of the searches waits for these
    feed = ProfileFeed(pool, base, profile_budget_s, log) if profile_budget_s > 0 else None
    try:
        judged = run_batch(list(folders), pool, base, log=log, retry_errors=retry_errors,
                           baseline_lanes=baseline_lanes, on_verdict=feed.offer if feed else None)
    except BaseException:
        if feed is not None:
            feed.cancel()  # an interrupted runner starts no more profiles
        raise
    if feed is not None:
        feed.finish()
        profile_pass([Path(f) for f in folders], pool, base, feed.left(), log)
    return judged


if __name__ == "__main__":
    sys.exit(main())
