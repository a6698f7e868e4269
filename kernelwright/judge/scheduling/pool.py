"""Judge many candidates: compile in parallel, check several at once per GPU, time one at a time.

Candidates arrive as a list (`judge_many`, `iter_judge`, `aiter_judge`) or one by one as a search
asks for them (`submit` -> `concurrent.futures.Future`, `await ajudge(...)`). Each goes through:

- **precompile** (C++/CUDA extension candidates, when there are GPUs or `precompile=True`): a
  `worker --phase compile` process builds the extension with CUDA hidden, on `compile_workers`
  CPU processes at once, filling the shared build cache. Both this phase and the evaluation get
  the same `TORCH_CUDA_ARCH_LIST` (`api.run_arch_list`), so the evaluation finds the build. A
  failure here is not a verdict: the evaluation builds again and reports.
- **evaluation**: one sandboxed worker per candidate, up to `per_gpu` at once on each GPU
  (`CUDA_VISIBLE_DEVICES=<index>`), or `cpu_workers` at once without a GPU. Workers on one GPU
  overlap their correctness work (reference, trials, guards) and take turns for timing, energy,
  baselines and profiling: the worker holds the device's lock shared or exclusively
  (`gpulock`), so no timing ever runs beside another process's kernels.

Several GPUs (judge/scheduling/gpu_health.py): each job goes to the GPU with the fewest jobs, is
admitted by that GPU's free memory and ledger, times under that GPU's lock; its verdict names the
GPU (`Verdict.gpu`). Every GPU process gets NVLink multicast switched off. A GPU that fails (a
probe confirms it) is taken out of rotation; the evaluations it had in flight are judged again on
another GPU and flagged `gpu_failed_rejudged`.

Verdicts are handed out as they complete, so a caller can persist each before the next arrives.
"""
from __future__ import annotations

import asyncio
import functools
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, replace
from pathlib import Path
from typing import AsyncIterator, Iterable, Iterator

from .. import api
from ..candidate_kinds import backend_of
from ..config import JudgeConfig
from ..gpulock import lock_folder
from ..request import SourceText, make_request, text_of
from ..sweep import sweep_config
from . import gpu_health
from .admission import MemoryAdmission, memory_key, run_admitted
from .ledger import GpuLedger
from ..verdict import ERROR, Verdict

# evaluations at once on one GPU: enough to hide a worker's start-up, imports and correctness
# work behind another's timing; each holds its trials' reference outputs in GPU memory
DEFAULT_PER_GPU = 4
# threads per lane: the jobs that wait for GPU memory admission (holding no lane) beside those that run
WAITING_PER_LANE = 4
# GPUs one evaluation may see fail before it is given up as not judged (a candidate that really
# brings GPUs down must not take the whole pool with it)
MAX_GPU_FAILURES = 2


class GpuGone(Exception):
    """The job's GPU was taken out of rotation before its evaluation started: assign it again."""


class GpuFailed(Exception):
    """The job's GPU failed under its evaluation (gpu_health): judge it again on another GPU."""

    def __init__(self, gpu: str, why: str, said: str):
        super().__init__(f"GPU {gpu} failed: {why}")
        self.record = (gpu, why, said)  # as gpu_health.rejudged_flag takes it


@dataclass
class JudgeJob:
    """One candidate to judge; `config` overrides the pool's. `sweep`: instances of one template
    (`[{"params": {...}, "source": "..."}]`, judge/sweep.py) benchmarked in this one evaluation
    under `sweep.sweep_config` (the candidate is then the first instance); the verdict carries the
    record (`Verdict.sweep`, read with `sweep.settle`)."""

    problem: str | Path | SourceText
    candidate: str | Path | SourceText
    config: JudgeConfig | None = None
    name: str = ""
    sweep: list[dict] | None = None


def job_memory_key(job: JudgeJob, config: JudgeConfig) -> str:
    """The job's key in the GPU memory admission (admission.memory_key), `config` its settings."""
    return memory_key(text_of(job.problem), config.overrides, config.device)


def as_job(item) -> JudgeJob:
    if isinstance(item, JudgeJob):
        return item
    if isinstance(item, (tuple, list)) and len(item) in (2, 3):
        return JudgeJob(*item)
    raise TypeError(f"expected JudgeJob or (problem, candidate[, config]); got {item!r}")


