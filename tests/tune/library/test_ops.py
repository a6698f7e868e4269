"""Every op family of the library, generated and run under the Triton interpreter against PyTorch.

The problems here are small hand-written test problems (KernelBench format), one per op or
composition; each template's default instance must match the reference, and so must an instance
that walks the reduced extent in several chunks (the looped path of the rowwise kernel).
"""
import textwrap

import pytest

from kernelwright.problem import load_problem
from kernelwright.tune.inprocess import InProcessEvaluator
from kernelwright.tune.library import NoTemplate, build_template

# masked-off lanes of a tile may hold log(0) or 0/0 in the interpreter; they are never stored
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def write_problem(folder, name, forward, shapes, init="", init_args="[]"):
    """A KernelBench-format problem whose forward is `forward` over inputs x, y, ... of `shapes`."""
    args = ", ".join("xyzw"[: len(shapes)])
    inputs = ", ".join(f"torch.randn{tuple(s)}" for s in shapes)
    source = textwrap.dedent(f"""\
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class Model(nn.Module):
            def __init__(self, *args):
                super().__init__()
                {init or 'pass'}

            def forward(self, {args}):
                return {forward}


        def get_inputs():
            return [{inputs}]


        def get_init_inputs():
            return {init_args}
        """)
    path = folder / f"{name}.py"
    path.write_text(source)
    return path


def check(path, looped=False):
    """The default instance, and with `looped` one that walks the reduced extent in chunks of 16
    and (when the template can split rows) one that also splits each row over up to 4 programs."""
    problem = load_problem(path)
    match = build_template(problem)
    template = match.template
    configs = [template.defaults]
    if looped:
        small = {k: min(v) for k, v in template.params.items() if k.endswith("BLOCK_R")}
        assert small, "expected a rowwise kernel"
        configs.append({**template.defaults, **small})
        split = {k: 4 for k, v in template.params.items() if k.endswith("SPLIT") and 4 in v}
        if split:
            configs.append({**template.defaults, **small, **split})
    evaluator = InProcessEvaluator(problem, device="cpu", rep_ms=1, warmup_ms=0)
    for m in evaluator.evaluate(template, configs):
        assert m.status == "pass", f"{m.params}: {m.error}"
    return match


POINTWISE = {
    "relu": "torch.relu(x)",
    "gelu": "F.gelu(x)",
    "gelu_tanh": "F.gelu(x, approximate='tanh')",
    "swish": "torch.sigmoid(x) * x",
    "tanh": "torch.tanh(x * 3)",
    "silu_mish": "F.silu(x) + F.mish(x)",
    "softplus": "F.softplus(x * 4, beta=2.0, threshold=5.0)",
    "elu_selu_celu": "F.elu(x, alpha=0.7) + torch.selu(x) + F.celu(x, 1.5)",
    "leaky_hardtanh": "F.leaky_relu(x, 0.2) + F.hardtanh(x, -0.5, 0.5)",
    "hard_activations": "F.hardswish(x * 4) + F.hardsigmoid(x * 4) + F.relu6(x * 8)",
    "clamp": "torch.clamp(x, min=-0.3, max=0.4) + torch.clamp(x, max=0.1)",
    "exp_log": "torch.exp(x) - torch.log(torch.abs(x) + 1) + torch.log1p(torch.abs(x))",
    "roots": "torch.sqrt(torch.abs(x)) * torch.rsqrt(x * x + 1)",
    "powers": "x ** 3 + x ** 2 - 1 / (x * x + 2) + torch.abs(x) ** 0.5 + x ** 5",
    "where": "torch.where(x > 0, x, -x * 0.5)",
    "softsign_erf": "F.softsign(x) + torch.erf(x)",
    "arith_scalars": "torch.neg(x) + 2 - x / 3 - (1.5 - x) * 0.25",
    "sign_floor": "torch.sign(x) * torch.floor(x * 3)",
}


@pytest.mark.parametrize("name", sorted(POINTWISE))
def test_pointwise_ops(tmp_path, name):
    match = check(write_problem(tmp_path, name, POINTWISE[name], [(4, 6, 20)]))
    assert match.families == ["pointwise"]


def test_pointwise_two_inputs_and_broadcast_parameter(tmp_path):
    init = "self.bias = nn.Parameter(torch.randn(6, 1))"
    path = write_problem(tmp_path, "binary", "torch.maximum(x, y) + torch.minimum(x, y) * self.bias + x * y",
                         [(4, 6, 20), (4, 6, 20)], init=init)
    assert check(path).families == ["pointwise"]


