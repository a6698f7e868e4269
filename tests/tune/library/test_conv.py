"""The convolution template (implicit GEMM): 1-3D, groups, stride, padding, dilation, transposed,
fused epilogues, against PyTorch under the Triton interpreter; its parameters and constraints."""
import pytest

from kernelwright.problem import load_problem
from kernelwright.tune.hardware import H100_SXM
from kernelwright.tune.inprocess import InProcessEvaluator
from kernelwright.tune.library import build_template
from kernelwright.tune.prune import prune_space

from .test_ops import check, write_problem

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

CONVS = {
    "conv1d": ("nn.Conv1d(4, 16, 3)", (2, 4, 20)),
    "conv1d_strided_dilated": ("nn.Conv1d(4, 16, 3, stride=2, padding=2, dilation=2)", (2, 4, 21)),
    "conv2d": ("nn.Conv2d(4, 16, 3, padding=1)", (2, 4, 9, 8)),
    "conv2d_rect_no_bias": ("nn.Conv2d(4, 20, (3, 2), stride=(2, 1), padding=(1, 0), bias=False)", (2, 4, 9, 7)),
    "conv2d_same": ("nn.Conv2d(4, 16, 3, padding='same')", (2, 4, 6, 7)),
    "conv2d_grouped": ("nn.Conv2d(8, 32, 3, groups=2)", (2, 8, 7, 6)),
    "conv2d_depthwise": ("nn.Conv2d(6, 6, (3, 2), groups=6)", (2, 6, 8, 7)),
    "conv2d_pointwise": ("nn.Conv2d(8, 16, 1)", (2, 8, 5, 6)),
    "conv3d": ("nn.Conv3d(3, 16, 3, padding=1)", (2, 3, 5, 6, 4)),
    "conv_transpose1d": ("nn.ConvTranspose1d(4, 16, 3, stride=2, padding=1, output_padding=1, dilation=2)", (2, 4, 9)),
    "conv_transpose2d": ("nn.ConvTranspose2d(4, 16, 3)", (2, 4, 5, 6)),
    "conv_transpose2d_strided_grouped": ("nn.ConvTranspose2d(8, 32, (3, 2), stride=(2, 3), padding=(1, 0), "
                                         "dilation=(2, 1), groups=2)", (2, 8, 4, 5)),
    "conv_transpose3d_strided": ("nn.ConvTranspose3d(4, 16, 3, stride=2, padding=1)", (2, 4, 3, 4, 3)),
    "conv_transpose2d_stride5_dilated": ("nn.ConvTranspose2d(4, 16, 3, stride=5, padding=1, dilation=2)", (2, 4, 3, 4)),
    # kernel 1, stride 2: the odd outputs get no tap at all (the bias only)
    "conv_transpose2d_phases_without_taps": ("nn.ConvTranspose2d(4, 16, 1, stride=2, output_padding=1)", (2, 4, 3, 4)),
}


@pytest.mark.parametrize("name", sorted(CONVS))
def test_convolutions_match_pytorch(tmp_path, name):
    module, shape = CONVS[name]
    path = write_problem(tmp_path, name, "self.conv(x)", [shape], init=f"self.conv = {module}")
    assert check(path).families == ["conv"]


def _instances(path, overrides: list[dict]):
    problem = load_problem(path)
    template = build_template(problem).template
    configs = [{**template.defaults, **o} for o in overrides]
    return template, InProcessEvaluator(problem, device="cpu", rep_ms=1, warmup_ms=0).evaluate(template, configs)


def test_other_tiles_direct_product_and_precisions_agree(tmp_path):
    path = write_problem(tmp_path, "grouped", "self.conv(x)", [(2, 8, 7, 6)], init="self.conv = nn.Conv2d(8, 8, 3, groups=2)")
    template, results = _instances(path, [
        {"DOT": 0, "BLOCK_N": 4, "BLOCK_K": 8, "num_stages": 2},
        {"DOT": 1, "BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "GROUP_M": 1},
        {"DOT": 1, "BLOCK_M": 32, "BLOCK_N": 16, "BLOCK_K": 64, "PRECISION": "tf32x3"},
    ])
    assert template.params["DOT"] == (1, 0)  # 4 output channels per group: the direct product is offered
    for m in results:
        assert m.status == "pass", f"{m.params}: {m.error}"


def test_conv_takes_the_ops_after_it_as_an_epilogue(tmp_path):
    init = "self.conv = nn.Conv2d(4, 16, 3); self.bias = nn.Parameter(torch.randn(16, 1, 1))"
    path = write_problem(tmp_path, "epi", "torch.tanh(torch.relu(self.conv(x)) + self.bias) * 0.5", [(2, 4, 7, 6)],
                         init=init)
    assert check(path).families == ["conv"]


def test_conv_then_norm_and_pool_are_separate_kernels(tmp_path):
    init = "self.conv = nn.Conv2d(4, 16, 3); self.norm = nn.GroupNorm(4, 16)"
    path = write_problem(tmp_path, "chain", "F.max_pool2d(self.norm(F.gelu(self.conv(x))), 2)", [(2, 4, 8, 7)],
                         init=init)
    assert check(path, looped=True).families == ["conv", "rowwise", "pointwise", "pool"]


def test_conv_parameters_and_constraints(tmp_path):
    path = write_problem(tmp_path, "c", "self.conv(x)", [(2, 16, 9, 8)], init="self.conv = nn.Conv2d(16, 64, 3)")
    template = build_template(load_problem(path)).template
    assert "DOT" not in template.params and template.params["PRECISION"] == ("ieee", "tf32x3")
    report = prune_space(template, H100_SXM)
    assert template.defaults in report.feasible and report.pruned
    for c in report.feasible:  # tiles fit shared memory and no block exceeds the GEMM (M=84, N=64, K=144)
        assert (c["BLOCK_M"] + c["BLOCK_N"]) * c["BLOCK_K"] * 4 * c["num_stages"] <= H100_SXM.smem_per_block_optin
        assert c["BLOCK_M"] <= 128 and c["BLOCK_N"] <= 64 and c["BLOCK_K"] <= 128
    depthwise = write_problem(tmp_path, "dw", "self.conv(x)", [(2, 8, 9, 8)], init="self.conv = nn.Conv2d(8, 8, 3, groups=8)")
    dw = build_template(load_problem(depthwise)).template
    assert dw.defaults["DOT"] == 0 and dw.defaults["BLOCK_N"] == 1  # one channel per group: direct product
    assert all(c["BLOCK_N"] == 1 for c in prune_space(dw, H100_SXM).feasible if c["DOT"] == 0)
