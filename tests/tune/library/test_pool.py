"""The pooling template: max/avg over 1-3 dims with every window setting, against PyTorch under the
Triton interpreter, and its declared parameters and constraints."""
import pytest

from kernelwright.problem import load_problem
from kernelwright.tune.hardware import H100_SXM
from kernelwright.tune.library import NoTemplate, build_template
from kernelwright.tune.prune import prune_space

from .test_ops import check, write_problem

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

POOLS = {
    "max1d": ("F.max_pool1d(x, 4)", (2, 3, 30)),
    "max1d_padded_dilated": ("F.max_pool1d(x, 3, stride=1, padding=1, dilation=3)", (2, 3, 30)),
    "max2d": ("F.max_pool2d(x, 2, stride=2)", (2, 3, 12, 10)),
    "max2d_ceil": ("F.max_pool2d(x, 3, stride=2, padding=1, dilation=2, ceil_mode=True)", (2, 3, 17, 15)),
    "max3d_ceil": ("F.max_pool3d(x, 3, stride=2, padding=1, dilation=3, ceil_mode=True)", (2, 2, 11, 9, 10)),
    "max2d_indices_unused": ("F.max_pool2d(x, 2, return_indices=True)[0]", (2, 3, 8, 8)),
    "max2d_rectangular": ("F.max_pool2d(x, (2, 3), stride=(1, 2), padding=(1, 0))", (2, 3, 9, 11)),
    "avg1d": ("F.avg_pool1d(x, 4, stride=2, padding=2)", (2, 3, 30)),
    "avg2d": ("F.avg_pool2d(x, 3)", (2, 3, 13, 11)),
    "avg2d_padding_excluded": ("F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)",
                               (2, 3, 14, 11)),
    "avg2d_padding_ceil": ("F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True)", (2, 3, 14, 11)),
    "avg2d_divisor": ("F.avg_pool2d(x, 2, divisor_override=3)", (2, 3, 8, 8)),
    "avg3d": ("F.avg_pool3d(x, 2)", (2, 2, 6, 8, 4)),
    "adaptive_global": ("F.adaptive_avg_pool2d(x, 1)", (2, 3, 8, 8)),
    "adaptive_even": ("F.adaptive_avg_pool2d(x, (4, 2))", (2, 3, 8, 8)),
    "adaptive_3d_global": ("F.adaptive_avg_pool3d(x, (1, 1, 1))", (2, 3, 4, 5, 6)),
    "unbatched": ("F.max_pool2d(x, 2)", (3, 8, 8)),
    "permuted_input": ("F.max_pool2d(x.permute(0, 3, 1, 2), 2)", (2, 8, 6, 3)),
}


@pytest.mark.parametrize("name", sorted(POOLS))
def test_pooling_matches_pytorch(tmp_path, name):
    forward, shape = POOLS[name]
    match = check(write_problem(tmp_path, name, forward, [shape]))
    expected = ["rowwise"] if "global" in name else ["pool"]
    assert match.families == expected


def test_pooling_takes_the_ops_after_it_as_an_epilogue(tmp_path):
    init = "self.bias = nn.Parameter(torch.randn(3, 1, 1))"
    path = write_problem(tmp_path, "epi", "torch.tanh(F.max_pool2d(torch.relu(x), 2) + self.bias) * 2",
                         [(2, 3, 8, 8)], init=init)
    assert check(path).families == ["pointwise", "pool"]  # relu before, the rest fused after the window


def test_pool_then_reduction_is_two_kernels(tmp_path):
    path = write_problem(tmp_path, "pool_sum", "F.max_pool1d(x, 2).sum(dim=-1)", [(2, 3, 30)])
    assert check(path, looped=True).families == ["pool", "rowwise"]


def test_uneven_adaptive_pooling_is_declined(tmp_path):
    path = write_problem(tmp_path, "adaptive", "F.adaptive_avg_pool2d(x, (3, 3))", [(2, 3, 8, 8)])
    with pytest.raises(NoTemplate, match="unequal"):
        build_template(load_problem(path))


def test_pool_parameters_and_constraints(tmp_path):
    path = write_problem(tmp_path, "p", "F.max_pool2d(x, 2)", [(2, 3, 8, 8)])
    template = build_template(load_problem(path)).template
    assert set(template.params) == {"BLOCK", "num_warps"}
    report = prune_space(template, H100_SXM)
    assert template.defaults in report.feasible
    for config in report.feasible:  # 96 outputs: no block over 128, every thread with work
        assert config["BLOCK"] <= 128 and config["BLOCK"] >= config["num_warps"] * 32
    assert report.pruned
