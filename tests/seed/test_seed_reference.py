"""The reference's Model copied into the seed with what it uses: constants at the values the problem
was loaded with (overrides applied, chained assignments too), helper classes, not get_inputs."""
from __future__ import annotations

import pytest

from kernelwright.problem import load_problem
from kernelwright.seed.reference import reference_source
from kernelwright.seed.types import SeedError

PROBLEM = """import torch
import torch.nn as nn

height = width = 32
channels = 4
unused = 7


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(channels, height, width))


class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
        self.block = Block()

    def forward(self, x):
        return x * self.block.scale


def get_inputs():
    return [torch.randn(2, channels, height, width)]


def get_init_inputs():
    return []
"""


def test_model_comes_with_its_classes_and_loaded_constants(tmp_path):
    path = tmp_path / "p.py"
    path.write_text(PROBLEM)
    text = reference_source(load_problem(path, {"height": 8, "width": 8}), reserved={"ModelNew"})
    assert "height = width = 8" in text and "channels = 4" in text and "unused" not in text
    assert "class Block(nn.Module)" in text and "class Model(nn.Module)" in text and "get_inputs" not in text
    namespace: dict = {}
    exec(compile(text, "reference", "exec"), namespace)  # noqa: S102 -- the copied source must stand alone
    assert tuple(namespace["Model"]().block.scale.shape) == (4, 8, 8)


def test_a_name_the_seed_uses_itself_is_refused(tmp_path):
    path = tmp_path / "p.py"
    path.write_text(PROBLEM.replace("class Block", "class alloc").replace("Block()", "alloc()"))
    with pytest.raises(SeedError, match="defines alloc"):
        reference_source(load_problem(path), reserved={"alloc"})
