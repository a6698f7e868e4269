"""Which ATen ops a forward pass really executes, recorded at the dispatcher (not by regex).

Used twice: to describe a problem (its op kinds select skills and templates), and by the judge to
see how much of the reference's work a candidate still hands to torch (`work_counts`, the rule
sets in `kernelwright.rules`). A Triton launch does not pass through the dispatcher; ATen ops a
compiled extension calls from C++ do, and the judge tells the recorder where each op came from
(`OpRecorder(origin=...)`), so ops inside the candidate's own code land in their own bucket.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# ATen op name (overload packet) -> op kind; ops absent here are bookkeeping (views, copies, fills)
_KIND_BY_OP: dict[str, str] = {}
for _kind, _names in {
    "matmul": "mm addmm bmm baddbmm matmul linear addmv mv dot einsum _scaled_mm addbmm",
    "conv": "convolution _convolution conv1d conv2d conv3d cudnn_convolution mkldnn_convolution "
    "_slow_conv2d_forward slow_conv3d_forward",
    "conv_transpose": "conv_transpose1d conv_transpose2d conv_transpose3d slow_conv_transpose2d "
    "slow_conv_transpose3d cudnn_convolution_transpose",
    "softmax": "_softmax softmax _log_softmax log_softmax",
    "attention": "_scaled_dot_product_flash_attention _scaled_dot_product_efficient_attention "
    "scaled_dot_product_attention _scaled_dot_product_attention_math _scaled_dot_product_cudnn_attention "
    "_scaled_dot_product_flash_attention_for_cpu",
    "norm": "native_batch_norm _native_batch_norm_legit _native_batch_norm_legit_no_training "
    "native_layer_norm native_group_norm _fused_rms_norm rms_norm instance_norm batch_norm layer_norm "
    "group_norm linalg_vector_norm norm frobenius_norm",
    "pool": "max_pool1d max_pool2d max_pool3d max_pool2d_with_indices max_pool3d_with_indices avg_pool1d "
    "avg_pool2d avg_pool3d adaptive_avg_pool2d _adaptive_avg_pool2d adaptive_max_pool2d _adaptive_avg_pool3d",
    "reduction": "sum mean amax amin max min argmax argmin prod cumsum cumprod logsumexp var std var_mean "
    "std_mean any all",
    "rnn": "lstm gru rnn_tanh rnn_relu _thnn_fused_lstm_cell _thnn_fused_gru_cell mkldnn_rnn_layer _cudnn_rnn "
    "miopen_rnn",
    "loss": "mse_loss cross_entropy_loss nll_loss nll_loss_forward nll_loss2d_forward smooth_l1_loss huber_loss "
    "kl_div binary_cross_entropy triplet_margin_loss cosine_embedding_loss hinge_embedding_loss "
    "margin_ranking_loss",
}.items():
    for _name in _names.split():
        _KIND_BY_OP[_name] = _kind

_ELEMENTWISE = set(
    "add sub mul div relu gelu silu sigmoid tanh exp log sqrt rsqrt pow abs neg clamp clamp_min clamp_max "
    "where maximum minimum hardtanh hardsigmoid hardswish elu selu leaky_relu softplus softsign mish "
    "erf sin cos reciprocal sign threshold log1p expm1 logical_not eq ne lt le gt ge bitwise_and "
    "celu glu _log_softmax_backward_data fill masked_fill lerp addcmul addcdiv floor ceil round tril triu".split()
)

# ops that do no arithmetic on values: views and metadata, allocation and fills, copies and casts,
# concatenation and padding. A kernel's Python wrapper needs them; they are not "work" in a rule set.
# Ops that mark time, not compute: the profiler's ranges (`record_function`, which the judge's runner
# opens around forward and around each call of an extension's function).
BOOKKEEPING_NAMESPACES = ("profiler::",)
FREE_OPS = frozenset(
    "view _unsafe_view reshape _reshape_alias view_as t transpose permute expand expand_as squeeze unsqueeze "
    "flatten unflatten movedim select slice narrow split split_with_sizes unsafe_split chunk unbind diagonal "
    "as_strided alias detach lift_fresh lift contiguous clone copy _copy_from _to_copy to type_as "
    "empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like new_zeros ones ones_like "
    "new_ones full full_like new_full fill zero arange scalar_tensor resize set cat stack constant_pad_nd pad "
    "_local_scalar_dense item is_same_size sym_size sym_stride sym_numel sym_storage_offset _has_compatible_shallow_copy_type "
    "record_stream _conj _neg_view resolve_conj resolve_neg".split()
)

# kinds whose presence in a candidate means the reference's heavy lifting was handed back to torch
COMPUTE_KINDS = frozenset({"matmul", "conv", "conv_transpose", "softmax", "attention", "norm", "pool",
                           "reduction", "rnn", "loss"})


ATEN_NAMESPACES = frozenset({"aten", "prims", "prim"})


def _op_name(func: Any) -> str:
    """'mm' for aten ops; 'ns::name' for ops of other namespaces (custom ops)."""
    packet = getattr(func, "overloadpacket", None)
    name = getattr(packet, "__name__", None) or str(func)
    short = name.split(".")[-1] if "." in name else name
    namespace = getattr(func, "namespace", "aten")
    return short if namespace in ATEN_NAMESPACES else f"{namespace}::{short}"


PYTHON = "python"  # the bucket of ops the caller's own Python ran (the default origin)


class OpRecorder(TorchDispatchMode):
    """Counts every op that reaches the dispatcher while active.

    `origin(func)` names the bucket an op belongs to (default: every op is "python"); `counts` is
    the "python" bucket and `buckets` holds all of them. The judge sorts ops inside the candidate's
    extension calls into "extension" and ignores those inside Triton launches (`judge.own_code`).
    """

    def __init__(self, origin: Callable[[Any], str] | None = None):
        super().__init__()
        self.origin = origin
        self.buckets: dict[str, Counter[str]] = {PYTHON: Counter()}
        self.counts: Counter[str] = self.buckets[PYTHON]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        bucket = self.origin(func) if self.origin is not None else PYTHON
        self.buckets.setdefault(bucket, Counter())[_op_name(func)] += 1
        return func(*args, **(kwargs or {}))


def record_aten_ops(fn: Callable, *args, **kwargs) -> Counter:
    """Run fn(*args) and return how often each ATen op ran (by overload packet name, e.g. 'mm')."""
    recorder = OpRecorder()
    with recorder, torch.no_grad():
        fn(*args, **kwargs)
    return recorder.counts


def op_kind(name: str) -> str | None:
    base = name.rstrip("_")  # in-place variants: relu_ -> relu
    if base in _KIND_BY_OP:
        return _KIND_BY_OP[base]
    if base in _ELEMENTWISE:
        return "elementwise"
    return None


def op_kinds(ops) -> set[str]:
    """The kinds of work among `ops` (names or a Counter): matmul, conv, softmax, norm, ..."""
    return {k for k in (op_kind(name) for name in ops) if k}


def base_name(name: str) -> str:
    """An op's name without the in-place underscore (relu_ -> relu; _softmax stays)."""
    return name.rstrip("_") if name.endswith("_") and not name.endswith("__") else name


