"""Templatizing a reference that is a kernel itself (tune/from_reference.py), and the no-LLM paths
(`optimize_without_llm`, `kernelwright tune reference`) on the real-world suite."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelwright.judge import JudgeConfig
from kernelwright.tune.autopilot import optimize_without_llm
from kernelwright.tune.cache import TuneCache
from kernelwright.tune.from_reference import reference_candidate, templatize_reference
from kernelwright.tune.library import NoTemplate

SUITE = Path(__file__).resolve().parents[2] / "examples" / "realworld"
FAST = dict(trials=2, baselines=(), warmup_ms=1.0, rep_ms=5.0, min_reps=2, max_reps=3, energy_ms=0)

LAUNCHES = '''
import torch
import triton
import triton.language as tl

BLOCK_ROWS = 8

@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr, ROWS: tl.constexpr):
    pass

class Model(torch.nn.Module):
    def forward(self, x):
        block = 256
        k[(triton.cdiv(x.numel(), block),)](x, x.numel(), BLOCK=block, ROWS=BLOCK_ROWS, num_warps=2)
        k[(1,)](
            x, 3, BLOCK=100, ROWS=4,
        )
        return x
'''


def _names(template) -> dict:
    return dict(template.defaults)


def test_triton_launches_become_parameters():
    made = templatize_reference(LAUNCHES, "toy")
    template = made.template
    assert _names(template) == {"k_BLOCK": 256, "k_ROWS": 8, "k_num_warps": 2, "k2_ROWS": 4, "k2_num_warps": 4}
    assert template.params["k_BLOCK"] == (64, 128, 256, 512, 1024)  # a quarter to four times the author's value
    assert template.meta["groups"] == ["k_", "k2_"] and template.name == "toy_reference"
    source = template.source
    assert 'block = KW_PARAMS["k_BLOCK"]' in source  # the grid follows the same name
    assert 'BLOCK_ROWS = KW_PARAMS["k_ROWS"]' in source and "BLOCK=100" in source  # 100: not a power of two
    assert 'ROWS=KW_PARAMS["k2_ROWS"], num_warps=KW_PARAMS["k2_num_warps"],\n' in source  # before the trailing comma
    tree = ast.parse(template.instantiate({"k2_num_warps": 8}))
    launch = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript)][1]
    assert [kw.arg for kw in launch.keywords] == ["BLOCK", "ROWS", "num_warps"]
    assert "class ModelNew(Model)" in source and "KW_PARAMS = {" in template.instantiate({})


def test_every_suite_reference_templatizes_and_its_default_is_the_reference():
    for path in sorted(SUITE.glob("*.py")):
        made = templatize_reference(path.read_text(), path.stem)
        default = made.template.default_instance()
        assert "class ModelNew(Model)" in default and made.groups, path.stem
        namespace = {}
        decl = [n for n in ast.parse(default).body if isinstance(n, ast.Assign) and n.targets[0].id == "KW_PARAMS"]
        exec(compile(ast.Module(body=decl, type_ignores=[]), "decl", "exec"), namespace)
        assert namespace["KW_PARAMS"] == made.template.defaults


def test_cuda_constants_are_filled_before_the_build():
    made = templatize_reference((SUITE / "paged_kv_gather.py").read_text(), "paged_kv_gather")
    assert made.template.backend == "cuda" and made.template.defaults == {"kThreads": 128}
    assert made.groups == ["gather_paged_kv_kernel: kThreads=128"]
    instance = ast.parse(made.template.instantiate({"kThreads": 256}))
    namespace = {}
    wanted = [n for n in instance.body if isinstance(n, ast.Assign) and n.targets[0].id in ("KW_TUNE", "KW_PARAMS",
                                                                                              "cuda_source")]
    exec(compile(ast.Module(body=wanted, type_ignores=[]), "instance", "exec"), namespace)
    assert "constexpr int kThreads = 256;" in namespace["cuda_source"] and "@KW_" not in namespace["cuda_source"]


def test_what_cannot_be_templatized():
    with pytest.raises(NoTemplate, match="PyTorch ops"):
        templatize_reference("import torch\nclass Model(torch.nn.Module):\n    pass\n")
    bare = 'from torch.utils.cpp_extension import load_inline\nm = load_inline(name="e", cpp_sources="",\n' \
           '    cuda_sources="__global__ void f(int n) { }")\nclass Model:\n    pass\n'
    with pytest.raises(NoTemplate, match="no integer constants"):
        templatize_reference(bare)
    assert reference_candidate("class ModelNew: pass\n") == "class ModelNew: pass\n"


def test_autopilot_tunes_the_reference_kernels(tmp_path):
    steps = []
    result = optimize_without_llm(SUITE / "silu_and_mul.py", overrides={"num_tokens": 4, "intermediate_size": 64},
                                  strategy="random", budget_evals=2, judge_config=JudgeConfig(**FAST),
                                  on_result=steps.append, cache=TuneCache(tmp_path / "cache.sqlite"), workers=2,
                                  workdir=tmp_path / "run")
    assert result.matched, result.message
    assert result.template_name == "silu_and_mul_reference"
    assert steps[0].params == result.template.defaults and len(steps) == 2
    assert all(s.verdict.passed for s in steps), [s.measurement.summary() for s in steps]
    assert result.best_verdict.reference["kind"] == "triton"
    assert any(line.startswith("silu_and_mul_bwd_kernel:") for line in result.kernels)


def test_tune_command_takes_the_reference(tmp_path):
    from kernelwright.cli.app import app

    done = CliRunner().invoke(app, ["tune", "reference", "--problem", str(SUITE / "moe_topk_softmax.py"),
                                    "--prune-only"])
    assert done.exit_code == 0, done.output
    assert "space: 5 configurations, 5 feasible" in done.output
    torch_problem = tmp_path / "relu.py"
    torch_problem.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                             "        return torch.relu(x)\ndef get_inputs():\n    return [torch.randn(4)]\n"
                             "def get_init_inputs():\n    return []\n")
    refused = CliRunner().invoke(app, ["tune", "reference", "--problem", str(torch_problem), "--prune-only"])
    assert refused.exit_code == 2 and "PyTorch ops" in refused.output


def test_optimize_without_an_llm_on_a_kernel_reference(tmp_path, monkeypatch):
    from kernelwright.cli.app import app

    monkeypatch.delenv("KERNELWRIGHT_LLM", raising=False)
    monkeypatch.delenv("KERNELWRIGHT_LLM_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KW_TUNE_CACHE", str(tmp_path / "tune-cache"))
    done = CliRunner().invoke(app, ["optimize", str(SUITE / "moe_topk_softmax.py"), "--quiet", "--max-evals", "1",
                                    "--set", "num_tokens=6", "--set", "num_experts=16", "--set", "top_k=2",
                                    "--set", "judge.trials=2", "--set", "judge.rep_ms=5", "--set", "judge.min_reps=2",
                                    "--run-dir", str(tmp_path / "run")])
    assert done.exit_code == 0, done.output
    best = (tmp_path / "run" / "best_model_new.py").read_text()
    assert "vs reference kernel (Triton)" in best and "vs torch.compile: n/a (not applicable" in best
    assert "class ModelNew(Model)" in best


def test_the_templatizer_agent_takes_the_reference_directly():
    from kernelwright.agents import AgentContext, CandidateView, Templatizer

    source = (SUITE / "moe_unpermute.py").read_text()
    reference = CandidateView(id="reference", code=reference_candidate(source), status="reference", speedup=1.0)
    user = Templatizer().render(AgentContext(problem_name="moe_unpermute", problem_source=source,
                                             best=reference))[1].content
    assert "class ModelNew(Model)" in user and "unpermute_bwd_kernel" in user and "KW_TUNE" in user
    mechanical = templatize_reference(source, "moe_unpermute").template  # a valid answer to that prompt
    parsed = Templatizer().parse(f"```python\n{mechanical.source}```")
    assert parsed.defaults == mechanical.defaults and parsed.params == mechanical.params
