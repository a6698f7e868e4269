"""Which ATen ops a forward pass really executes, recorded at the dispatcher (not by regex).

Used twice: to describe a problem (its op kinds select skills and templates), and by the judge to
see whether a "custom" kernel merely calls the reference's compute ops. Calls into a compiled
extension or a Triton launch do not pass through the dispatcher, so they are invisible here:
exactly the work we want to count as custom.
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
    "rnn": "lstm gru rnn_tanh rnn_relu _thnn_fused_lstm_cell _thnn_fused_gru_cell",
    "loss": "mse_loss cross_entropy_loss nll_loss smooth_l1_loss huber_loss kl_div binary_cross_entropy "
    "triplet_margin_loss cosine_embedding_loss hinge_embedding_loss margin_ranking_loss",
}.items():
    for _name in _names.split():
        _KIND_BY_OP[_name] = _kind

_ELEMENTWISE = set(
    "add sub mul div relu gelu silu sigmoid tanh exp log sqrt rsqrt pow abs neg clamp clamp_min clamp_max "
    "where maximum minimum hardtanh hardsigmoid hardswish elu selu leaky_relu softplus softsign mish "
    "erf sin cos reciprocal sign threshold log1p expm1 logical_not eq ne lt le gt ge bitwise_and "
    "celu glu _log_softmax_backward_data fill masked_fill lerp addcmul addcdiv floor ceil round".split()
)

# kinds whose presence in a candidate means the reference's heavy lifting was handed back to torch
COMPUTE_KINDS = frozenset({"matmul", "conv", "conv_transpose", "softmax", "attention", "norm", "pool",
                           "reduction", "rnn", "loss"})


def _op_name(func: Any) -> str:
    packet = getattr(func, "overloadpacket", None)
    name = getattr(packet, "__name__", None) or str(func)
    return name.split(".")[-1] if "." in name else name


class OpRecorder(TorchDispatchMode):
    """Counts every ATen op that reaches the dispatcher while active."""

    def __init__(self):
        super().__init__()
        self.counts: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[_op_name(func)] += 1
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


def compute_ops(ops) -> set[str]:
    """The ops among `ops` whose kind is heavy compute (not elementwise or bookkeeping)."""
    return {name for name in ops if op_kind(name) in COMPUTE_KINDS}
