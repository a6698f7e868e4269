"""The new template families compiled by Triton on a GPU (the CPU tests run the interpreter, which
does not compile): long rows split or looped, pooling, convolution with both products and the
fp32 precisions, each checked against PyTorch and timed in-process."""
import pytest

from kernelwright.problem import load_problem
from kernelwright.tune.inprocess import InProcessEvaluator
from kernelwright.tune.library import build_template
from kernelwright.tune.prune import prune_space

from .test_ops import write_problem

pytestmark = pytest.mark.gpu

CASES = {
    # name: (forward, init, shape, extra configurations as {param suffix: value})
    "softmax_long_rows": ("torch.softmax(x, dim=-1)", "", (64, 393216), [{"SPLIT": 1, "BLOCK_R": 4096}]),
    "log_softmax_few_rows": ("torch.log_softmax(x, dim=1)", "", (4, 393216), [{"SPLIT": 1, "BLOCK_R": 8192}]),
    "layer_norm_long": ("self.norm(x)", "self.norm = nn.LayerNorm(131072)", (16, 131072), [{"SPLIT": 8}]),
    "frobenius": ("x / torch.norm(x, p='fro')", "", (16, 64, 256, 256), []),
    "batch_norm": ("self.norm(x)", "self.norm = nn.BatchNorm2d(64)", (16, 64, 128, 128), [{"SPLIT": 1}]),
    "group_norm": ("self.norm(x)", "self.norm = nn.GroupNorm(8, 64)", (16, 64, 128, 128), []),
    "max_pool1d": ("F.max_pool1d(x, 8, stride=1, padding=4, dilation=3)", "", (16, 64, 8192), [{"BLOCK": 1024}]),
    "max_pool3d_ceil": ("F.max_pool3d(x, 3, stride=2, padding=1, dilation=3, ceil_mode=True)", "", (4, 16, 32, 32, 32),
                        [{"BLOCK": 128, "num_warps": 4}]),
    "avg_pool2d": ("F.avg_pool2d(x, 11)", "", (4, 32, 512, 512), []),
    "conv2d": ("self.conv(x)", "self.conv = nn.Conv2d(64, 128, 3)", (4, 64, 128, 128),
               [{"PRECISION": "tf32x3"}, {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "num_stages": 4}]),
    "conv3d_epilogue": ("torch.relu(self.conv(x)) * 0.5", "self.conv = nn.Conv3d(3, 64, 3)", (4, 3, 10, 64, 64), []),
    "conv_transpose2d_strided_grouped": (
        "self.conv(x)", "self.conv = nn.ConvTranspose2d(32, 64, (3, 5), stride=(2, 3), padding=(1, 2), dilation=(2, 1), "
        "groups=4)", (4, 32, 64, 64), [{"PRECISION": "tf32x3"}]),
    "conv_depthwise": ("self.conv(x)", "self.conv = nn.Conv2d(64, 64, (3, 7), groups=64)", (4, 64, 128, 128),
                       [{"DOT": 1, "BLOCK_N": 16, "BLOCK_K": 16, "num_stages": 3}]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_templates_compile_and_match_on_the_gpu(tmp_path, name):
    forward, init, shape, extra = CASES[name]
    problem = load_problem(write_problem(tmp_path, name, forward, [shape], init=init))
    template = build_template(problem).template
    prefix = template.groups[-1]
    feasible = prune_space(template.restrict(fixed={k: v for k, v in template.defaults.items()
                                                    if not k.startswith(prefix)})).feasible
    configs = [template.defaults] + [{**template.defaults, **{prefix + k: v for k, v in e.items()}} for e in extra]
    configs += feasible[:: max(1, len(feasible) // 2)][:2]  # two more from across the feasible space
    evaluator = InProcessEvaluator(problem, device="cuda", warmup_ms=5, rep_ms=20)
    for m in evaluator.evaluate(template, configs):
        assert m.status in ("pass", "pruned"), f"{m.params}: {m.error}"
    assert evaluator.evaluate(template, [template.defaults])[0].status == "pass"
