"""regions.py: grouping identical submodules (what repr leaves out included) and never nesting."""
from __future__ import annotations

import torch

from kernelwright.models.attribution import ModuleTime, StepProfile
from kernelwright.models.calls import Arg, ModuleCall, TensorSpec
from kernelwright.models.regions import select_regions


class Norm(torch.nn.Module):
    def __init__(self, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(8))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = Norm(1e-6), Norm(1e-6), Norm(1e-2)  # c's repr is the same, its eps is not
        self.pair = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 8))


def profile(times: dict[str, float]) -> StepProfile:
    x = Arg(None, tensor=TensorSpec([2, 8], "float32", "cpu"))
    records = {p: ModuleCall(p, "Norm", True, [x], calls=1) for p in ["", "a", "b", "c", "pair", "pair.0", "pair.1"]}
    return StepProfile("cpu", 100.0, {p: ModuleTime(t) for p, t in times.items()}, records)


def test_identical_instances_group_and_a_different_eps_does_not():
    chosen = select_regions(Net(), profile({"a": 10, "b": 10, "c": 15, "pair": 30, "pair.0": 20, "pair.1": 10}), top=5)
    groups = [r.paths for r in chosen.regions]
    assert ["a", "b"] in groups and ["c"] in groups and "pair" not in [p for g in groups for p in g]
    assert chosen.regions[0].paths == ["pair.0", "pair.1"] and chosen.regions[0].share == 0.3  # identical Linears
    assert chosen.regions[1].paths == ["a", "b"] and chosen.regions[1].share == 0.2  # 20 of 100


def test_regions_never_nest():
    net = Net()
    net.pair = torch.nn.Linear(8, 8)  # not a container now: a region of its own, its children none
    chosen = select_regions(net, profile({"pair": 50, "a": 5}), top=5)
    assert [r.paths for r in chosen.regions][0] == ["pair"]
