"""The target section names the software the judge runs and what its Triton can do (issue 31, point 5)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from kernelwright.agents import AgentContext, Coder
from kernelwright.agents.software import triton_support, version_tuple
from kernelwright.judge.target import known_target, read_target

DEVICE = Path(__file__).resolve().parents[1] / "fixtures" / "golden" / "h100_device.json"


def target_text(target) -> str:
    system = Coder().render(AgentContext(problem_name="p", problem_source="import torch\n", target=target))[0].content
    return system.split("# Target")[1].split("\n# ")[0]


def test_a_measured_target_names_its_versions_and_what_its_triton_has():
    text = target_text(read_target(DEVICE))
    assert "Software the judge runs: cuda 13.0, driver 580.159.04, nvcc 13.0.88, python 3.12.3, torch 2.11.0+cu130, triton 3.6.0." in text
    assert "This Triton has `tl.dot(..., input_precision=\"tf32x3\")`" in text
    assert "`tl.make_tensor_descriptor`" in text and "does not have" not in text


def test_an_older_triton_is_told_what_it_lacks_and_probed_features_win():
    old = dataclasses.replace(read_target(DEVICE), software={"triton": "3.2.0", "torch": "2.6.0"})
    text = target_text(old)
    assert "This Triton has `tl.dot(..., input_precision=\"tf32x3\")`" in text
    assert "does not have `tl.make_tensor_descriptor`" in text
    probed = dataclasses.replace(old)
    probed.triton_features = {"tl.make_tensor_descriptor": True, "tl.fdiv": True}
    assert triton_support(probed) == {"available": ["`tl.make_tensor_descriptor`", "`tl.fdiv`"], "missing": []}
    assert version_tuple("3.4.0+git1a2b") == (3, 4) and version_tuple("unknown") is None


def test_a_target_without_a_software_record_says_the_versions_are_unknown():
    text = target_text(known_target("h100"))
    assert "Software: not recorded for this target" in text and "versions the judge runs are unknown" in text
    assert "This Triton" not in text


def test_the_reference_measured_before_round_one_is_in_the_task_section():
    """Issue 31, point 6: eager and compile times and the reference's own kernels, when the run has them."""
    timing = {"eager_ms": 1.52, "compile_ms": 1.31, "kernels": [
        {"name": "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32", "share": 0.71, "us_per_call": 1080.0,
         "launches_per_call": 1, "tensor_cores": True},
        {"name": "batch_norm_collect_statistics_kernel", "share": 0.18, "us_per_call": 270.0, "tensor_cores": False}]}
    user = Coder().render(AgentContext(problem_name="p", problem_source="import torch\n",
                                       extra={"reference_timing": timing}))[-1].content
    assert "The reference on the target: PyTorch eager 1.52 ms, torch.compile 1.31 ms per call; its kernels" in user
    assert "- `sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32`: 71% (1.08 ms, tensor cores)" in user
    assert "- `batch_norm_collect_statistics_kernel`: 18% (0.27 ms, no tensor cores)" in user
