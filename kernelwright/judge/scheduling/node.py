"""Judge on a node of a cluster: what a remote executor (a Ray actor or task) calls there.

A cluster driver sends a `NodeJob` (the problem's and the candidate's texts, the judge settings as a
dict: nothing that names a file of the driver's machine) to a process on some node. There:

- `NodeJudge(per_gpu=...)` owns a local `JudgePool` over the GPUs this process may use (a Ray actor
  that asked for one GPU sees that GPU in CUDA_VISIBLE_DEVICES). Each candidate runs in its own
  sandboxed worker process exactly as in a local run: correctness work of several candidates
  overlaps, timing holds the device lock exclusively (`gpulock`).
- `precompile(job, arch)` is the pool's compile phase on its own (a C++/CUDA extension built with
  CUDA hidden, into the node's build cache), for an executor that holds CPUs only.
- `describe()` says where this is: host name, process, GPUs (index, UUID, name), the CUDA arch list
  builds are made for. Verdicts judged here carry it as `verdict.environment["judged_on"]`.

Caches (`JudgeConfig.cache_dir`, default `~/.cache/kernelwright`) are resolved here, on the node:
per node by default, shared when the settings name a folder on shared storage.

Imports only the judge (no cluster library): the same code runs under any executor.
"""
from __future__ import annotations

import os
import shutil
import socket
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .. import api
from ..config import JudgeConfig
from ..request import SourceText, make_request
from ..verdict import Verdict
from .pool import JudgeJob, JudgePool, nvidia_smi, precompile_env, visible_gpus


@dataclass
class NodeJob:
    """One evaluation as it travels to a node: texts and settings only."""

    problem_source: str
    problem_name: str
    candidate_source: str
    candidate_name: str
    config: dict[str, Any]
    sweep: list[dict[str, Any]] | None = None  # a sweep's instances (pool.JudgeJob.sweep), else None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "NodeJob":
        return cls(**data)

    def judge_config(self) -> JudgeConfig:
        return JudgeConfig.from_dict(self.config)

    def judge_job(self) -> JudgeJob:
        return JudgeJob(SourceText(self.problem_source, self.problem_name),
                        SourceText(self.candidate_source, self.candidate_name), self.judge_config(),
                        self.candidate_name, sweep=self.sweep)


def gpu_inventory(indices: tuple[int, ...] | list[int]) -> list[dict[str, Any]]:
    """Index, UUID and name of the given GPUs, asked of nvidia-smi (no CUDA context here)."""
    listed = nvidia_smi("--query-gpu=index,uuid,name", "--format=csv,noheader")
    found = []
    for line in listed.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3 and parts[0].isdigit() and int(parts[0]) in indices:
            found.append({"index": int(parts[0]), "uuid": parts[1], "name": ", ".join(parts[2:])})
    return found


class NodeJudge:
    """A local judge pool for one executor process on a node; see the module docstring."""

    def __init__(self, per_gpu: int | None = None, cpu_workers: int = 1, use_gpus: bool = True):
        gpus = visible_gpus() if use_gpus else ()
        # precompile is the driver's to schedule (on CPU resources); evaluations still build what
        # they do not find in the cache, exactly as after a failed precompile in a local pool
        self.pool = JudgePool(JudgeConfig(), compile_workers=1, gpus=gpus, cpu_workers=cpu_workers,
                              per_gpu=per_gpu, precompile=False)
        self.where = describe(gpus)

    def judge(self, job: NodeJob, precompile_s: float | None = None) -> Verdict:
        """Judge one candidate in a sandboxed worker (never raises for a bad candidate)."""
        verdict = self.pool.submit_job(job.judge_job()).result()
        if precompile_s is not None:
            verdict.stage_seconds["precompile"] = round(precompile_s, 3)
        verdict.environment["judged_on"] = dict(self.where)
        return verdict

    def close(self) -> None:
        self.pool.close()


def describe(gpus: tuple[int, ...] | list[int] = ()) -> dict[str, Any]:
    """Where judging happens: host, process, the GPUs it may use, the arch list builds are made for."""
    where: dict[str, Any] = {"hostname": socket.gethostname(), "pid": os.getpid(), "gpus": gpu_inventory(gpus)}
    where["cuda_arch_list"] = api.run_arch_list(JudgeConfig(), "cuda") if gpus else ""
    return where


def precompile(job: NodeJob, arch: str) -> float | None:
    """Build a C++/CUDA candidate's extension into this node's build cache with CUDA hidden, for
    `arch` (the arch list of the node that evaluates it). Returns the build process's seconds, or
    None when it could not run: that is no verdict, the evaluation builds again and reports."""
    config = job.judge_config()
    scratch = Path(tempfile.mkdtemp(prefix="kw-judge-"))
    try:
        jj = job.judge_job()
        request = make_request(jj.problem, jj.candidate, config, scratch, phase="compile")
        built = api.run_request(request, config, scratch, precompile_env(config, arch))
        return built.process.wall_s if built.process else None
    except Exception:  # noqa: BLE001 - the compile phase is only a head start
        return None
    finally:
        if not os.environ.get("KW_KEEP_SCRATCH"):
            shutil.rmtree(scratch, ignore_errors=True)
