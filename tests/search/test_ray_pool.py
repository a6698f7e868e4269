"""Judging on Ray (kernelwright.search.drivers.ray_pool, ray_eval) against a real local Ray instance
with two CPU workers (the session's `ray_cluster`): the shipped examples, shrunk, as CPU candidates;
judge actors killed mid-evaluation; no part of Ray mocked. The first test pays for Ray's start."""
from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from proc_tree import alive, judge_workers

from kernelwright.judge.confine import landlock_abi
from kernelwright.judge.config import JudgeConfig
from kernelwright.judge.scheduling.node import NodeJob
from kernelwright.judge.scheduling.pool import JudgePool
from kernelwright.judge.request import SourceText

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
FAST = dict(device="cpu", trials=2, baselines=(), warmup_ms=1, rep_ms=5, min_reps=3, max_reps=10)

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]


def example_job(name: str, candidate: str | None = None, **config) -> NodeJob:
    code = candidate if candidate is not None else (EXAMPLES / "candidates" / f"{name}.py").read_text()
    return NodeJob((EXAMPLES / "problems" / f"{name}.py").read_text(), f"{name}.py", code, f"{name}_candidate",
                   JudgeConfig(**{**FAST, **config}).to_dict())


@pytest.fixture
def make_pool(ray_cluster):
    from kernelwright.search.drivers.ray_pool import RayJudgePool, RayOptions

    pools = []

    def make(**options):
        pool = RayJudgePool(RayOptions(**options))
        pools.append(pool)
        return pool

    yield make
    for pool in pools:
        pool.close()


def test_examples_are_judged_on_ray_actors_as_in_the_local_pool(make_pool, ray_cluster, tmp_path):
    import ray

    jobs = [example_job(name) for name in ("row_softmax", "linear_relu", "scale_bias_gelu")]
    pool = make_pool(actors=2)
    verdicts = pool.judge_many(jobs)
    assert [v.status for v in verdicts] == ["pass"] * 3, [v.error for v in verdicts]
    actor_pids = {a["pid"] for a in pool.actors()}
    assert len(actor_pids) == 2 and os.getpid() not in actor_pids
    for verdict in verdicts:
        where = verdict.environment["judged_on"]
        assert where["ray_node_id"] == ray.get_runtime_context().get_node_id()
        assert where["pid"] in actor_pids and where["hostname"] and where["gpus"] == []
        assert where["attempt"] == 1 and where["lost"] == []
        assert verdict.process.exit_code == 0 and verdict.process.isolation  # its own sandboxed worker
    # the same judge code: a local pool reaches the same verdict on the same texts
    local = JudgePool(JudgeConfig(**FAST), gpus=[], cpu_workers=1).judge_many(
        [(SourceText(j.problem_source, j.problem_name), SourceText(j.candidate_source, j.candidate_name),
          dataclasses.replace(j.judge_config(), cache_dir=str(tmp_path))) for j in jobs[:1]])
    assert [(t.seed, t.variant, t.ok) for t in local[0].trials] == \
        [(t.seed, t.variant, t.ok) for t in verdicts[0].trials]
    assert local[0].ops == verdicts[0].ops and local[0].overrides == verdicts[0].overrides


CRASHES = """
# hand-written test candidate: its process exits in the middle of the forward pass
import os
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        os._exit(7)
"""


def test_a_candidate_that_ends_its_own_process_gets_a_verdict_not_a_retry(make_pool):
    """The sandboxed worker dying is the candidate's doing (a verdict); only the actor's death is a loss."""
    pool = make_pool(actors=1)
    (verdict,) = pool.judge_many([example_job("row_softmax", CRASHES)])
    assert verdict.status == "fail" and "exited with code 7" in verdict.error, verdict.error
    assert verdict.environment["judged_on"]["attempt"] == 1


def test_a_ray_worker_killed_mid_evaluation_is_judged_again_elsewhere(make_pool):
    pool = make_pool(actors=2)
    pool.start()
    job = example_job("row_softmax")

    async def kill_one_then_wait():
        task = asyncio.ensure_future(pool.ajudge(job))
        victim, deadline = None, time.monotonic() + 120
        while victim is None and time.monotonic() < deadline and not task.done():
            victim = next((a["pid"] for a in pool.actors() if judge_workers(a["pid"])), None)
            await asyncio.sleep(0.05)
        assert victim is not None, "no judge worker ever started"
        worker = judge_workers(victim)[0]
        os.kill(victim, signal.SIGKILL)  # the Ray worker process that holds the judge actor
        return victim, worker, await task

    victim, worker, verdict = asyncio.run(kill_one_then_wait())
    assert verdict.status == "pass", verdict.error
    where = verdict.environment["judged_on"]
    assert where["attempt"] == 2 and where["pid"] != victim
    assert [x["pid"] for x in where["lost"]] == [victim] and "ActorDiedError" in where["lost"][0]["error"]
    assert not alive(worker)  # the killed actor's judge worker died with it
    assert len(pool.actors()) == 2 and victim not in {a["pid"] for a in pool.actors()}  # replaced


KILLS_ITS_JUDGE = '''
# hand-written test candidate: kills the process that judges it (its parent), every time
import os, signal
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        os.kill(os.getppid(), signal.SIGKILL)
        return x
'''


