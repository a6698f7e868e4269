"""examples/models/transformer_block.py: the worked example of extract/apply builds by its spec and
extracts on a CPU (the GPU run is in docs/models.md)."""
from __future__ import annotations

from pathlib import Path

import torch

from kernelwright.models.extract import extract
from kernelwright.problem import load_problem

SPEC = f"{Path(__file__).resolve().parents[2] / 'examples/models/transformer_block.py'}:build"


def test_the_example_extracts_its_blocks(tmp_path):
    result = extract(SPEC, tmp_path / "regions", top=2, device="cpu")
    regions = result.manifest["regions"]
    first = next((r for r in regions if r["paths"] == ["layers.0", "layers.1"]), None)
    assert first is not None and first["training"] is False, regions
    problem = load_problem(tmp_path / "regions" / first["file"])
    model = problem.make_model(seed=0)
    (x,) = problem.make_inputs(seed=0)
    assert x.shape == (2, 32, 64) and model(x).shape == x.shape and torch.isfinite(model(x)).all()