def work_kind(name: str) -> str | None:
    """The kind of work an op does, for the rule sets' counts: its op kind (matmul, conv, softmax,
    norm, pool, reduction, elementwise, ...), its own name for an op of no known kind (a custom op,
    a random generator, a sort), or None for a free op (views, allocation, fills, copies,
    concatenation)."""
    base = base_name(name)
    if base in FREE_OPS or base.lstrip("_") in FREE_OPS or base.startswith(BOOKKEEPING_NAMESPACES):
        return None
    return op_kind(name) or base


def work_counts(ops) -> Counter:
    """How many ops of each work kind `ops` (a Counter of op names) holds; free ops are left out."""
    counts: Counter[str] = Counter()
    for name, count in dict(ops).items():
        kind = work_kind(name)
        if kind is not None:
            counts[kind] += int(count)
    return counts


def compute_ops(ops) -> set[str]:
    """The ops among `ops` whose kind is heavy compute (not elementwise or bookkeeping)."""
    return {name for name in ops if op_kind(name) in COMPUTE_KINDS}


def forward_op_kinds(problem) -> list[str]:
    """The op kinds of one forward of `problem`'s reference (a `problem.Problem`), recorded on the
    meta device: nothing is computed, whatever the sizes."""
    with torch.device("meta"):
        torch.manual_seed(0)
        model = problem.Model(*problem.init_inputs(0))
        inputs = list(problem.module.get_inputs())
    return sorted(op_kinds(record_aten_ops(model, *inputs)))
