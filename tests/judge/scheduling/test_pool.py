"""Pool scheduling (worker runs replaced by a recorder), and one real two-phase build: a C++
extension precompiled in one process, then found in the build cache by the evaluating worker."""
from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

from kernelwright.judge import JudgeConfig
from kernelwright.judge.request import SourceText
from kernelwright.judge.scheduling.pool import JudgeJob, JudgePool, as_job, precompile_env
from kernelwright.judge.verdict import Verdict


@pytest.fixture(autouse=True)
def _own_ledgers(tmp_path, monkeypatch):
    """The pools' GPU admission ledgers (judge/scheduling/ledger.py) in this test's own folder, not the
    machine's: other test runs on this machine must not count as judges sharing the fake GPU."""
    monkeypatch.setenv("KW_LOCK_DIR", str(tmp_path / "locks"))


CUDA_SOURCE = SourceText("from torch.utils.cpp_extension import load_inline\nclass ModelNew: pass", "cuda_cand")
TRITON_SOURCE = SourceText("import triton\nclass ModelNew: pass", "triton_cand")


class RecordingPool(JudgePool):
    """Records (phase, candidate, env) instead of starting workers; evaluations of jobs named
    "...slow" take longer, those named "gate" wait for `gate`."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls, self.lock = [], threading.Lock()
        self.gate = threading.Event()

    def _run(self, job, config, env, phase):
        with self.lock:
            self.calls.append((phase, job.candidate.name, dict(env)))
        if phase == "evaluate" and job.name.endswith("slow"):
            time.sleep(0.3)
        if phase == "evaluate" and job.name == "gate":
            self.gate.wait(10)
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


def test_an_arch_list_from_the_environment_reaches_both_phases(monkeypatch):
    """The H100 run's miss: TORCH_CUDA_ARCH_LIST=9.0a in the environment, no arch in the config.
    Precompile and evaluation must both build (and hash) for the same list."""
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0a")
    pool = RecordingPool(JudgeConfig(), gpus=[0], compile_workers=2)
    pool.judge_many([("p", CUDA_SOURCE)])
    archs = {phase: env.get("TORCH_CUDA_ARCH_LIST") for phase, _, env in pool.calls}
    assert archs == {"compile": "9.0a", "evaluate": "9.0a"}


def test_several_evaluations_share_a_gpu_and_torch_threads_are_shared_out(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    envs = JudgePool(JudgeConfig(), gpus=[0, 1], per_gpu=3)._lane_envs()
    assert [e["CUDA_VISIBLE_DEVICES"] for e in envs] == ["0"] * 3 + ["1"] * 3
    assert len({e["OMP_NUM_THREADS"] for e in envs}) == 1


def test_submit_streams_one_candidate_at_a_time_and_ajudge_awaits_it():
    with RecordingPool(JudgeConfig(), gpus=[], cpu_workers=2) as pool:
        future = pool.submit("p", SourceText("x", "first"))
        assert future.result(timeout=10).candidate == "first"

        async def ask_two():
            return await asyncio.gather(pool.ajudge("p", SourceText("x", "a")),
                                        pool.ajudge("p", SourceText("x", "b")))

        assert [v.candidate for v in asyncio.run(ask_two())] == ["a", "b"]


def test_a_job_not_yet_started_can_be_cancelled():
    pool = RecordingPool(JudgeConfig(), gpus=[], cpu_workers=1)
    busy = pool.submit_job(JudgeJob("p", SourceText("x", "busy"), name="gate"))
    waiting = pool.submit("p", SourceText("x", "waiting"))
    assert waiting.cancel()  # the only lane is busy: this one has not started
    pool.gate.set()
    assert busy.result(timeout=10).candidate == "busy"
    pool.close()
    assert [c[1] for c in pool.calls] == ["busy"]


def test_precompile_env_hides_cuda_and_names_the_arch():
    env = precompile_env(JudgeConfig(cache_dir="/tmp/kw-cache"), "8.0;9.0")
    assert env["CUDA_VISIBLE_DEVICES"] == "" and env["TORCH_CUDA_ARCH_LIST"] == "8.0;9.0"


def test_empty_job_list():
    assert JudgePool(gpus=[]).judge_many([]) == []


# ---------------------------------------------------------------- a real two-phase build (g++)

CPP_RELU = r"""
at::Tensor relu(at::Tensor x) {
    auto xc = x.contiguous();
    auto y = at::empty_like(xc);
    const float* a = xc.data_ptr<float>();
    float* b = y.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) b[i] = (a[i] < 0.f) ? 0.f : a[i];
    return y;
}
"""
EXTENSION_CANDIDATE = f'''
# hand-written test candidate: ReLU as a C++ extension (cpp_sources only, no CUDA)
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

ext = load_inline("kw_two_phase_relu", cpp_sources={CPP_RELU!r}, functions=["relu"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu(x)
'''


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_precompiled_extension_is_a_cache_hit_in_the_evaluating_worker(kernelbench, tmp_path, monkeypatch):
    """Phase A: `worker --phase compile` with CUDA hidden and an explicit arch list builds the
    extension; phase B, another process, must find it (same hash: same sources, flags, arch)."""
    monkeypatch.setenv("MAX_JOBS", "1")
    cache = tmp_path / "cache"
    config = JudgeConfig(device="cpu", cuda_arch_list="9.0", time=False, trials=2, cache_dir=str(cache),
                         overrides={"batch_size": 4, "dim": 64})
    pool = JudgePool(config, gpus=[], cpu_workers=1, compile_workers=2, precompile=True)
    (verdict,) = pool.judge_many([(kernelbench / "level1/19_ReLU.py", SourceText(EXTENSION_CANDIDATE, "ext_relu"))])
    assert verdict.status == "pass", verdict.error
    assert verdict.compile.backend == "cpp" and verdict.compile.arch == "9.0"
    assert verdict.compile.cached, verdict.compile.log  # built by the precompile process, loaded here
    builds = [d for d in (cache / "torch_extensions").iterdir() if d.name.startswith("kw_two_phase_relu_")]
    assert len(builds) == 1  # one hash for both phases
    marker = json.loads((builds[0] / "kw_build.json").read_text())
    assert marker["arch"] == "9.0"
    assert verdict.compile.seconds < marker["seconds"] / 5  # loading, not building
