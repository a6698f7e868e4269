"""The reference's timing the prompts carry (search/context.py `reference_timing`): given before
round 1, else the latest GPU verdict's baselines with the reference's kernels where recorded."""
from __future__ import annotations

from types import SimpleNamespace

from kernelwright.judge.verdict import Baselines, TimingStats, Verdict
from kernelwright.search.context import reference_timing
from kernelwright.search.results import EvalResult


def _stats(ms: float) -> TimingStats:
    return TimingStats(median_ms=ms, iqr_ms=0.01, mean_ms=ms, min_ms=ms, max_ms=ms, n=20, method="cuda_events")


def test_given_timing_wins_and_verdicts_fill_in_with_the_references_kernels():
    kernels = {"available": True, "kernels": [{"name": "sm90_xmma_gemm", "share": 0.9, "us_per_call": 900.0}]}
    verdict = Verdict(problem="p", candidate="c1", status="fail", device="cuda",
                      baselines=Baselines(eager=_stats(1.0), compile_default=_stats(0.8), kernels=kernels))
    tree = [SimpleNamespace(eval=EvalResult.from_verdict(verdict))]
    assert reference_timing(tree, {"eager_ms": 2.0}) == {"eager_ms": 2.0}
    found = reference_timing(tree, None)
    assert found == {"eager_ms": 1.0, "compile_ms": 0.8, "source": "verdicts", "kernels": kernels["kernels"]}
    cpu = Verdict(problem="p", candidate="c2", status="fail", device="cpu", baselines=Baselines(eager=_stats(3.0)))
    assert reference_timing([SimpleNamespace(eval=EvalResult.from_verdict(cpu))], None) == {}
