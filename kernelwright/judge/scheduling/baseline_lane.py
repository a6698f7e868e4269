"""The batch runner's baselines-ahead lane: every problem's eager and torch.compile baselines
measured in the background while candidates are judged, so a candidate's worker finds them cached
instead of waiting for them while it holds its place on the GPU.

When `judge --batch` starts it knows every pending request's problem, sizes and judge settings.
The lane takes the distinct problems in the order their requests will be judged (priority, then
name) and measures their baselines, `lanes` problems at a time, each through
`baseline.get_baselines` in a child process (`python -m kernelwright.judge.scheduling.baseline_lane`), with
exactly the parameters a candidate's supervisor will ask with:

- the problem file by content and name (a problem given as text is copied under the name the
  supervisor gives its trusted copy, `request.source_filename`), the sizes the worker seals (the
  request's overrides: the lane skips a problem whose sizes are shrunk, known only once loaded),
  the request's settings with the cache folder resolved as `request.make_request` does;
- the device as the worker resolves it, named by `supervisor.device_label` in the child, whose
  environment is an evaluation's on that device (`JudgePool.device_envs`: the same
  CUDA_VISIBLE_DEVICES, thread count and caches (`supervisor.trusted_cache_env`)).

So the records it writes are the ones the supervisor reads (tests/judge/test_baseline_lane.py
fails when the keys diverge). A candidate that asks while the lane measures its problem waits on
the record's lock and reads the lane's measurement. A problem already cached costs a look at the
cache and nothing else. A failure in the lane writes no record: the supervisor measures again, as
without the lane.

GPU memory: the lane takes no seat in the pool's memory admission. With a seat each (the unknown
share of free memory for a problem no candidate measured yet) three lanes held most of the GPU and
the candidates ran one at a time (H100, level 1+2 suite, 2026-11-24: 12 verdicts in 524 s, against
19 without the lane). Its processes are visible to admission as used memory when a candidate is
admitted, and a candidate's out-of-memory error while other processes hold memory on its GPU is
judged again alone (`admission`: `gpu_processes`); a lane measurement that runs out of memory
writes no record and the candidate's supervisor measures it again.

Stopping: `stop()` (the batch ended) starts nothing more and kills the measurements in flight (the
child's process group; its baseline processes die with it, `guards.die_with_parent`); if the runner
itself dies (its time limit), the children die with it. The runner never imports torch: only the
children's children do.
"""
from __future__ import annotations

import hashlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..config import JudgeConfig
from ..env import device_name_without_torch
from ..request import SourceText, default_cache_dir, source_filename, text_of
from . import baseline_child

DEFAULT_LANES = 2  # problems measured at once: each runs its kinds at once (2 processes by default)
MEASURED, CACHED, FAILED, STOPPED = "measured", "cached", "failed", "stopped"
MODULE = "kernelwright.judge.scheduling.baseline_lane"  # the child: `python -m MODULE`
LANE_MARGIN_S = 60.0  # beyond the baseline processes' own limits: the child's start and imports


@dataclass
class LaneTask:
    """One problem's baselines, with the parameters its candidates' supervisor will ask with."""

    name: str  # the problem's file name, for the log
    problem: Path  # the file whose content and stem key the cache (a copy for source text)
    overrides: dict[str, Any]
    config: JudgeConfig  # the request's settings, cache folder resolved
    device: str  # as the worker resolves it ("cuda", "cpu", ...)


@dataclass
class LaneResult:
    task: LaneTask
    outcome: str  # MEASURED, CACHED, FAILED or STOPPED
    kinds: list[str] = field(default_factory=list)  # measured now
    errors: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    def line(self) -> str:
        what = {MEASURED: f"measured {', '.join(self.kinds) or '-'}", CACHED: "cached already",
                FAILED: "failed (its candidates' judges measure it)", STOPPED: "stopped"}[self.outcome]
        errors = "; ".join(f"{k}: {v.strip().splitlines()[-1][:160]}" for k, v in self.errors.items() if v.strip())
        return f"baseline lane: {self.task.name}: {what} in {self.seconds:.1f} s" + (f" ({errors})" if errors else "")


def plan(jobs: list, pool, scratch: Path) -> list[LaneTask]:
    """The distinct problems of `jobs` (JudgeJobs in the order they will be judged) whose baselines
    a candidate will ask for, first-judged first; problems given as text are copied into `scratch`."""
    tasks, seen = [], set()
    for job in jobs:
        config = job.config or pool.config
        device = _device(config, bool(getattr(pool, "gpus", None)))
        shrink = config.shrink if config.shrink is not None else not str(device).startswith("cuda")
        if device is None or not config.time or not config.baselines or shrink:
            continue  # no baselines asked, or sizes known only once the problem is loaded
        config = JudgeConfig.from_dict({**config.to_dict(),
                                        "cache_dir": str(default_cache_dir(config).expanduser().resolve())})
        source = text_of(job.problem)
        name = source_filename(job.problem.name) if isinstance(job.problem, SourceText) else Path(job.problem).name
        ident = _identity(source, Path(name).stem, config, device)
        if not source or ident in seen:
            continue
        seen.add(ident)
        if isinstance(job.problem, SourceText):
            path = scratch / "problems" / ident[:16] / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(source)
        else:
            path = Path(job.problem).resolve()
        tasks.append(LaneTask(name=name, problem=path, overrides=dict(config.overrides), config=config,
                              device=device))
    return tasks