ROWWISE = {
    "softmax_last": ("torch.softmax(x, dim=-1)", (6, 40)),
    "softmax_middle": ("torch.softmax(x, dim=1)", (3, 40, 5)),
    "log_softmax": ("torch.log_softmax(x * 4, dim=-1)", (6, 40)),
    "sum_keepdim_false": ("x.sum(dim=0)", (40, 7)),
    "mean_keepdim": ("x.mean(dim=-1, keepdim=True) * 2", (6, 40)),
    "amax_amin": ("torch.amax(x, dim=1) - torch.amin(x, dim=1)", (3, 40, 4)),
    "max_values": ("torch.max(x, dim=1)[0]", (3, 40, 4)),
    "logsumexp": ("torch.logsumexp(x, dim=-1)", (6, 40)),
    "var_std": ("torch.var(x, dim=-1) + torch.std(x, dim=-1)", (6, 40)),
    "l2_normalize": ("x / torch.norm(x, p=2, dim=1, keepdim=True)", (6, 40)),
    "frobenius": ("x / torch.norm(x, p='fro')", (5, 8)),
    "two_dims": ("x.sum(dim=(1, 2))", (3, 5, 8)),
    "apart_dims": ("x - x.mean(dim=(0, 2), keepdim=True)", (4, 6, 5)),
    "rms_norm_manual": ("x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + 1e-5)", (2, 40, 3)),
}


@pytest.mark.parametrize("name", sorted(ROWWISE))
def test_rowwise_reductions(tmp_path, name):
    forward, shape = ROWWISE[name]
    match = check(write_problem(tmp_path, name, forward, [shape]), looped=True)
    assert "rowwise" in match.families


NORMS = {
    "layer_norm": ("nn.LayerNorm(40)", "self.norm(x)", (6, 40)),
    "layer_norm_2d": ("nn.LayerNorm((5, 8))", "self.norm(x)", (3, 5, 8)),
    "rms_norm": ("nn.RMSNorm(40)", "self.norm(x)", (6, 40)),
    "batch_norm_1d": ("nn.BatchNorm1d(40)", "self.norm(x)", (48, 40)),
    "batch_norm_2d": ("nn.BatchNorm2d(4)", "self.norm(x)", (6, 4, 5, 3)),
    "instance_norm": ("nn.InstanceNorm2d(4)", "self.norm(x)", (2, 4, 5, 8)),
    "group_norm": ("nn.GroupNorm(2, 4)", "self.norm(x)", (2, 4, 5, 8)),
}


@pytest.mark.parametrize("name", sorted(NORMS))
def test_norms(tmp_path, name):
    module, forward, shape = NORMS[name]
    check(write_problem(tmp_path, name, forward, [shape], init=f"self.norm = {module}"), looped=True)


GEMMS = {
    "linear_gelu": ("self.fc = nn.Linear(24, 40)", "F.gelu(self.fc(x) * 0.5)", [(20, 24)]),
    "linear_3d_input": ("self.fc = nn.Linear(24, 40)", "torch.relu(self.fc(x)) + 1", [(2, 10, 24)]),
    "matmul": ("", "torch.matmul(x, y)", [(20, 24), (24, 40)]),
    "transposed_b": ("", "torch.matmul(x, y.T)", [(20, 24), (40, 24)]),
    "bmm_residual": ("", "torch.bmm(x, y) + z", [(3, 20, 24), (3, 24, 40), (3, 20, 40)]),
    "broadcast_batch": ("", "torch.matmul(x, y)", [(3, 20, 24), (24, 40)]),
    "addmm": ("", "torch.addmm(z, x, y, beta=0.5, alpha=2.0)", [(20, 24), (24, 40), (40,)]),
    "einsum_4d": ("", "torch.einsum('bijl,lk->bijk', x, y)", [(2, 3, 5, 24), (24, 40)]),
    "einsum_transposed": ("", "torch.einsum('mk,nk->mn', x, y)", [(20, 24), (40, 24)]),
}


@pytest.mark.parametrize("name", sorted(GEMMS))
def test_gemm_with_epilogue(tmp_path, name):
    init, forward, shapes = GEMMS[name]
    match = check(write_problem(tmp_path, name, forward, shapes, init=init))
    assert match.families[0] == "gemm_epilogue"


def test_gemm_then_softmax_is_two_kernels(tmp_path):
    path = write_problem(tmp_path, "gemm_softmax", "torch.softmax(F.gelu(self.fc(x)), dim=1)", [(20, 24)],
                         init="self.fc = nn.Linear(24, 40)")
    match = check(path, looped=True)
    assert match.families == ["gemm_epilogue", "rowwise"]
    assert match.template.groups == ["g0_", "g1_"]


def test_unsupported_op_is_declined_with_its_name(tmp_path):
    path = write_problem(tmp_path, "cumsum", "torch.cumsum(x, dim=1)", [(4, 20)])
    with pytest.raises(NoTemplate, match="cumsum"):
        build_template(load_problem(path))


def test_random_op_is_declined(tmp_path):
    path = write_problem(tmp_path, "dropout", "F.dropout(x, p=0.5, training=True)", [(4, 20)])
    with pytest.raises(NoTemplate, match="random"):
        build_template(load_problem(path))


