"""Timing the reference at a batch folder's first contact: requests, the measured record on this
machine's CPU, what is said when it cannot be measured ahead, and the record's layout."""
from __future__ import annotations

import json

from kernelwright.judge.request import SourceText
from kernelwright.judge.config import JudgeConfig
from kernelwright.judge.scheduling import reference_timing
from kernelwright.judge.scheduling.pool import JudgePool
from kernelwright.judge.verdict import Baselines, TimingStats

PROBLEM = SourceText('''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2

def get_inputs():
    return [torch.rand(64, 256)]

def get_init_inputs():
    return []
''', "relu_twice.py")  # hand-written test problem in KernelBench format


def test_a_reference_request_is_measured_once_with_the_candidates_measurement(tmp_path):
    config = JudgeConfig(device="cpu", shrink=False, baselines=("eager",), rep_ms=20, warmup_ms=5, min_reps=5,
                         cache_dir=str(tmp_path / "cache"))
    reference_timing.write_request(tmp_path, "run1-reference", PROBLEM, config)
    assert reference_timing.read_result(tmp_path, "run1-reference") is None
    with JudgePool(JudgeConfig(device="cpu"), cpu_workers=1) as pool:
        assert reference_timing.measure_folders([tmp_path], pool) == ["run1-reference"]
        assert reference_timing.measure_folders([tmp_path], pool) == []  # answered: not measured again
    found = reference_timing.read_result(tmp_path, "run1-reference")
    assert found["eager_ms"] > 0 and found["compile_ms"] is None and found["device"].startswith("cpu")
    assert found["eager_label"] == "eager PyTorch" and found["measured"]["eager"]["measured_at"]
    assert found["kernels"] == []  # a CPU has no kernel timeline
    assert list((tmp_path / "cache" / "baselines").rglob("*.json"))  # the cache the candidates' judges read


def test_what_cannot_be_measured_ahead_is_said_in_the_record(tmp_path):
    reference_timing.write_request(tmp_path, "shrunk", PROBLEM, JudgeConfig(device="cpu"))  # CPU: sizes shrunk
    (tmp_path / f"broken{reference_timing.REQUEST_SUFFIX}").write_text("{not json")
    with JudgePool(JudgeConfig(device="cpu"), cpu_workers=1) as pool:
        assert sorted(reference_timing.measure_folders([tmp_path], pool)) == ["broken", "shrunk"]
    assert "known only once the problem is loaded" in reference_timing.read_result(tmp_path, "shrunk")["unavailable"]
    assert reference_timing.read_result(tmp_path, "broken")["unavailable"].startswith("bad reference request")


def test_the_record_carries_the_eager_references_kernels_when_measured():
    eager = TimingStats(median_ms=1.5, iqr_ms=0.01, mean_ms=1.5, min_ms=1.4, max_ms=1.6, n=50, method="cuda_events")
    compiled = TimingStats(median_ms=1.2, iqr_ms=0.01, mean_ms=1.2, min_ms=1.1, max_ms=1.3, n=50, method="cuda_events")
    kernels = {"available": True, "kernels": [{"name": "sm90_xmma_gemm", "share": 0.8, "us_per_call": 1200.0,
                                               "launches_per_call": 1}]}
    baselines = Baselines(eager=eager, compile_default=compiled, kernels=kernels,
                          measured={"eager": {"measured_at": "2026-11-28T10:00:00", "steady": True}})
    found = reference_timing.record(baselines, "NVIDIA H100 80GB HBM3")
    assert (found["eager_ms"], found["compile_ms"]) == (1.5, 1.2) and found["kernels"][0]["share"] == 0.8
    assert json.loads(json.dumps(found)) == found
    missing = reference_timing.record(Baselines(errors={"eager": "out of memory"}), "gpu")
    assert missing["eager_ms"] is None and missing["unavailable"] == "eager: out of memory"
