"""`seed_problem` here (on a CPU: inductor's Triton for the CPU, run by the interpreter; on a GPU: the
GPU path, autotuned): the written file imports no torch._inductor / dynamo, says its origin, holds the
reference's weights, and the real judge passes it under the rule sets its header names; a problem it
cannot export is a clear error and leaves no file."""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from kernelwright.judge import judge
from kernelwright.judge.candidate_kinds import scan
from kernelwright.problem import load_candidate, load_problem
from kernelwright.seed import ORIGIN, SeedError, SeedOptions, seed_problem
from tests.tiny_problem import BARE_MATMUL, FAST

REPO = Path(__file__).resolve().parents[2]
JUDGE = dataclasses.replace(FAST, device="auto", time=False)  # where the seed was written: the GPU if there is one
EXAMPLES = REPO / "examples" / "problems"
FORBIDDEN = re.compile(r"^\s*(import|from)\s+torch\.(_inductor|_dynamo)|torch\.compile\(", re.M)

SOFTMAX = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return torch.softmax(x * self.scale, dim=1)


rows = 8
cols = 40


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return [2.0]
"""



@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> dict[str, tuple[Path, Path, object]]:
    """name -> (problem, seed file, Seed), written once for the module."""
    folder = tmp_path_factory.mktemp("seeds")
    (folder / "softmax.py").write_text(SOFTMAX)
    made = {}
    for name, problem, rules in [("gelu", EXAMPLES / "scale_bias_gelu.py", "strict"),
                                 ("linear", EXAMPLES / "linear_relu.py", "kernelbench"),
                                 ("softmax", folder / "softmax.py", "strict")]:
        out = folder / f"{name}_seed.py"
        made[name] = (problem, out, seed_problem(problem, out, SeedOptions(rules=rules)))
    return made


def test_the_seed_imports_no_inductor_and_says_its_origin(seeds):
    for _problem, path, seed in seeds.values():
        source = path.read_text()
        assert scan(source) == [], path
        assert not FORBIDDEN.search(source), path
        assert f"# origin: {ORIGIN}" in source and "torch 2." in source
        assert seed.kernels and all(f"def {k}(" in source for k in seed.kernels)
        assert "@triton_heuristics" not in source and "async_compile" not in source


def test_what_the_header_says_follows_the_torch_calls_left(seeds):
    assert seeds["gelu"][2].rule_sets == {"kernelbench": "", "library": "", "strict": ""}
    linear = seeds["linear"][2]
    assert linear.torch_calls == ["torch.addmm"] and linear.rule_sets["kernelbench"] == ""
    assert "torch.addmm" in linear.rule_sets["strict"] and "torch.addmm" in linear.rule_sets["library"]


def test_model_new_holds_the_reference_weights_and_checks_its_sizes(seeds):
    import torch

    problem_path, path, _ = seeds["gelu"]
    problem = load_problem(problem_path, shrink=not torch.cuda.is_available())
    reference = problem.make_model(7)
    candidate = problem.make_model(7, cls=load_candidate(path).ModelNew)
    assert torch.equal(reference.state_dict()["bias"], candidate.state_dict()["bias"])
    with pytest.raises(ValueError, match="compiled for a tensor of size"):
        candidate(torch.randn(3, 5))


@pytest.mark.parametrize("name, rules", [("gelu", "strict"), ("linear", "kernelbench")])
def test_the_judge_passes_the_seed_under_its_rule_set(seeds, name, rules):
    problem, path, _ = seeds[name]
    verdict = judge(str(problem), str(path), dataclasses.replace(JUDGE, rules=rules))
    assert verdict.status == "pass", verdict.error


def test_the_judge_rejects_it_where_the_header_says_it_would_fail(seeds):
    problem, path, seed = seeds["linear"]
    verdict = judge(str(problem), str(path), dataclasses.replace(JUDGE, rules="strict"))
    assert verdict.status != "pass" and "addmm" in (verdict.error or "")


def test_a_problem_inductor_writes_no_triton_for_is_a_clear_error(tmp_path):
    problem = tmp_path / "bare_matmul.py"
    problem.write_text(BARE_MATMUL)
    out = tmp_path / "seed.py"
    with pytest.raises(SeedError, match=r"launches no Triton kernel \(it calls torch.mm\).*own-kernel rule"):
        seed_problem(problem, out, SeedOptions())
    assert not out.exists()


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.skipif(_cuda(), reason="on a GPU inductor writes the matmul as Triton (the next test)")
def test_a_rule_set_the_seed_cannot_pass_is_refused_with_the_reason(tmp_path):
    out = tmp_path / "seed.py"
    with pytest.raises(SeedError, match="would not pass under the strict rule set: forward's Python calls "
                                        "torch.addmm.*on a GPU only"):
        seed_problem(EXAMPLES / "linear_relu.py", out, SeedOptions(rules="strict"))
    assert not out.exists()


@pytest.mark.gpu
@pytest.mark.parametrize("gemm", ["native", "template"])
def test_on_a_gpu_a_matmul_with_its_epilogue_passes_strict(tmp_path, gemm):
    """inductor's Triton matmul (tl.dot in its fused kernel, or its GEMM template) with the bias and
    ReLU: no torch call left, so the strict judge passes it."""
    out = tmp_path / "linear_seed.py"
    seed = seed_problem(EXAMPLES / "linear_relu.py", out, SeedOptions(rules="strict", gemm=gemm))
    assert seed.torch_calls == [] and seed.rule_sets["strict"] == ""
    verdict = judge(str(EXAMPLES / "linear_relu.py"), str(out), dataclasses.replace(JUDGE, rules="strict", time=True))
    assert verdict.status == "pass", verdict.error


def test_a_kernelbench_batchnorm_in_training_mode_passes_strict(kernelbench, tmp_path):
    """Three kernels (statistics, then the normalization), running buffers updated in place by the
    seed as by the reference: the judge passes it under strict."""
    problem = kernelbench / "level1" / "33_BatchNorm.py"
    out = tmp_path / "batchnorm_seed.py"
    seed = seed_problem(problem, out, SeedOptions(rules="strict"))
    assert len(seed.kernels) >= 2 and seed.torch_calls == []
    verdict = judge(str(problem), str(out), dataclasses.replace(JUDGE, rules="strict"))
    assert verdict.status == "pass", verdict.error
