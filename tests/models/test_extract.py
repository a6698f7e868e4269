"""extract.py (with attribution.py, regions.py, problem_file.py): a small model's hottest
submodules written as problems that rebuild exactly those submodules."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from kernelwright.models.extract import extract
from kernelwright.models.spec import ModelSpecError, build_model
from kernelwright.problem import load_problem

TINY = Path(__file__).with_name("tiny_model.py")
SPEC = f"{TINY}:build"


@pytest.fixture(scope="module")
def blocks(tmp_path_factory):
    return extract(SPEC, tmp_path_factory.mktemp("x") / "regions", top=3, backward=True, device="cpu")


def test_regions_are_ranked_grouped_and_never_nested(blocks):
    regions = blocks.manifest["regions"]
    assert regions[0]["paths"] == ["blocks.0", "blocks.1"]  # two identical blocks: one problem
    assert [r["share"] for r in regions] == sorted((r["share"] for r in regions), reverse=True)
    every = [p for r in regions for p in r["paths"]]
    assert not any(a != b and b.startswith(a + ".") for a in every for b in every)
    assert "blocks" not in every  # a ModuleList is a container, not a region
    assert 0 < blocks.manifest["covered_share"] <= 1.0
    assert all(r["backward_us"] > 0 for r in regions)  # backward nodes were attributed


def test_the_manifest_lists_what_the_problem_was_made_of(blocks):
    manifest = json.loads((blocks.out_dir / "regions.json").read_text())
    first = manifest["regions"][0]
    assert first["file"] == "01_blocks_0.py" and (blocks.out_dir / first["file"]).is_file()
    assert first["class"] == "Block" and first["training"] is True and first["calls_per_step"] == 1
    assert first["inputs"][0]["tensor"]["shape"] == [4, 16, 32] and first["inputs"][1] == \
        {"name": "scale", "tensor": None, "literal": "0.5"}
    assert manifest["clock"] == "cpu" and manifest["backward"] is True


def test_the_problem_rebuilds_exactly_the_submodule(blocks):
    problem = load_problem(blocks.out_dir / "01_blocks_0.py")
    assert problem.module.KW_BACKWARD is True and problem.module.KW_GRAD_INPUTS == [0]
    model = problem.make_model(seed=3)
    inputs = problem.make_inputs(seed=3)
    assert [tuple(x.shape) for x in inputs] == [(4, 16, 32)]
    user = build_model(SPEC).model.get_submodule("blocks.0")
    assert torch.equal(model(*inputs), user(inputs[0], scale=0.5))  # same weights, same constant argument


def test_leaves_and_integer_inputs(tmp_path):
    result = extract(SPEC, tmp_path / "leaves", top=10, leaves=True, device="cpu")
    paths = [r["path"] for r in result.manifest["regions"]]
    assert "blocks.0" not in paths and "blocks.0.up" in paths and "embed" in paths
    embed = load_problem(tmp_path / "leaves" / next(r["file"] for r in result.manifest["regions"] if r["path"] == "embed"))
    tokens = embed.make_inputs(seed=1)[0]
    assert tokens.dtype == torch.int64 and 0 <= int(tokens.min()) and int(tokens.max()) < 50
    assert result.manifest["backward"] is False and "KW_BACKWARD = True" not in embed.source


def test_a_call_a_problem_cannot_express_is_skipped_with_its_reason(tmp_path):
    path = tmp_path / "odd.py"
    path.write_text(
        "import torch\n\n"
        "class Odd(torch.nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.lin = torch.nn.Linear(8, 8)\n"
        "    def forward(self, x, how):\n        return self.lin(x) * how.factor\n\n"
        "class How:\n    factor = 2.0\n\n"
        "class Outer(torch.nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.odd = Odd()\n"
        "    def forward(self, x):\n        return self.odd(x, How())\n\n"
        "def build():\n    return Outer(), (torch.randn(4, 8),)\n")
    result = extract(f"{path}:build", tmp_path / "out", top=2, device="cpu")
    assert result.manifest["skipped"][0]["paths"] == ["odd"]
    assert "is a How, neither a tensor nor a Python literal" in result.manifest["skipped"][0]["reason"]
    assert [r["path"] for r in result.manifest["regions"]] == ["odd.lin"]  # its child stays a candidate


def test_nothing_is_written_for_a_bad_spec_or_over_earlier_problems(tmp_path):
    with pytest.raises(ModelSpecError):
        extract(f"{TINY}:nothing", tmp_path / "bad", device="cpu")
    assert not (tmp_path / "bad").exists()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "01_x.py").write_text("")
    with pytest.raises(ModelSpecError, match="already holds extracted problems"):
        extract(SPEC, tmp_path / "full", device="cpu")