def test_evaluations_lost_every_time_end_as_a_judge_failure_after_a_bound(make_pool):
    """Every attempt's actor dies while it judges (a loss outside the candidate): after the bound
    the evaluation ends as JudgeLost, never as the candidate's verdict, and the pool still judges."""
    from kernelwright.search.drivers.ray_pool import JudgeLost

    pool = make_pool(actors=1, max_attempts=2)
    pool.start()

    async def kill_every_attempt():
        task, killed = asyncio.ensure_future(pool.ajudge(example_job("row_softmax"))), set()
        deadline = time.monotonic() + 240
        while not task.done() and time.monotonic() < deadline:
            for pid in [a.get("pid") for a in pool.actors()]:
                if pid and pid not in killed and judge_workers(pid):
                    killed.add(pid)
                    os.kill(pid, signal.SIGKILL)
            await asyncio.sleep(0.05)
        try:
            return await task
        except JudgeLost as lost:  # ajudge raises what judge_many returns
            return lost

    result = asyncio.run(kill_every_attempt())
    assert isinstance(result, JudgeLost) and len(result.lost) == 2
    assert "not the candidate's verdict" in str(result)
    (verdict,) = pool.judge_many([example_job("row_softmax")])  # the pool still judges
    assert verdict.status == "pass"


@pytest.mark.skipif(landlock_abi()[0] < 6, reason="signal scoping needs Landlock ABI 6")
def test_a_candidate_cannot_kill_the_process_that_judges_it(make_pool):
    """Confined, its signal to the supervisor is refused: it gets its own verdict on the first attempt."""
    pool = make_pool(actors=1, max_attempts=2)
    (verdict,) = pool.judge_many([example_job("row_softmax", KILLS_ITS_JUDGE)])
    assert verdict.status in ("fail", "error") and verdict.environment["judged_on"]["attempt"] == 1


def test_the_ray_evaluator_answers_asks_with_verdicts_that_say_where(tmp_path, ray_cluster):
    from kernelwright.search.asks import EvaluationAsk
    from kernelwright.search.drivers.ray_eval import RayEvaluator

    source = (EXAMPLES / "problems" / "row_softmax.py").read_text()
    evaluator = RayEvaluator.from_mode("ray", source, "row_softmax", JudgeConfig(**FAST), tmp_path, workers=1)
    code = (EXAMPLES / "candidates" / "row_softmax.py").read_text()
    try:
        answer = asyncio.run(evaluator.answer(EvaluationAsk(id="a3", candidate_id="c1", code=code)))
    finally:
        evaluator.pool.close()
    assert answer.result.status == "pass" and (tmp_path / "candidates" / "c1.py").read_text() == code
    assert '"judged_on"' in answer.verdict_json and '"ray_node_id"' in answer.verdict_json


def test_the_ray_evaluator_answers_a_sweep_in_one_evaluation_on_a_node(tmp_path, ray_cluster):
    """A tuning step's sweep (NodeJob.sweep): the example candidate as it is and a wrong copy of it."""
    from kernelwright.search.asks import SweepAsk, SweepItem
    from kernelwright.search.drivers.ray_eval import RayEvaluator

    source = (EXAMPLES / "problems" / "row_softmax.py").read_text()
    code = (EXAMPLES / "candidates" / "row_softmax.py").read_text()
    wrong = code + "\n_forward = ModelNew.forward\nModelNew.forward = lambda self, *a: _forward(self, *a) * 2\n"
    evaluator = RayEvaluator.from_mode("ray", source, "row_softmax", JudgeConfig(**FAST), tmp_path, workers=1)
    ask = SweepAsk("a5", "c1", [SweepItem({"V": 1}, code), SweepItem({"V": 2}, wrong)], "tune1")
    try:
        answer = asyncio.run(evaluator.answer(ask))
    finally:
        evaluator.pool.close()
    configs = answer.result.record.configs
    assert [c.status for c in configs] == ["ok", "failed"], [(c.status, c.reason) for c in configs]
    assert configs[0].time_ms > 0 and answer.verdict_json is None


def test_a_cluster_without_room_for_the_judge_actors_stops_the_run(tmp_path, ray_cluster):
    """Three one-CPU actors cannot start on two CPUs: the run stops (resumable) instead of failing
    every candidate."""
    from kernelwright.search.asks import EvaluationAsk
    from kernelwright.search.drivers.loop import Fatal
    from kernelwright.search.drivers.ray_eval import RayEvaluator
    from kernelwright.search.drivers.ray_pool import RayOptions

    source = (EXAMPLES / "problems" / "row_softmax.py").read_text()
    evaluator = RayEvaluator(source, "row_softmax", JudgeConfig(**FAST), tmp_path,
                             RayOptions(actors=3, start_timeout_s=3))
    ask = EvaluationAsk(id="a3", candidate_id="c1", code=(EXAMPLES / "candidates" / "row_softmax.py").read_text())
    with pytest.raises(Fatal, match=r"3 judge actor\(s\), each asking for one CPU, did not start within 3 s"):
        asyncio.run(evaluator.answer(ask))


@pytest.mark.slow
def test_extensions_are_built_in_a_cpu_task_then_found_by_the_actor(make_pool, kernelbench, tmp_path):
    """The compile phase runs as its own Ray task (one CPU, no GPU), on the actor's node."""
    sys.path.insert(0, str(REPO / "tests" / "judge" / "scheduling"))
    from test_pool import EXTENSION_CANDIDATE

    cache = tmp_path / "cache"
    job = NodeJob((kernelbench / "level1" / "19_ReLU.py").read_text(), "19_ReLU.py", EXTENSION_CANDIDATE, "ext",
                  JudgeConfig(**{**FAST, "cuda_arch_list": "9.0", "cache_dir": str(cache), "time": False,
                                 "overrides": {"batch_size": 4, "dim": 64}}).to_dict())
    pool = make_pool(actors=1, precompile=True)
    (verdict,) = pool.judge_many([job])
    assert verdict.status == "pass", verdict.error
    assert verdict.compile.cached and verdict.stage_seconds["precompile"] > 0, verdict.compile.log