def start(jobs: list, pool, lanes: int = DEFAULT_LANES, log=None) -> BaselineLane | None:
    """The lane for `jobs` (in the order they will be judged), started; None when `lanes` is 0 or
    no job's baselines can be measured ahead."""
    if lanes <= 0:
        return None
    scratch = Path(tempfile.mkdtemp(prefix="kw-baseline-lane-"))
    tasks = plan(jobs, pool, scratch)
    if not tasks:
        shutil.rmtree(scratch, ignore_errors=True)
        return None
    if log:
        log(f"baseline lane: {len(tasks)} problem(s), {min(lanes, len(tasks))} at a time")
    return BaselineLane(tasks, pool, scratch, lanes, log).start()


def _device(config: JudgeConfig, gpus: bool) -> str | None:
    """The device the worker will resolve (`stages.load.resolve_device`); None: it will refuse."""
    if gpus and config.device != "cpu":
        return "cuda" if config.device == "auto" else config.device
    return "cpu" if config.device in ("auto", "cpu") else None


def _identity(source: str, stem: str, config: JudgeConfig, device: str) -> str:
    fields = {k: v for k, v in config.to_dict().items()
              if k in ("seed", "allow_tf32", "warmup_ms", "rep_ms", "min_reps", "max_reps", "flush_l2",
                       "cuda_graph", "baselines", "overrides", "cache_dir")}
    text = json.dumps([hashlib.sha256(source.encode()).hexdigest(), stem, fields, device], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


Measure = Callable[[LaneTask, dict[str, str], "BaselineLane"], LaneResult]


class BaselineLane:
    """Measures `tasks` in order, `lanes` at a time, in daemon threads; see the module docstring.
    `measure(task, env, lane)` is the child process (`run_child`); tests pass another."""

    def __init__(self, tasks: list[LaneTask], pool, scratch: Path, lanes: int = DEFAULT_LANES, log=None,
                 measure: Measure | None = None):
        self.log = log
        self.measure = measure or run_child
        self.scratch = scratch
        self.results: list[LaneResult] = []
        self._queue: queue.Queue[LaneTask] = queue.Queue()
        for task in tasks:
            self._queue.put(task)
        self._stop = threading.Event()
        self._children: set[subprocess.Popen] = set()
        self._guard = threading.Lock()
        envs = pool.device_envs() if hasattr(pool, "device_envs") else [{}]
        count = min(max(0, lanes), len(tasks))
        self._threads = [threading.Thread(target=self._work, args=(envs[i % len(envs)],), daemon=True,
                                          name=f"kw-baseline-lane-{i}") for i in range(count)]

    def start(self) -> "BaselineLane":
        for thread in self._threads:
            thread.start()
        return self

    def join(self, timeout_s: float | None = None) -> None:
        """Wait for every task (tests; the batch runner stops the lane instead)."""
        for thread in self._threads:
            thread.join(timeout_s)

    def stop(self, wait_s: float = 10.0) -> None:
        """Start nothing more; kill the measurements in flight; wait for the threads; log a summary."""
        self._stop.set()
        with self._guard:
            children = list(self._children)
        for child in children:
            _kill_group(child)
        for thread in self._threads:
            thread.join(wait_s)
        shutil.rmtree(self.scratch, ignore_errors=True)
        if self.log:
            self.log(f"baseline lane: {self.summary()}")

    def summary(self) -> str:
        with self._guard:
            outcomes = [r.outcome for r in self.results]
        counts = {o: outcomes.count(o) for o in (MEASURED, CACHED, FAILED, STOPPED) if o in outcomes}
        left = self._queue.qsize()
        return ", ".join([f"{n} {o}" for o, n in counts.items()] + ([f"{left} not reached"] if left else [])) or "idle"

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def started(self, child: subprocess.Popen) -> bool:
        """Register a child (killed by `stop`); False when the lane stopped meanwhile."""
        with self._guard:
            self._children.add(child)
            return not self._stop.is_set()

    def ended(self, child: subprocess.Popen) -> None:
        with self._guard:
            self._children.discard(child)

    def _work(self, slot_env: dict[str, str]) -> None:
        while not self._stop.is_set():
            try:
                task = self._queue.get_nowait()
            except queue.Empty:
                return
            started = time.perf_counter()
            if self.log:
                self.log(f"baseline lane: {task.name}: started")
            try:
                result = self._one(task, slot_env)
            except Exception as exc:  # noqa: BLE001 - the lane is a head start; the judges measure anyway
                result = LaneResult(task, FAILED, errors={"lane": f"{type(exc).__name__}: {exc}"})
            result.seconds = time.perf_counter() - started
            with self._guard:
                self.results.append(result)
            if self.log and result.outcome in (MEASURED, FAILED):
                self.log(result.line())

    def _one(self, task: LaneTask, slot_env: dict[str, str]) -> LaneResult:
        from ..baseline import missing_kinds  # noqa: PLC0415 -- cli/app.py imports this module at its start: api.py, the sandbox, the supervisor and baseline.py load when a baseline runs

        env = child_env(task, slot_env, self.scratch)
        label = device_name_without_torch(task.device, env)
        if label and not missing_kinds(task.problem, task.overrides, task.config, task.device, label):
            return LaneResult(task, CACHED)
        if self._stop.is_set():
            return LaneResult(task, STOPPED)
        return self.measure(task, env, self)

def child_env(task: LaneTask, slot_env: dict[str, str], scratch: Path) -> dict[str, str]:
    """An evaluation's environment on the slot's device (`api.worker_env`), with a trusted process's
    caches (`supervisor.trusted_cache_env`): what the supervisor's baseline processes get."""
    from ..api import device_hint, worker_env  # noqa: PLC0415 -- cli/app.py imports this module at its start: api.py, the sandbox, the supervisor and baseline.py load when a baseline runs
    from ..sandbox import scrubbed_environ  # noqa: PLC0415 -- cli/app.py imports this module at its start: api.py, the sandbox, the supervisor and baseline.py load when a baseline runs
    from ..supervisor import trusted_cache_env  # noqa: PLC0415 -- cli/app.py imports this module at its start: api.py, the sandbox, the supervisor and baseline.py load when a baseline runs

    own = scratch / "trusted"
    for folder in (own / "home", own / "tmp"):
        folder.mkdir(parents=True, exist_ok=True)
    env = scrubbed_environ()
    env.update(worker_env(task.config, device_hint(task.config, slot_env), slot_env, workdir=own))
    env.update(trusted_cache_env(Path(task.config.cache_dir or ""), own))
    env["KW_PARENT_PID"] = str(os.getpid())
    return env


def run_child(task: LaneTask, env: dict[str, str], lane: BaselineLane) -> LaneResult:
    """Measure in `python -m kernelwright.judge.scheduling.baseline_lane` (killed by `lane.stop()`)."""
    config = task.config
    limit = config.timeout_s + config.compile_timeout_s + LANE_MARGIN_S
    child = subprocess.Popen(baseline_child.command(MODULE, task), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                             cwd=env.get("HOME"), start_new_session=True)
    if not lane.started(child):
        _kill_group(child)
    try:
        out, err = child.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        _kill_group(child)
        child.communicate()
        return LaneResult(task, FAILED, errors={"lane": f"no result after {limit:.0f} s"})
    finally:
        lane.ended(child)
    try:
        reply = json.loads((out or "").strip().splitlines()[-1])
    except (ValueError, IndexError):  # no reply: killed by `stop`, or it died
        if lane.stopped and child.returncode and child.returncode < 0:
            return LaneResult(task, STOPPED)
        tail = (err or out or "").strip()[-500:]
        return LaneResult(task, FAILED, errors={"lane": f"exit code {child.returncode}: {tail}"})
    errors = {k: v for k, v in (reply.get("errors") or {}).items() if k in reply.get("wanted", [])}
    measured = list(reply.get("measured") or [])
    return LaneResult(task, FAILED if errors else (MEASURED if measured else CACHED), kinds=measured, errors=errors)


def _kill_group(child: subprocess.Popen) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def main(argv: list[str] | None = None) -> int:
    """The child (`baseline_child.main`): prints the kinds measured now, those from the cache, the
    errors and the kinds a candidate's supervisor will want."""
    return baseline_child.main(argv, MODULE, _reply, lambda device: {
        "errors": {"lane": f"cannot name {device!r} without torch"}, "wanted": ["lane"]})


def _reply(done: baseline_child.Measured) -> dict[str, Any]:
    from ...problem.reference import scan_source  # noqa: PLC0415 -- in the child only
    from ..baseline import wanted_kinds  # noqa: PLC0415 -- in the child only (baseline_child.main)

    kind = scan_source(Path(done.problem).read_text(errors="replace")).kind
    wanted, _ = wanted_kinds(done.config, done.device, False, kind)
    measured = done.baselines.measured
    return {"label": done.label, "measured": [k for k, info in measured.items() if not info.get("from_cache")],
            "cached": [k for k, info in measured.items() if info.get("from_cache")], "errors": done.baselines.errors,
            "wanted": wanted}


if __name__ == "__main__":
    sys.exit(main())
