"""Judge many candidates: compile in parallel, measure one at a time per GPU.

Phase A builds the C++/CUDA extensions of candidates in parallel processes with CUDA hidden (the
arch comes from `TORCH_CUDA_ARCH_LIST`), filling the shared build cache. A failure there is not a
verdict: phase B simply builds again and reports. Phase B evaluates each candidate in its own
sandboxed worker, one at a time on each GPU (timings must not share a device), or up to
`cpu_workers` at once without a GPU. Verdicts are handed out as they complete, so a caller can
persist each before the next arrives.
"""
from __future__ import annotations

import asyncio
import functools
import os
import queue
import shutil
import subprocess
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import AsyncIterator, Iterable, Iterator

from . import api
from .api import SourceText
from .candidate_kinds import backend_of
from .config import JudgeConfig
from .verdict import ERROR, Verdict


@dataclass
class JudgeJob:
    """One candidate to judge; `config` overrides the pool's."""

    problem: str | Path | SourceText
    candidate: str | Path | SourceText
    config: JudgeConfig | None = None
    name: str = ""


def as_job(item) -> JudgeJob:
    if isinstance(item, JudgeJob):
        return item
    if isinstance(item, (tuple, list)) and len(item) in (2, 3):
        return JudgeJob(*item)
    raise TypeError(f"expected JudgeJob or (problem, candidate[, config]); got {item!r}")


@functools.lru_cache(maxsize=None)
def visible_gpus() -> tuple[int, ...]:
    """GPU indices, asked of nvidia-smi so the parent never creates a CUDA context."""
    listed = _nvidia_smi("--query-gpu=index", "--format=csv,noheader")
    indices = tuple(int(line) for line in listed.split() if line.strip().isdigit())
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        wanted = [v for v in visible.split(",") if v.strip().isdigit()]
        return tuple(int(v) for v in wanted if int(v) in indices) if indices else ()
    return indices


@functools.lru_cache(maxsize=None)
def detected_arch_list() -> str:
    """Compute capabilities of the visible GPUs ("9.0"), for builds made with CUDA hidden."""
    caps = sorted({line.strip() for line in _nvidia_smi("--query-gpu=compute_cap", "--format=csv,noheader").splitlines()
                   if line.strip()})
    return ";".join(caps)


