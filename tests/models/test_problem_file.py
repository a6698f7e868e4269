"""problem_file.py: an extracted problem is a problem the judge can judge: its own Model, renamed
ModelNew, passes every correctness trial in the sandbox (forward and gradients) on the CPU; the
only flags are the rule set's (a candidate must run kernels of its own), not the problem's."""
from __future__ import annotations

from pathlib import Path

from kernelwright.judge import JudgeConfig, judge
from kernelwright.models.extract import extract
from kernelwright.models.calls import Arg, TensorSpec
from kernelwright.models.problem_file import call_source, file_name, input_source

TINY = Path(__file__).with_name("tiny_model.py")


def test_the_problem_judges_its_own_model_correct(tmp_path):
    result = extract(f"{TINY}:build", tmp_path / "regions", top=1, backward=True, device="cpu")
    problem = tmp_path / "regions" / result.manifest["regions"][0]["file"]
    candidate = tmp_path / "own_model.py"
    candidate.write_text(problem.read_text().replace("class Model(", "class ModelNew("))
    verdict = judge(problem, candidate, JudgeConfig(trials=2, time=False, device="cpu"))
    assert verdict.trials and all(t.ok for t in verdict.trials), verdict.error
    assert {"input 0", "parameter region.up.weight", "parameter region.down.bias"} <= set(verdict.trials[0].grads)
    assert {f.code for f in verdict.flags} <= {"no_own_kernel", "torch_op"}, verdict.error


def test_call_and_input_sources():
    args = [Arg(None, tensor=TensorSpec([2, 3], "float32", "cpu")), Arg("mask", tensor=TensorSpec([2], "bool", "cpu", low=0, high=1)),
            Arg("causal", literal="True"), Arg("self", tensor=TensorSpec([1], "int64", "cpu", low=3, high=3))]
    params, call = call_source(args)
    assert params == ", arg0, mask, self_" and call == "arg0, mask=mask, causal=True, self=self_"
    assert input_source(args[1].tensor) == "torch.randint(0, 2, [2]).bool()"
    assert input_source(args[3].tensor) == "torch.full([1], 3, dtype=torch.int64)"
    assert input_source(TensorSpec([4], "int32", "cpu", low=-2, high=5)) == "torch.randint(-2, 6, [4], dtype=torch.int32)"


def test_file_names_sort_by_rank_and_never_start_with_an_underscore():
    from kernelwright.models.regions import Region

    region = Region(["layers.0.attn"], "Attention", None, 0, 0, 0, 0)
    assert file_name(3, region) == "03_layers_0_attn.py"