@functools.lru_cache(maxsize=None)
def visible_gpus() -> tuple[int, ...]:
    """GPU indices, asked of nvidia-smi so the parent never creates a CUDA context."""
    listed = nvidia_smi("--query-gpu=index", "--format=csv,noheader")
    indices = tuple(int(line) for line in listed.split() if line.strip().isdigit())
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        wanted = [v for v in visible.split(",") if v.strip().isdigit()]
        return tuple(int(v) for v in wanted if int(v) in indices) if indices else ()
    return indices


def nvidia_smi(*args: str) -> str:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return ""
    try:
        return subprocess.run([exe, *args], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


class JudgePool:
    """See the module docstring. Reusable; `close()` (or a `with` block) ends its threads."""

    def __init__(self, config: JudgeConfig | None = None, compile_workers: int | None = None,
                 gpus: Iterable[int] | None = None, cpu_workers: int | None = None,
                 scratch_root: str | Path | None = None, per_gpu: int | None = None,
                 precompile: bool | None = None, warm: bool | None = None, free_bytes=None,
                 gpu_processes=None, ledgers=None, gpu_probe=None, log=None):
        self.config = config or JudgeConfig()
        self.compile_workers = max(1, compile_workers or os.cpu_count() or 1)
        self.gpus = list(visible_gpus() if gpus is None else gpus)
        self.cpu_workers = max(1, cpu_workers or (os.cpu_count() or 2) // 2)
        self.per_gpu = max(1, per_gpu or DEFAULT_PER_GPU)
        self.precompile = precompile  # None: C++/CUDA extensions, when there are GPUs
        self.scratch_root = scratch_root
        self._guard = threading.Lock()
        self._compilers: ThreadPoolExecutor | None = None
        self._evaluators: ThreadPoolExecutor | None = None
        self._slots: dict[str, queue.Queue] = {}  # device ("" without a GPU) -> its free lanes' environments
        self._assigned: dict[str, int] = {}  # device -> jobs given to it and not finished (running or waiting)
        # warm starts: evaluations forked from a server that imported torch once (None: unless
        # $KW_JUDGE_WARM=0); the launcher is made with the executors
        self.warm = warm
        self._launcher = None
        # GPU memory admission (judge/scheduling/admission.py); free_bytes(gpu) -> bytes free now (tests pass a fake);
        # ledgers(gpu): the GPU's ledger of every judge process's jobs on this machine (None: this pool's only)
        self.admission = MemoryAdmission(free_bytes=free_bytes or gpu_free_bytes,
                                         gpu_processes=gpu_processes or gpu_process_count,
                                         ledgers=ledgers or machine_ledger)
        # a GPU that fails: gpu_probe(gpu) -> "" (healthy) or why not (tests pass a fake); the GPUs
        # taken out of rotation and why; log(line) says so (default: stderr)
        self.gpu_probe = gpu_probe or gpu_health.probe_gpu
        self.failed_gpus: dict[str, str] = {}
        self._probing = threading.Lock()
        self.log = log or _log_stderr

    # ------------------------------------------------------------------ streaming

    def submit(self, problem, candidate, config: JudgeConfig | None = None, name: str = "") -> Future:
        """Start judging one candidate; the Future's result is its Verdict (it never raises one).
        `future.cancel()` works until its evaluation has started."""
        return self.submit_job(JudgeJob(problem, candidate, config, name))

    def submit_job(self, job: JudgeJob) -> Future:
        future: Future = Future()
        compilers, evaluators = self._executors()
        if self._wants_precompile(job):
            def precompile_then_evaluate():
                built = None if future.cancelled() else self._precompile(job)
                seconds = built.process.wall_s if built is not None and built.process else None
                evaluators.submit(self._evaluate, job, future, seconds)

            compilers.submit(precompile_then_evaluate)
        else:
            evaluators.submit(self._evaluate, job, future)
        return future

    async def ajudge(self, problem, candidate, config: JudgeConfig | None = None, name: str = "") -> Verdict:
        """`submit`, awaited: for callers (the search driver) that receive candidates one at a time."""
        return await asyncio.wrap_future(self.submit(problem, candidate, config, name))

    # ------------------------------------------------------------------ batches

    def judge_many(self, items: Iterable) -> list[Verdict]:
        """Verdicts in the order of `items` (pairs, triples with a config, or JudgeJobs)."""
        jobs = [as_job(item) for item in items]
        verdicts: list[Verdict | None] = [None] * len(jobs)
        for index, verdict in self.iter_judge(jobs):
            verdicts[index] = verdict
        return verdicts  # type: ignore[return-value]

    def iter_judge(self, items: Iterable) -> Iterator[tuple[int, Verdict]]:
        """(index, verdict) pairs in completion order; jobs not yet started are cancelled when the
        caller stops iterating early."""
        futures = {self.submit_job(as_job(item)): index for index, item in enumerate(items)}
        try:
            for future in as_completed(futures):
                yield futures[future], future.result()
        finally:
            for future in futures:
                future.cancel()

    async def aiter_judge(self, items: Iterable) -> AsyncIterator[tuple[int, Verdict]]:
        """The async form of `iter_judge`: the blocking waits run in a thread."""
        iterator = self.iter_judge(list(items))
        finished = object()
        while True:
            item = await asyncio.to_thread(next, iterator, finished)
            if item is finished:
                return
            yield item

    def close(self, wait: bool = True) -> None:
        with self._guard:
            executors, self._compilers, self._evaluators = (self._compilers, self._evaluators), None, None
            launcher, self._launcher = self._launcher, None
        for executor in executors:
            if executor is not None:
                executor.shutdown(wait=wait, cancel_futures=not wait)
        if launcher is not None:
            launcher.close()

    def __enter__(self) -> "JudgePool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ scheduling

    def _executors(self) -> tuple[ThreadPoolExecutor, ThreadPoolExecutor]:
        with self._guard:
            if self._evaluators is None:
                envs = self._lane_envs()
                self._slots, self._assigned = {}, {}
                for env in envs:
                    device = env.get("CUDA_VISIBLE_DEVICES", "")
                    self._slots.setdefault(device, queue.Queue()).put(env)
                    self._assigned.setdefault(device, 0)
                # a job waits for memory admission without a lane, so there are more threads than
                # lanes: the jobs behind it that fit take the free lanes meanwhile
                threads = len(envs) * (WAITING_PER_LANE if "" not in self._slots else 1)
                self._evaluators = ThreadPoolExecutor(threads, thread_name_prefix="kw-judge-lane")
                self._compilers = ThreadPoolExecutor(self.compile_workers, thread_name_prefix="kw-judge-compile")
            return self._compilers, self._evaluators

    def _lane_envs(self) -> list[dict[str, str]]:
        """One environment per evaluation slot: `per_gpu` per GPU, or `cpu_workers` CPU slots.
        Torch's CPU threads are shared out among the slots (unless OMP_NUM_THREADS is set)."""
        if self.gpus and self.config.device != "cpu":
            envs = [gpu_health.multicast_off({"CUDA_VISIBLE_DEVICES": str(gpu)})
                    for gpu in self.gpus for _ in range(self.per_gpu)]
        else:
            envs = [{"CUDA_VISIBLE_DEVICES": ""} if self.gpus else {} for _ in range(self.cpu_workers)]
        if "OMP_NUM_THREADS" not in os.environ and len(envs) > 1:
            threads = str(max(1, (os.cpu_count() or 1) // len(envs)))
            envs = [{**env, "OMP_NUM_THREADS": threads} for env in envs]
        return envs

    def device_envs(self) -> list[dict[str, str]]:
        """The environment an evaluation runs with on each device of this pool (one per GPU, or
        one for the CPU): what the batch runner's baseline lane measures with (judge/scheduling/baseline_lane.py)."""
        unique: list[dict[str, str]] = []
        for env in self._lane_envs():
            if env not in unique:
                unique.append(env)
        return unique

    def _device_hint(self, config: JudgeConfig) -> str:
        return "cuda" if self.gpus and config.device != "cpu" else "cpu"

    def _wants_precompile(self, job: JudgeJob) -> bool:
        config = job.config or self.config
        wanted = self.precompile if self.precompile is not None else bool(self.gpus) and config.device != "cpu"
        if not wanted or self.compile_workers < 2:
            return False
        return backend_of(text_of(job.candidate)) == "cuda" and bool(self._arch(config))

    def _arch(self, config: JudgeConfig) -> str:
        return api.run_arch_list(config, self._device_hint(config))

    def _precompile(self, job: JudgeJob) -> Verdict | None:
        config = job.config or self.config
        env = precompile_env(config, self._arch(config))
        try:
            return self._run(job, config, env, phase="compile")
        except Exception:  # noqa: BLE001 - phase A is only a head start
            return None

    def _evaluate(self, job: JudgeJob, future: Future, precompile_s: float | None = None) -> None:
        """Evaluate on the least busy device, once admitted there, on one of its lanes; on another
        GPU when that one fails (see gpu_health). The precompile's process time joins the verdict's
        stage times."""
        if future.cancelled():
            return
        config = job.config or self.config
        if job.sweep:
            config = sweep_config(config)
        failed: list[tuple[str, str, str]] = []  # (GPU, why it failed, what the run there said)
        while True:
            device = self._assign() if len(failed) < MAX_GPU_FAILURES else None
            if device is None:
                verdict = gpu_health.no_gpu_left_verdict(_label(job.problem), _label(job.candidate), failed,
                                                         config.to_dict())
                if not future.running() and not future.set_running_or_notify_cancel():
                    return
                break
            try:
                verdict = self._admitted_run(job, config, device, future)
            except GpuGone:
                continue  # its GPU failed before it started: to another, nothing lost
            except GpuFailed as gone:
                failed.append(gone.record)  # its GPU failed under it: again on another, flagged
                continue
            except Exception as exc:  # noqa: BLE001 - a judge bug must not stall the caller
                verdict = _internal_error(job, exc)
                if not future.running() and not future.set_running_or_notify_cancel():
                    verdict = None  # cancelled meanwhile: no one waits for it
            finally:
                with self._guard:
                    self._assigned[device] -= 1
            if verdict is None:  # cancelled before it reached a lane
                return
            break
        if failed and not gpu_health.no_gpu_left(verdict):
            verdict.flags.append(gpu_health.rejudged_flag(failed, str((verdict.gpu or {}).get("index", ""))))
        if precompile_s is not None:
            verdict.stage_seconds["precompile"] = round(precompile_s, 3)
        future.set_result(verdict)

    def _assign(self) -> str | None:
        """The device with the fewest jobs given to it (running or waiting for room), of those not
        taken out of rotation; None when every GPU failed."""
        with self._guard:
            working = [d for d in self._assigned if d not in self.failed_gpus]
            if not working:
                return None
            device = min(working, key=lambda d: (self._assigned[d], d))
            self._assigned[device] += 1
            return device

    def _gpu_failure(self, gpu: str, verdict: Verdict) -> str:
        """Why `verdict` is GPU `gpu`'s failure, not the candidate's ("": it is not): the GPU was
        taken out of rotation while it ran, or the verdict is suspect and the GPU fails its probe
        (which then takes it out). A pass stands: it was measured in full."""
        if not gpu or verdict.passed:
            return ""
        suspect = self.failed_gpus.get(gpu) or gpu_health.suspect(verdict)
        if not suspect:
            return ""
        with self._probing:  # one probe at a time: the GPU's other in-flight verdicts find it decided
            if gpu in self.failed_gpus:
                return self.failed_gpus[gpu]
            probe = self.gpu_probe(gpu)
            if not probe:
                return ""
            why = f"{probe} (after: {suspect})"
            with self._guard:
                self.failed_gpus[gpu] = why
                left = [d for d in self._assigned if d not in self.failed_gpus]
            self.log(f"judge pool: {gpu_health.describe(gpu)} taken out of rotation for the rest of this run: {why}; "
                     f"{len(left)} GPU(s) left{' (' + ', '.join(left) + ')' if left else ''}")
            return why

    def _on_lane(self, job: JudgeJob, config: JudgeConfig, device: str, future: Future) -> Verdict | None:
        """Run the evaluation on a free lane of `device` (waiting for one); None when `future` was
        cancelled before: an evaluation starts, and can no longer be cancelled, on its lane."""
        slots = self._slots[device]
        env = slots.get()
        try:
            if device in self.failed_gpus:
                raise GpuGone(device)
            if not future.running() and not future.set_running_or_notify_cancel():
                return None
            job_env = dict(env)
            arch = self._arch(config)
            if arch:  # the arch phase A built for, or the build hash differs
                job_env["TORCH_CUDA_ARCH_LIST"] = arch
            verdict = self._run(job, config, job_env, phase="evaluate")
            if device:  # the GPU it ran on, as this trusted process knows it
                verdict.gpu = dict(gpu_health.gpu_identity(device))
            why = self._gpu_failure(device, verdict)  # decided holding the lane: nothing new starts there meanwhile
            if why:
                said = (verdict.error or "").strip().splitlines()[0][:300] if (verdict.error or "").strip() else ""
                raise GpuFailed(device, why, said)
            return verdict
        finally:
            slots.put(env)

    def _warm_launcher(self):
        """The pool's fork server, started with its first evaluation (None: warm starts are off)."""
        with self._guard:
            if self._launcher is None and self.warm is not False and self._evaluators is not None:
                self._launcher = api.warm_launcher(self.config, force=self.warm is True)
            return self._launcher

    def _admitted_run(self, job: JudgeJob, config: JudgeConfig, gpu: str, future: Future) -> Verdict | None:
        """Evaluate; on a GPU only once the job's memory fits (see judge/scheduling/admission.py), waiting
        for that without holding a lane (None: cancelled meanwhile)."""
        run = lambda: self._on_lane(job, config, gpu, future)  # noqa: E731
        if not gpu:
            return run()
        key = job_memory_key(job, config)
        on_host = None
        if config.reference_device_share > 0:  # an OOM beside the judge's own copies: again without them
            lean = replace(config, reference_device_share=0.0)
            on_host = lambda: self._on_lane(job, lean, gpu, future)  # noqa: E731
        return run_admitted(self.admission, gpu, key, run, on_host)

    def _run(self, job: JudgeJob, config: JudgeConfig, env: dict[str, str], phase: str) -> Verdict:
        scratch = Path(tempfile.mkdtemp(prefix="kw-judge-", dir=self.scratch_root))
        try:
            request = make_request(job.problem, job.candidate, config, scratch, phase=phase)
            if job.sweep and phase == "evaluate":
                request.sweep = [dict(item) for item in job.sweep]
            launcher = self._warm_launcher() if config.no_network == self.config.no_network else None
            return api.run_request(request, config, scratch, env, launcher=launcher)
        finally:
            if not os.environ.get("KW_KEEP_SCRATCH"):
                shutil.rmtree(scratch, ignore_errors=True)


def judge_one(problem, candidate, config: JudgeConfig) -> Verdict:
    """One candidate, as `kernelwright judge PROBLEM CANDIDATE` judges it: on a GPU through the same
    memory admission as every pool (the GPU's ledger of every judge process's jobs), so beside batch
    runners it waits for room rather than running out of memory, and an OOM that sharing caused is
    judged again alone; started cold and not precompiled (one candidate has nothing to overlap).
    Without a GPU: `api.judge`."""
    gpus = list(visible_gpus()) if config.device != "cpu" else []
    if not gpus:
        return api.judge(problem, candidate, config)
    with JudgePool(config, gpus=gpus[:1], per_gpu=1, precompile=False, warm=False) as pool:
        return pool.judge_many([(problem, candidate)])[0]


def gpu_free_bytes(gpu: str) -> int | None:
    """Free memory of GPU `gpu` now (nvidia-smi, MiB), None when it cannot be read."""
    text = nvidia_smi("--query-gpu=memory.free", "--format=csv,noheader,nounits", "-i", gpu)
    try:
        return int(float(text.strip().splitlines()[0])) << 20
    except (ValueError, IndexError):
        return None


def machine_ledger(gpu: str) -> GpuLedger | None:
    """The machine-wide admission ledger of GPU `gpu` (judge/scheduling/ledger.py), in the GPU lock folder;
    None where that folder cannot be made (admission then counts this pool's jobs only)."""
    folder = lock_folder("cuda")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return GpuLedger(folder, gpu_ledger_key(gpu))


@functools.lru_cache(maxsize=None)
def gpu_ledger_key(gpu: str) -> str:
    """A file name for the physical GPU: its UUID (nvidia-smi), so processes that number GPUs
    differently share one ledger; its index where the UUID cannot be read."""
    listed = nvidia_smi("--query-gpu=uuid", "--format=csv,noheader", "-i", str(gpu)).strip().splitlines()
    uuid = "".join(c for c in (listed[0] if listed else "") if c.isalnum() or c == "-")
    return f"admit-{uuid or 'gpu-' + str(gpu)}"


def gpu_process_count(gpu: str) -> int | None:
    """Processes holding memory on GPU `gpu` now (nvidia-smi), None when it cannot be read."""
    if not shutil.which("nvidia-smi"):
        return None
    text = nvidia_smi("--query-compute-apps=pid", "--format=csv,noheader", "-i", gpu)
    return len([line for line in text.splitlines() if line.strip()])


def precompile_env(config: JudgeConfig, arch: str) -> dict[str, str]:
    """CUDA hidden, the arch given. No cache path: the compile worker runs candidate code too, so
    its builds reach the shared cache only through its supervisor's trusted builder."""
    return {"CUDA_VISIBLE_DEVICES": "", "TORCH_CUDA_ARCH_LIST": arch}


def _internal_error(job: JudgeJob, exc: Exception) -> Verdict:
    config = job.config.to_dict() if job.config else {}
    return Verdict(problem=_label(job.problem), candidate=_label(job.candidate), status=ERROR,
                   error=f"internal judge error: {type(exc).__name__}: {exc}", config=config)


def _label(x) -> str:
    return x.name if isinstance(x, SourceText) else str(x)


def _log_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
