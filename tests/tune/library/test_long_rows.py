"""Rows longer than one block: statistics in one pass (online softmax, Welford) and rows split
over several programs, chosen by the template's SPLIT parameter and its constraints."""
import pytest

from kernelwright.problem import load_problem
from kernelwright.tune.hardware import H100_SXM
from kernelwright.tune.inprocess import InProcessEvaluator
from kernelwright.tune.library import build_template
from kernelwright.tune.library.fuse import partition
from kernelwright.tune.library.graph import capture
from kernelwright.tune.library.lower import lower
from kernelwright.tune.library.rowstats import find_stats
from kernelwright.tune.library.rowwise import _Plan
from kernelwright.tune.prune import prune_space

from .test_ops import write_problem

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

STATS = {
    "softmax": ("torch.softmax(x, dim=-1)", "", ["softmax"]),
    "log_softmax_scaled": ("torch.log_softmax(x * 3, dim=-1)", "", ["softmax"]),
    "logsumexp": ("torch.logsumexp(x, dim=-1)", "", ["softmax"]),
    "layer_norm": ("self.norm(x)", "self.norm = nn.LayerNorm(40)", ["welford"]),
    "var_std": ("torch.var(x, dim=-1) + torch.std(x, dim=-1)", "", ["welford", "welford"]),
    "manual_variance": ("((x - x.mean(dim=-1, keepdim=True)) ** 2).mean(dim=-1)", "", ["welford"]),
    "sum_and_max": ("x.sum(dim=-1) + x.amax(dim=-1)", "", ["simple", "simple"]),
}


def _stats(path):
    problem = load_problem(path)
    [group] = partition(lower(capture(problem)))
    return find_stats(group, _Plan(group))


@pytest.mark.parametrize("name", sorted(STATS))
def test_dependent_reductions_have_online_forms(tmp_path, name):
    forward, init, kinds = STATS[name]
    stats = _stats(write_problem(tmp_path, name, forward, [(6, 40)], init=init))
    assert stats is not None and sorted(st.kind for st in stats) == sorted(kinds)


def test_reduction_without_online_form_keeps_one_pass_per_level_and_never_splits(tmp_path):
    forward = "(x - x.mean(dim=-1, keepdim=True)) / (x - x.mean(dim=-1, keepdim=True)).abs().amax(dim=-1, keepdim=True)"
    path = write_problem(tmp_path, "maxabs", forward, [(6, 40)])
    assert _stats(path) is None
    template = build_template(load_problem(path)).template
    assert template.params["SPLIT"] == (1,)
    chunked = {**template.defaults, "BLOCK_R": 16}
    [m] = InProcessEvaluator(load_problem(path), device="cpu", rep_ms=1, warmup_ms=0).evaluate(template, [chunked])
    assert m.status == "pass", m.error


def test_few_long_rows_are_split_by_default_and_many_are_not(tmp_path):
    few = build_template(load_problem(write_problem(tmp_path, "few", "torch.softmax(x, dim=-1)", [(2, 393216)])))
    defaults = few.template.defaults
    assert defaults["SPLIT"] > 1 and defaults["BLOCK_R"] < 393216  # two rows cannot fill 132 SMs
    many = build_template(load_problem(write_problem(tmp_path, "many", "torch.softmax(x, dim=-1)", [(4096, 393216)])))
    assert many.template.defaults["SPLIT"] == 1
    report = prune_space(many.template.restrict(fixed={"BLOCK_Q": 1}), H100_SXM)
    assert report.feasible and all(c["SPLIT"] == 1 for c in report.feasible)  # 4096 rows fill the GPU
    assert any("SPLIT" in p.reason for p in report.pruned)
    assert all(c["BLOCK_R"] <= 65536 for c in report.feasible)


def test_split_needs_a_whole_chunk_per_part(tmp_path):
    template = build_template(load_problem(write_problem(tmp_path, "sm", "torch.softmax(x, dim=-1)", [(2, 4096)]))).template
    for config in prune_space(template, H100_SXM).feasible:
        assert config["SPLIT"] == 1 or config["SPLIT"] * config["BLOCK_R"] <= 4096


LONG = {
    "softmax": ("torch.softmax(x, dim=-1)", "", (3, 70000)),
    "log_softmax": ("torch.log_softmax(x, dim=1)", "", (2, 70000)),
    "layer_norm": ("self.norm(x)", "self.norm = nn.LayerNorm(70000)", (2, 70000)),
    "frobenius": ("x / torch.norm(x, p='fro')", "", (300, 250)),
    "batch_norm": ("self.norm(x)", "self.norm = nn.BatchNorm2d(3)", (4, 3, 150, 120)),
}


@pytest.mark.parametrize("name", sorted(LONG))
def test_long_rows_match_the_reference(tmp_path, name):
    """Rows longer than the largest block (65536) or few rows: default (split) and unsplit looped."""
    forward, init, shape = LONG[name]
    path = write_problem(tmp_path, name, forward, [shape], init=init)
    problem = load_problem(path)
    template = build_template(problem).template
    prefix = next(p for p in template.params if p.endswith("SPLIT"))[: -len("SPLIT")]
    assert template.defaults[prefix + "SPLIT"] > 1
    configs = [template.defaults, {**template.defaults, prefix + "SPLIT": 1, prefix + "BLOCK_R": 4096}]
    evaluator = InProcessEvaluator(problem, device="cpu", rep_ms=1, warmup_ms=0)
    for m in evaluator.evaluate(template, configs):
        assert m.status == "pass", f"{m.params}: {m.error}"
