"""On a GPU: the stdio server judges and profiles a shared KernelBench candidate (Triton ReLU), with
GPU timing and ncu evidence (skipped without a GPU)."""
from __future__ import annotations

import anyio
import pytest

from mcp_helpers import REPO, call, client

pytest.importorskip("mcp.server.mcpserver")
pytestmark = [pytest.mark.gpu, pytest.mark.timeout(300)]


def test_judge_and_profile_a_triton_relu_on_the_gpu(tmp_path, kernelbench):
    problem = str(kernelbench / "level1" / "19_ReLU.py")
    code = (REPO / "bench" / "candidates" / "19_ReLU__triton.py").read_text()
    request = {"problem": problem, "candidate_code": code, "sizes": {"batch_size": 64}}

    async def scenario():
        async with client(tmp_path, "--allow", str(kernelbench)) as session:
            return (await call(session, "judge", {**request, "trials": 3}),
                    await call(session, "profile", request))

    (j_error, verdict), (p_error, profiled) = anyio.run(scenario)
    assert not j_error and verdict["status"] == "pass", verdict
    assert verdict["device"].startswith("cuda") and verdict["timing"]["method"] in ("cuda_events", "cuda_graph")
    assert verdict["speedup"]["eager"] > 0 and verdict["floor"]["pct_of_floor"] > 0
    assert not p_error and profiled["status"] == "pass", profiled
    report = profiled["profile"]
    assert report["device"].startswith("cuda") and report["status"] == "ok", report
    assert report["bottleneck"] in ("memory", "compute", "latency", "launch", "host")
    assert any("relu" in k["name"] and k["share"] > 0.5 for k in report["kernels"]), report["kernels"]
    assert report["findings"]
