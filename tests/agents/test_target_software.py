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
