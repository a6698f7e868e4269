"""Pool scheduling (worker runs replaced by a recorder: the real runs are in test_verdicts.py)."""
from __future__ import annotations

import threading
import time

import pytest

from kernelwright.judge import JudgeConfig
from kernelwright.judge.api import SourceText
from kernelwright.judge.pool import JudgeJob, JudgePool, as_job, precompile_env
from kernelwright.judge.verdict import Verdict

CUDA_SOURCE = SourceText("from torch.utils.cpp_extension import load_inline\nclass ModelNew: pass", "cuda_cand")
TRITON_SOURCE = SourceText("import triton\nclass ModelNew: pass", "triton_cand")


class RecordingPool(JudgePool):
    """Records (phase, candidate, env) instead of starting workers; evaluations of odd jobs are slow."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls, self.lock = [], threading.Lock()

    def _run(self, job, config, env, phase):
        with self.lock:
            self.calls.append((phase, job.candidate.name, dict(env)))
        if phase == "evaluate" and job.name.endswith("slow"):
            time.sleep(0.3)
        return Verdict(problem="p", candidate=job.candidate.name, status="pass")


def test_as_job_accepts_pairs_triples_and_jobs():
    config = JudgeConfig(trials=2)
    assert as_job(("p.py", "c.py")).config is None
    assert as_job(("p.py", "c.py", config)).config is config
    job = JudgeJob("p.py", "c.py")
    assert as_job(job) is job
    with pytest.raises(TypeError):
        as_job("p.py")


def test_judge_many_keeps_input_order_while_iter_judge_yields_completion_order():
    jobs = [JudgeJob("p", SourceText("x", f"c{i}"), name="slow" if i == 0 else "fast") for i in range(3)]
    pool = RecordingPool(JudgeConfig(), gpus=[], cpu_workers=2)
    assert [v.candidate for v in pool.judge_many(jobs)] == ["c0", "c1", "c2"]
    order = [index for index, _ in RecordingPool(JudgeConfig(), gpus=[], cpu_workers=2).iter_judge(jobs)]
    assert sorted(order) == [0, 1, 2] and order[-1] == 0  # the slow one finishes last


def test_cuda_candidates_are_precompiled_with_cuda_hidden_then_evaluated_per_gpu():
    config = JudgeConfig(cuda_arch_list="9.0")
    pool = RecordingPool(config, gpus=[0, 1], compile_workers=4)
    pool.judge_many([("p", CUDA_SOURCE), ("p", TRITON_SOURCE)])
    compiles = [c for c in pool.calls if c[0] == "compile"]
    assert [c[1] for c in compiles] == ["cuda_cand"]  # Triton compiles at launch: nothing to precompile
    assert compiles[0][2]["CUDA_VISIBLE_DEVICES"] == "" and compiles[0][2]["TORCH_CUDA_ARCH_LIST"] == "9.0"
    first_eval = next(i for i, c in enumerate(pool.calls) if c[0] == "evaluate" and c[1] == "cuda_cand")
    assert pool.calls.index(compiles[0]) < first_eval
    for phase, _, env in pool.calls:
        if phase == "evaluate":
            assert env["CUDA_VISIBLE_DEVICES"] in ("0", "1") and env["TORCH_CUDA_ARCH_LIST"] == "9.0"


def test_no_precompile_without_gpus_and_cpu_lanes_hide_nothing():
    pool = RecordingPool(JudgeConfig(cuda_arch_list="9.0"), gpus=[], cpu_workers=3)
    pool.judge_many([("p", CUDA_SOURCE)])
    assert [c[0] for c in pool.calls] == ["evaluate"]
    assert len(pool._lane_envs()) == 3


def test_precompile_env_hides_cuda_and_names_the_arch():
    env = precompile_env(JudgeConfig(cache_dir="/tmp/kw-cache"), "8.0;9.0")
    assert env["CUDA_VISIBLE_DEVICES"] == "" and env["TORCH_CUDA_ARCH_LIST"] == "8.0;9.0"


def test_empty_job_list():
    assert JudgePool(gpus=[]).judge_many([]) == []
