"""The tuning step's sweep and seeds asks answered by the drivers (search/drivers/tune_asks.py, issue 33):
real judge runs on the CPU (Triton in the interpreter) of a hand-written ReLU template, through the
local evaluator's judge pool and through a batch folder; the seed cache in a temporary folder.
"""
from __future__ import annotations

import asyncio
import json

import pytest

from kernelwright.judge.config import JudgeConfig
from kernelwright.judge.request import SourceText
from kernelwright.judge.scheduling import batch, batch_folder
from kernelwright.judge.scheduling.node import NodeJob
from kernelwright.search.asks import EvaluationAsk, SeedRecord, SeedsAsk, SweepAsk, SweepItem
from kernelwright.search.drivers.evaluators import BatchEvaluator, LocalEvaluator
from kernelwright.search.drivers.loop import Pending
from kernelwright.search.results import SeedsResult, SweepOutcome
from kernelwright.tune.evaluate import SWEPT, Measurement
from kernelwright.tune.seeds import SeedCache
from kernelwright.tune.template import parse_template

# hand-written test problem in KernelBench format: tiny, so the Triton interpreter is quick
PROBLEM = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(8, 256)]

def get_init_inputs():
    return []
'''

# a hand-written template: the ReLU with its block size as the parameter
TEMPLATE = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl

KW_TUNE = {"params": {"BLOCK": [64, 128, 256, 512]}, "defaults": {"BLOCK": 256}}
KW_PARAMS = dict(KW_TUNE["defaults"])


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        block = KW_PARAMS["BLOCK"]
        relu_kernel[(triton.cdiv(x.numel(), block),)](x, y, x.numel(), BLOCK=block)
        return y
'''

FAST = JudgeConfig(device="cpu", warmup_ms=1.0, rep_ms=5.0, min_reps=3, max_reps=20, timeout_s=120,
                   baselines=("eager",), trials=2)


@pytest.fixture
def seed_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("KW_TUNE_CACHE", str(tmp_path / "tune-cache"))
    return tmp_path / "tune-cache" / "seeds"


def sweep_ask(ask_id: str = "a9") -> SweepAsk:
    """Three instances: BLOCK 128, a wrong one (BLOCK 256, halved output), BLOCK 512."""
    template = parse_template(TEMPLATE)
    wrong = template.instantiate({"BLOCK": 256}).replace("        return y\n", "        return y * 0.5\n")
    instances = [SweepItem({"BLOCK": 128}, template.instantiate({"BLOCK": 128})),
                 SweepItem({"BLOCK": 256}, wrong),
                 SweepItem({"BLOCK": 512}, template.instantiate({"BLOCK": 512}))]
    return SweepAsk(ask_id, "c1", instances, "tune1", template=TEMPLATE, device="cpu")


def check_outcome(outcome: SweepOutcome) -> None:
    configs = outcome.record.configs
    assert [c.status for c in configs] == ["ok", "failed", "ok"], [(c.status, c.reason) for c in configs]
    assert [c.params for c in configs] == [{"BLOCK": 128}, {"BLOCK": 256}, {"BLOCK": 512}]
    assert configs[0].time_ms > 0 and configs[2].time_ms > 0 and "trial 0" in configs[1].reason
    assert outcome.device == "cpu" and outcome.judge_s > 0 and not outcome.error


def test_the_local_evaluator_sweeps_in_one_evaluation_and_records_seeds(tmp_path, seed_folder):
    evaluator = LocalEvaluator(PROBLEM, "relu_small", FAST, tmp_path / "run")
    try:
        answer = asyncio.run(evaluator.answer(sweep_ask()))
    finally:
        evaluator.pool().close()
    assert answer.verdict_json is None  # a sweep judges no candidate: no verdict row
    check_outcome(answer.result)
    # the timed configurations are the seed cache's now, fastest first; the wrong one is not
    seeds = asyncio.run(evaluator.answer(SeedsAsk("a10", TEMPLATE, "cpu", limit=4))).result
    assert isinstance(seeds, SeedsResult) and len(list(seed_folder.glob("*.json"))) == 1
    ranked = sorted(answer.result.record.ranked, key=lambda c: c.time_ms)
    assert seeds.configs == [c.params for c in ranked]
    other = asyncio.run(evaluator.answer(SeedsAsk("a11", TEMPLATE, "NVIDIA H100 80GB HBM3"))).result
    assert other.configs == []  # another device's times say nothing here