HOST_AND_GRAPH = {
    "scalar_from_shape": ("x / x.shape[-1] + x.size(0)", [(4, 6, 20)], "", ["pointwise"]),
    "view_between": ("torch.relu(x).view(x.size(0), -1).sum(dim=1) * 2", [(4, 6, 5)], "", ["pointwise", "rowwise"]),
    "permute_then_softmax": ("torch.softmax(x.permute(0, 2, 1) * 3, dim=-1)", [(4, 6, 5)], "", ["rowwise"]),
    "two_outputs": ("(torch.relu(x), torch.sigmoid(x).sum(dim=-1))", [(4, 6, 5)], "", ["rowwise"]),
    "residual_after_linear": ("self.fc(x) + x", [(8, 16)], "self.fc = nn.Linear(16, 16)", ["gemm_epilogue"]),
    "tensor_made_in_forward": ("torch.min(x, torch.tensor(0.25)) * 2", [(4, 6, 5)], "", ["pointwise"]),
    "tensor_made_on_the_input_device": ("torch.min(x, torch.tensor(0.25, device=x.device))", [(4, 6, 5)], "",
                                        ["pointwise"]),
    "linear_chain": ("self.fc2(torch.relu(self.fc1(x)))", [(8, 16)],
                     "self.fc1 = nn.Linear(16, 32); self.fc2 = nn.Linear(32, 16)", ["gemm_epilogue", "gemm_epilogue"]),
}


@pytest.mark.parametrize("name", sorted(HOST_AND_GRAPH))
def test_host_ops_scalars_and_kernel_boundaries(tmp_path, name):
    forward, shapes, init, families = HOST_AND_GRAPH[name]
    assert check(write_problem(tmp_path, name, forward, shapes, init=init)).families == families


def test_gemm_split_k_is_declared_where_k_is_long_and_every_split_is_correct(tmp_path):
    """Issue 33, point 2: split-K is a declared choice, active only when K is long and the output
    tiles leave the GPU short of programs; each split factor computes the same product and epilogue."""
    from kernelwright.tune.hardware import H100_SXM
    from kernelwright.tune.prune import prune_space

    path = write_problem(tmp_path, "long_k", "F.gelu(torch.bmm(x, y) + z)", [(2, 8, 512), (2, 512, 24), (2, 8, 24)])
    template = check(path).template
    assert template.kinds()["SPLIT_K"] == "split" and template.kinds()["GROUP_M"] == "order"
    feasible = prune_space(template, H100_SXM).feasible
    assert {c["SPLIT_K"] for c in feasible} == {1, 2, 4, 8}
    assert all(c["SPLIT_K"] * c["BLOCK_K"] * 2 <= 512 for c in feasible)
    configs = [{**template.defaults, "BLOCK_K": 16, "SPLIT_K": 4}, {**template.defaults, "BLOCK_K": 32, "SPLIT_K": 8}]
    evaluator = InProcessEvaluator(load_problem(path), device="cpu", rep_ms=1, warmup_ms=0)
    for m in evaluator.evaluate(template, configs):
        assert m.status == "pass", f"{m.params}: {m.error}"
    short = check(write_problem(tmp_path, "short_k", "torch.matmul(x, y)", [(20, 24), (24, 40)])).template
    assert {c["SPLIT_K"] for c in prune_space(short, H100_SXM).feasible} == {1}


def test_pointwise_persistent_grid_is_declared_for_large_tensors_and_correct(tmp_path):
    """The persistent grid (a wave of programs looping over blocks) is a declared choice where the
    blocks outnumber two waves of the H100's SMs; its instance computes what the one-shot grid does."""
    from kernelwright.tune.hardware import H100_SXM
    from kernelwright.tune.prune import prune_space

    template = check(write_problem(tmp_path, "big", "F.gelu(x) * 2", [(300, 128)])).template
    assert template.kinds()["GRID"] == "grid" and "GRID" in template.categorical
    feasible = prune_space(template, H100_SXM).feasible
    persistent = [c for c in feasible if c["GRID"] == "persistent"]
    assert persistent and all(-(-300 * 128 // c["BLOCK"]) > 2 * H100_SXM.sm_count for c in persistent)
    config = {**template.defaults, "BLOCK": 128, "num_warps": 4, "GRID": "persistent"}
    evaluator = InProcessEvaluator(load_problem(tmp_path / "big.py"), device="cpu", rep_ms=1, warmup_ms=0)
    (m,) = evaluator.evaluate(template, [config])
    assert m.status == "pass", m.error
    small = check(write_problem(tmp_path, "small", "torch.relu(x)", [(4, 6, 20)])).template
    assert {c["GRID"] for c in prune_space(small, H100_SXM).feasible} == {"oneshot"}