def _nvidia_smi(*args: str) -> str:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return ""
    try:
        return subprocess.run([exe, *args], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


class JudgePool:
    def __init__(self, config: JudgeConfig | None = None, compile_workers: int | None = None,
                 gpus: Iterable[int] | None = None, cpu_workers: int | None = None,
                 scratch_root: str | Path | None = None):
        self.config = config or JudgeConfig()
        self.compile_workers = max(1, compile_workers or os.cpu_count() or 1)
        self.gpus = list(visible_gpus() if gpus is None else gpus)
        self.cpu_workers = max(1, cpu_workers or (os.cpu_count() or 2) // 2)
        self.scratch_root = scratch_root

    # ------------------------------------------------------------------ public forms

    def judge_many(self, items: Iterable) -> list[Verdict]:
        """Verdicts in the order of `items` (pairs, triples with a config, or JudgeJobs)."""
        jobs = [as_job(item) for item in items]
        verdicts: list[Verdict | None] = [None] * len(jobs)
        for index, verdict in self.iter_judge(jobs):
            verdicts[index] = verdict
        return verdicts  # type: ignore[return-value]

    def iter_judge(self, items: Iterable) -> Iterator[tuple[int, Verdict]]:
        """(index, verdict) pairs in completion order."""
        jobs = [as_job(item) for item in items]
        if not jobs:
            return
        ready: queue.Queue = queue.Queue()
        done: queue.Queue = queue.Queue()
        lanes = [threading.Thread(target=self._lane, args=(env, jobs, ready, done), daemon=True)
                 for env in self._lane_envs()]
        for lane in lanes:
            lane.start()
        with ThreadPoolExecutor(self.compile_workers) as compilers:
            try:
                self._schedule(jobs, ready, compilers)
                for _ in jobs:
                    yield done.get()
            finally:
                for _ in lanes:
                    ready.put(None)

    async def aiter_judge(self, items: Iterable) -> AsyncIterator[tuple[int, Verdict]]:
        """The async form of `iter_judge`: the blocking waits run in a thread."""
        iterator = self.iter_judge(list(items))
        finished = object()
        while True:
            item = await asyncio.to_thread(next, iterator, finished)
            if item is finished:
                return
            yield item

    # ------------------------------------------------------------------ scheduling

    def _lane_envs(self) -> list[dict[str, str]]:
        if self.gpus and self.config.device != "cpu":
            return [{"CUDA_VISIBLE_DEVICES": str(gpu)} for gpu in self.gpus]
        return [{"CUDA_VISIBLE_DEVICES": ""} if self.gpus else {} for _ in range(self.cpu_workers)]

    def _schedule(self, jobs: list[JudgeJob], ready: queue.Queue, compilers: ThreadPoolExecutor) -> None:
        for index, job in enumerate(jobs):
            if self._wants_precompile(job):
                future = compilers.submit(self._precompile, job)
                future.add_done_callback(lambda _f, i=index: ready.put(i))
            else:
                ready.put(index)

    def _wants_precompile(self, job: JudgeJob) -> bool:
        config = job.config or self.config
        if not self.gpus or config.device == "cpu" or self.compile_workers < 2:
            return False
        return backend_of(_source_of(job.candidate)) == "cuda" and bool(self._arch(config))

    def _arch(self, config: JudgeConfig) -> str:
        return config.cuda_arch_list or os.environ.get("TORCH_CUDA_ARCH_LIST", "") or detected_arch_list()

    def _precompile(self, job: JudgeJob) -> Verdict | None:
        config = job.config or self.config
        env = precompile_env(config, self._arch(config))
        try:
            return self._run(job, config, env, phase="compile")
        except Exception:  # noqa: BLE001 - phase A is only a head start
            return None

    def _lane(self, env: dict[str, str], jobs: list[JudgeJob], ready: queue.Queue, done: queue.Queue) -> None:
        while True:
            index = ready.get()
            if index is None:
                return
            job = jobs[index]
            config = job.config or self.config
            job_env = dict(env)
            if config.cuda_arch_list:  # the same arch as phase A built for, or the build hash differs
                job_env["TORCH_CUDA_ARCH_LIST"] = config.cuda_arch_list
            try:
                verdict = self._run(job, config, job_env, phase="evaluate")
            except Exception as exc:  # noqa: BLE001 - a judge bug must not stall the caller
                verdict = _internal_error(job, exc)
            done.put((index, verdict))

    def _run(self, job: JudgeJob, config: JudgeConfig, env: dict[str, str], phase: str) -> Verdict:
        scratch = Path(tempfile.mkdtemp(prefix="kw-judge-", dir=self.scratch_root))
        try:
            request = api.make_request(job.problem, job.candidate, config, scratch, phase=phase)
            return api.run_request(request, config, scratch, env)
        finally:
            if not os.environ.get("KW_KEEP_SCRATCH"):
                shutil.rmtree(scratch, ignore_errors=True)


def precompile_env(config: JudgeConfig, arch: str) -> dict[str, str]:
    """CUDA hidden, the arch given; the compile module's layout of the cache when it is present."""
    cache = api.default_cache_dir(config)
    try:
        from . import compile as kwcompile

        return dict(kwcompile.precompile_env(cache, arch))
    except (ImportError, AttributeError):
        return {"CUDA_VISIBLE_DEVICES": "", "TORCH_CUDA_ARCH_LIST": arch}


def _source_of(candidate) -> str:
    if isinstance(candidate, SourceText):
        return candidate.text
    try:
        return Path(candidate).read_text()
    except (OSError, UnicodeDecodeError):
        return ""


def _internal_error(job: JudgeJob, exc: Exception) -> Verdict:
    label = lambda x: x.name if isinstance(x, SourceText) else str(x)  # noqa: E731
    config = job.config.to_dict() if job.config else {}
    return Verdict(problem=label(job.problem), candidate=label(job.candidate), status=ERROR,
                   error=f"internal judge error: {type(exc).__name__}: {exc}", config=config)