def test_a_tuning_instances_full_verdict_outranks_sweep_times_in_the_seed_cache(tmp_path, seed_folder):
    template = parse_template(TEMPLATE)
    evaluator = LocalEvaluator(PROBLEM, "relu_small", FAST, tmp_path / "run")
    slowest = max(sweep_of_times(), key=lambda c: c["time_ms"])  # made-up sweep times, written below
    SeedCache().record(template, "cpu", [Measurement(c["params"], SWEPT, time_ms=c["time_ms"]) for c in sweep_of_times()])
    ask = EvaluationAsk("a12", "c5", template.instantiate(slowest["params"]), "tune1",
                        seed=SeedRecord(TEMPLATE, "cpu", slowest["params"]))
    try:
        answer = asyncio.run(evaluator.answer(ask))
    finally:
        evaluator.pool().close()
    assert answer.result.passed
    seeds = asyncio.run(evaluator.answer(SeedsAsk("a13", TEMPLATE, "cpu", limit=4))).result
    assert seeds.configs[0] == slowest["params"]  # judged in full: first, whatever the sweep times said


def sweep_of_times() -> list[dict]:
    """Hand-written sweep times (not measured): BLOCK 64 the slowest."""
    return [{"params": {"BLOCK": 64}, "time_ms": 9.0}, {"params": {"BLOCK": 128}, "time_ms": 0.1},
            {"params": {"BLOCK": 256}, "time_ms": 0.2}]


def test_the_batch_evaluator_writes_a_sweep_request_that_the_batch_runner_judges(tmp_path, seed_folder):
    run_dir = tmp_path / "run"
    evaluator = BatchEvaluator(PROBLEM, "relu_small", FAST, run_dir)
    ask = sweep_ask("a7")
    with pytest.raises(Pending) as pending:
        asyncio.run(evaluator.answer(ask))
    [request] = pending.value.paths
    assert request.name == "c1_sweep_a7.request.json"
    data = json.loads(request.read_text())
    assert [i["params"] for i in data["sweep"]] == [{"BLOCK": 128}, {"BLOCK": 256}, {"BLOCK": 512}]
    assert "profile" not in data and data["priority"] == 1
    assert batch.run_batch(run_dir / "evals") == ["c1_sweep_a7"]
    check_outcome(asyncio.run(evaluator.answer(ask)).result)
    assert list(seed_folder.glob("*.json"))  # recorded when the verdict was imported


def test_a_batch_request_with_a_malformed_sweep_is_refused_clearly(tmp_path):
    path = batch_folder.write_request(tmp_path, "bad", SourceText(PROBLEM, "p.py"), "x = 1")
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "sweep": [{"params": {}, "source": 3}]}))
    with pytest.raises(batch_folder.BatchError, match="bad sweep: sweep instance 0"):
        batch_folder.read_request(path)


def test_a_node_job_carries_its_sweep_to_the_node():
    instances = [{"params": {"BLOCK": 64}, "source": "a"}, {"params": {"BLOCK": 128}, "source": "b"}]
    job = NodeJob.from_dict(json.loads(json.dumps(NodeJob("p", "p.py", "a", "c1_sweep", {}, sweep=instances).to_dict())))
    assert job.judge_job().sweep == instances
    assert NodeJob("p", "p.py", "a", "c1", {}).judge_job().sweep is None
