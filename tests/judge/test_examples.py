"""The shipped examples: each Triton candidate passes the judge on its problem (CPU interpreter)."""
from __future__ import annotations

import asyncio
from pathlib import Path

from kernelwright.judge import JudgeConfig
from kernelwright.judge.scheduling.pool import JudgeJob, JudgePool

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NAMES = ("scale_bias_gelu", "row_softmax", "linear_relu")


async def _collect(pool: JudgePool, jobs: list[JudgeJob]) -> dict[int, object]:
    return {index: verdict async for index, verdict in pool.aiter_judge(jobs)}


def test_every_example_candidate_passes():
    config = JudgeConfig(time=False, trials=4)
    jobs = [JudgeJob(EXAMPLES / "problems" / f"{n}.py", EXAMPLES / "candidates" / f"{n}.py", config) for n in NAMES]
    verdicts = asyncio.run(_collect(JudgePool(cpu_workers=2), jobs))
    assert sorted(verdicts) == [0, 1, 2]
    for index, name in enumerate(NAMES):
        verdict = verdicts[index]
        assert verdict.status == "pass", (name, verdict.error)
        assert not verdict.reject_flags() and verdict.compile.backend == "triton"
        assert len(verdict.trials) == 4
