"""The Ray pool (kernelwright.search.drivers.ray_pool) when an actor's GPU fails, with fake actors
(no Ray needed): the actor whose local pool found its GPU broken is retired, not killed (it keeps
the broken GPU reserved), its evaluation goes to another actor and is flagged; with every GPU
failed the evaluation is lost, never blamed on the candidate."""
from __future__ import annotations

import asyncio
import types

import pytest

from kernelwright.judge.scheduling.gpu_health import GPU_FAILED, no_gpu_left_verdict
from kernelwright.judge.scheduling.node import NodeJob
from kernelwright.judge.verdict import PASS, Verdict
from kernelwright.search.drivers import ray_pool
from kernelwright.search.drivers.ray_pool import JudgeLost, RayJudgePool, RayOptions, _Actor


class _Remote:
    def __init__(self, answer):
        self.answer, self.calls = answer, 0

    async def _call(self, job, precompile_s):
        self.calls += 1
        return self.answer(job)

    def remote(self, job, precompile_s):
        return self._call(job, precompile_s)


def _actor(index: int, broken: bool) -> _Actor:
    def answer(job):
        if broken:
            return no_gpu_left_verdict("p", job["candidate_name"], [(str(index), "GPU is lost", "")], {}).to_dict()
        return Verdict(problem="p", candidate=job["candidate_name"], status=PASS, stage="done").to_dict()

    info = {"hostname": "node", "gpus": [{"index": index, "name": "NVIDIA H200"}], "ray_node_id": "n"}
    return _Actor(types.SimpleNamespace(judge=_Remote(answer)), slots=1, info=info)


@pytest.fixture
def fake_ray(monkeypatch):
    killed = []
    errors = types.SimpleNamespace(**{name: type(name, (Exception,), {}) for name in (
        "RayActorError", "WorkerCrashedError", "NodeDiedError", "ObjectLostError", "OutOfMemoryError", "RayError")})
    fake = types.SimpleNamespace(exceptions=errors, kill=lambda handle, **kw: killed.append(handle))
    monkeypatch.setattr(ray_pool, "import_ray", lambda: fake)
    return killed


def _pool(*actors: _Actor) -> RayJudgePool:
    pool = RayJudgePool(RayOptions(max_attempts=3))
    pool.use_gpus, pool._actors = True, list(actors)
    return pool


JOB = NodeJob("class Model: pass", "p.py", "class ModelNew: pass", "c1", {})


def test_an_actor_whose_gpu_failed_is_retired_and_its_job_judged_by_another(fake_ray):
    broken, working = _actor(1, broken=True), _actor(0, broken=False)
    pool = _pool(broken, working)
    # equally busy: the job goes to the first actor, the broken one
    verdict = asyncio.run(pool.ajudge(JOB))
    assert verdict.status == PASS and broken.handle.judge.calls == 1 and working.handle.judge.calls == 1
    flag = next(f for f in verdict.flags if f.code == GPU_FAILED)
    assert flag.severity == "info" and "GPU 1 (NVIDIA H200)" in flag.message
    assert verdict.environment["judged_on"]["attempt"] == 2 and verdict.environment["judged_on"]["lost"][0]["gpu_failed"]
    assert not broken.alive and working.alive and fake_ray == []  # retired, not killed: it keeps the GPU reserved
    asyncio.run(pool.ajudge(JOB))
    assert broken.handle.judge.calls == 1  # no further jobs


def test_every_gpu_failed_the_evaluation_is_lost_not_the_candidates_fault(fake_ray):
    pool = _pool(_actor(0, broken=True), _actor(1, broken=True))
    with pytest.raises(JudgeLost) as lost:
        asyncio.run(pool.ajudge(JOB))
    assert len(lost.value.lost) == 2 and all(x["gpu_failed"] for x in lost.value.lost)
