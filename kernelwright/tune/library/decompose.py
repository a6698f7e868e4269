"""ATen op -> library IR: pointwise ops by table, compound ops (softmax, norms, logsumexp, var,
linear, addmm, ...) decomposed into pointwise and reduce nodes.

Each handler takes (lowering, fx node, overload name, args, kwargs) and returns the IR value.
Decompositions follow the ATen definitions: biased variance for the norms, max-subtraction in
softmax and logsumexp, `approximate` for gelu, `beta`/`threshold` for softplus.
"""
from __future__ import annotations

from typing import Any

import torch

from .decompose_nn import HANDLERS as _NN_HANDLERS
from .ir import IRNode, Unsupported
from .lowering import Lowering, Missing, matmul_node, normalize_dims


def _arg(args: list, kwargs: dict, index: int, name: str, default: Any = None) -> Any:
    if len(args) > index:
        return args[index]
    return kwargs.get(name, default)


def _final(lw: Lowering, node: IRNode, fx_node) -> IRNode:
    """Give the last node of a decomposition the shape and dtype the graph recorded."""
    shape, dtype = lw.meta(fx_node)
    if shape is not None:
        node.shape = shape
    if dtype is not None:
        node.dtype = dtype
    return node


def _scalar_or_node(x: Any) -> Any:
    if isinstance(x, (IRNode, int, float, bool)) or x is None:
        return x
    raise Unsupported(f"operand {x!r} is neither a tensor nor a number")


# -- pointwise ----------------------------------------------------------------------------------
_UNARY_PLAIN = [
    "neg", "abs", "exp", "exp2", "log", "log2", "log10", "log1p", "expm1", "sqrt", "rsqrt", "reciprocal",
    "sin", "cos", "sigmoid", "tanh", "relu", "erf", "floor", "ceil", "sign", "logical_not", "square", "silu",
    "mish", "hardsigmoid", "hardswish", "softsign", "selu",
]
# op -> ordered (name, default) of its scalar parameters after the input
_UNARY_PARAMS = {
    "gelu": [("approximate", "none")],
    "softplus": [("beta", 1.0), ("threshold", 20.0)],
    "elu": [("alpha", 1.0), ("scale", 1.0), ("input_scale", 1.0)],
    "celu": [("alpha", 1.0)],
    "leaky_relu": [("slope", 0.01)],
    "hardtanh": [("lo", -1.0), ("hi", 1.0)],
    "threshold": [("threshold", 0.0), ("value", 0.0)],
}
_KW_ALIASES = {"negative_slope": "slope", "min_val": "lo", "max_val": "hi"}


def _unary(op: str):
    def handler(lw, fx_node, overload, args, kwargs):
        return _final(lw, lw.pw(op, args[0]), fx_node)
    return handler


def _unary_params(op: str):
    spec = _UNARY_PARAMS[op]

    def handler(lw, fx_node, overload, args, kwargs):
        kwargs = {_KW_ALIASES.get(k, k): v for k, v in kwargs.items()}
        params = {}
        for i, (name, default) in enumerate(spec):
            value = args[i + 1] if len(args) > i + 1 else kwargs.get(name, default)
            if isinstance(value, IRNode):
                raise Unsupported(f"{op} with a tensor {name} is not in the library")
            params[name] = value
        if op == "gelu" and params["approximate"] not in ("none", "tanh"):
            raise Unsupported(f"gelu approximate={params['approximate']!r}")
        return _final(lw, lw.pw(op, args[0], params=params), fx_node)
    return handler


def _binary(op: str, scaled: bool = False, reverse: bool = False):
    def handler(lw, fx_node, overload, args, kwargs):
        a, b = _scalar_or_node(args[0]), _scalar_or_node(args[1])
        alpha = _arg(args, kwargs, 2, "alpha", 1) if scaled else 1
        if reverse:
            a, b = b, a
        if alpha != 1:
            b = lw.pw("mul", b, alpha) if isinstance(b, IRNode) else b * alpha
        if not isinstance(a, IRNode) and not isinstance(b, IRNode):
            raise Unsupported(f"{op} of two numbers")
        return _final(lw, lw.pw(op, a, b), fx_node)
    return handler


def _div(lw, fx_node, overload, args, kwargs):
    mode = _arg(args, kwargs, 2, "rounding_mode", None)
    out = lw.pw("div", _scalar_or_node(args[0]), _scalar_or_node(args[1]))
    if mode == "floor":
        out = lw.pw("floor", out)
    elif mode == "trunc":
        out = lw.pw("where", lw.pw("lt", out, 0.0), lw.pw("ceil", out), lw.pw("floor", out))
    elif mode is not None:
        raise Unsupported(f"div rounding_mode={mode!r}")
    return _final(lw, out, fx_node)


def _clamp(lw, fx_node, overload, args, kwargs):
    x = args[0]
    lo, hi = _arg(args, kwargs, 1, "min"), _arg(args, kwargs, 2, "max")
    if isinstance(lo, IRNode) or isinstance(hi, IRNode):
        out = x
        if lo is not None:
            out = lw.pw("maximum", out, lo)
        if hi is not None:
            out = lw.pw("minimum", out, hi)
        return _final(lw, out, fx_node)
    return _final(lw, lw.pw("clamp", x, params={"lo": lo, "hi": hi}), fx_node)


def _clamp_side(side: str):
    def handler(lw, fx_node, overload, args, kwargs):
        bound = args[1]
        if isinstance(bound, IRNode):
            return _final(lw, lw.pw("maximum" if side == "lo" else "minimum", args[0], bound), fx_node)
        return _final(lw, lw.pw("clamp", args[0], params={side: bound}), fx_node)
    return handler


def _relu6(lw, fx_node, overload, args, kwargs):
    return _final(lw, lw.pw("hardtanh", args[0], params={"lo": 0.0, "hi": 6.0}), fx_node)


def _pow(lw, fx_node, overload, args, kwargs):
    base, exponent = args[0], args[1]
    if isinstance(base, IRNode) and not isinstance(exponent, IRNode):
        return _final(lw, lw.pw("pow_scalar", base, params={"exponent": float(exponent)}), fx_node)
    if not isinstance(base, IRNode):
        if base <= 0:
            raise Unsupported(f"pow with scalar base {base}")
        return _final(lw, lw.pw("scalar_pow", exponent, params={"base": float(base)}), fx_node)
    return _final(lw, lw.pw("pow", base, exponent), fx_node)


def _minmax_binary(op: str):
    def handler(lw, fx_node, overload, args, kwargs):
        if overload in ("other", "", "default") and len(args) > 1 and isinstance(args[1], IRNode):
            return _final(lw, lw.pw(op, args[0], args[1]), fx_node)
        raise Unsupported(f"{op} form {overload} is not in the library")
    return handler


def _where(lw, fx_node, overload, args, kwargs):
    if overload not in ("self", "ScalarSelf", "ScalarOther", "Scalar"):
        raise Unsupported(f"where.{overload}")
    return _final(lw, lw.pw("where", *[_scalar_or_node(a) for a in args[:3]]), fx_node)


def _addc(op: str):
    def handler(lw, fx_node, overload, args, kwargs):
        value = _arg(args, kwargs, 3, "value", 1.0)
        return _final(lw, lw.pw(op, args[0], args[1], args[2], params={"value": value}), fx_node)
    return handler


def _lerp(lw, fx_node, overload, args, kwargs):
    return _final(lw, lw.pw("lerp", args[0], args[1], _scalar_or_node(args[2])), fx_node)


def _masked_fill(lw, fx_node, overload, args, kwargs):
    return _final(lw, lw.pw("where", args[1], _scalar_or_node(args[2]), args[0]), fx_node)


def _to_copy(lw, fx_node, overload, args, kwargs):
    if kwargs.get("device") is not None:
        raise Unsupported("a device move inside forward")
    dtype = kwargs.get("dtype")
    if overload.startswith("dtype") and len(args) > 1:
        dtype = args[1]
    x = args[0]
    if dtype is None or dtype == x.dtype:
        return x
    if not dtype.is_floating_point:
        raise Unsupported(f"a cast to {dtype}")
    node = lw.pw("cast", x, params={"dtype": str(dtype).replace("torch.", "")}, dtype=dtype)
    return _final(lw, node, fx_node)


def _dropout(lw, fx_node, overload, args, kwargs):
    p, train = _arg(args, kwargs, 1, "p", 0.5), _arg(args, kwargs, 2, "train", True)
    if p == 0 or not train:
        return args[0]
    raise Unsupported(f"dropout with p={p} in training mode is random")


# -- reductions ---------------------------------------------------------------------------------
def _sum_mean(kind: str):
    def handler(lw, fx_node, overload, args, kwargs):
        x = args[0]
        if overload == "default":
            dims, keepdim = None, False
        else:
            dims, keepdim = _arg(args, kwargs, 1, "dim"), _arg(args, kwargs, 2, "keepdim", False)
        return _final(lw, lw.reduce(kind, x, dims, bool(keepdim)), fx_node)
    return handler


def _amax_amin(kind: str):
    def handler(lw, fx_node, overload, args, kwargs):
        dims, keepdim = _arg(args, kwargs, 1, "dim", ()), _arg(args, kwargs, 2, "keepdim", False)
        return _final(lw, lw.reduce(kind, args[0], dims, bool(keepdim)), fx_node)
    return handler


def _max_min(kind: str):
    """max.dim / min.dim return (values, indices): values only; max.default reduces everything."""
    def handler(lw, fx_node, overload, args, kwargs):
        if overload == "default":
            return _final(lw, lw.reduce(kind, args[0], None, False), fx_node)
        if overload == "dim":
            dim, keepdim = args[1], _arg(args, kwargs, 2, "keepdim", False)
            values = lw.reduce(kind, args[0], [dim], bool(keepdim))
            return values, Missing(f"the indices of {kind}(dim=...) are used; the library returns values only")
        return _minmax_binary("maximum" if kind == "max" else "minimum")(lw, fx_node, overload, args, kwargs)
    return handler


def _logsumexp(lw, fx_node, overload, args, kwargs):
    x, dims, keepdim = args[0], normalize_dims(args[1], len(args[0].shape)), _arg(args, kwargs, 2, "keepdim", False)
    m = lw.reduce("max", x, dims, True)
    s = lw.reduce("sum", lw.pw("exp", lw.pw("sub", x, m)), dims, True)
    out = lw.pw("add", lw.pw("log", s), m)
    return _final(lw, lw.squeeze(out, dims, bool(keepdim)), fx_node)


def _var_std(kind: str):
    def handler(lw, fx_node, overload, args, kwargs):
        x = args[0]
        dims = _arg(args, kwargs, 1, "dim")
        if overload == "correction" or overload == "correction_names":
            correction = kwargs.get("correction", args[2] if len(args) > 2 else None)
            keepdim = kwargs.get("keepdim", args[3] if len(args) > 3 else False)
            correction = 1 if correction is None else correction
        elif overload == "dim":
            correction = 1 if _arg(args, kwargs, 2, "unbiased", True) else 0
            keepdim = _arg(args, kwargs, 3, "keepdim", False)
        else:
            correction, keepdim = 1 if _arg(args, kwargs, 1, "unbiased", True) else 0, False
            dims = None
        dims = normalize_dims(dims, len(x.shape))
        mean = lw.reduce("mean", x, dims, True)
        d = lw.pw("sub", x, mean)
        s2 = lw.reduce("sum", lw.pw("mul", d, d), dims, True)
        out = lw.pw("div_count", s2, params={"offset": -float(correction)})
        if kind == "std":
            out = lw.pw("sqrt", out)
        return _final(lw, lw.squeeze(out, dims, bool(keepdim)), fx_node)
    return handler


def _vector_norm(lw, fx_node, overload, args, kwargs):
    x = args[0]
    if _packet_name(fx_node) == "norm":
        order = _arg(args, kwargs, 1, "p", 2)
        dims, keepdim = _arg(args, kwargs, 2, "dim"), _arg(args, kwargs, 3, "keepdim", False)
    else:
        order = _arg(args, kwargs, 1, "ord", 2)
        dims, keepdim = _arg(args, kwargs, 2, "dim"), _arg(args, kwargs, 3, "keepdim", False)
    order = 2 if order is None else order
    dims = normalize_dims(dims, len(x.shape))
    if order == 2:
        out = lw.pw("sqrt", lw.reduce("sum", lw.pw("mul", x, x), dims, True))
    elif order == 1:
        out = lw.reduce("sum", lw.pw("abs", x), dims, True)
    elif order in (float("inf"), float("-inf")):
        out = lw.reduce("max" if order > 0 else "min", lw.pw("abs", x), dims, True)
    elif isinstance(order, (int, float)) and order > 0:
        powered = lw.pw("pow_scalar", lw.pw("abs", x), params={"exponent": float(order)})
        out = lw.pw("pow_scalar", lw.reduce("sum", powered, dims, True), params={"exponent": 1.0 / order})
    else:
        raise Unsupported(f"vector norm of order {order}")
    return _final(lw, lw.squeeze(out, dims, bool(keepdim)), fx_node)


def _packet_name(fx_node) -> str:
    packet = getattr(fx_node.target, "overloadpacket", None)
    return packet.__name__ if packet is not None else ""


def _softmax(log: bool):
    def handler(lw, fx_node, overload, args, kwargs):
        x = args[0]
        dims = normalize_dims(args[1], len(x.shape))
        m = lw.reduce("max", x, dims, True)
        shifted = lw.pw("sub", x, m)
        e = lw.pw("exp", shifted)
        s = lw.reduce("sum", e, dims, True)
        out = lw.pw("sub", shifted, lw.pw("log", s)) if log else lw.pw("div", e, s)
        return _final(lw, out, fx_node)
    return handler


def _normalize(lw: Lowering, x: IRNode, dims, eps: float) -> IRNode:
    """(x - mean) / sqrt(var + eps) over `dims`, biased variance (as every ATen norm)."""
    mean = lw.reduce("mean", x, dims, True)
    d = lw.pw("sub", x, mean)
    var = lw.reduce("mean", lw.pw("mul", d, d), dims, True)
    return lw.pw("mul", d, lw.pw("rsqrt", lw.pw("add", var, float(eps))))


def _affine(lw: Lowering, y: IRNode, weight, bias) -> IRNode:
    if weight is not None:
        y = lw.pw("mul", y, weight)
    if bias is not None:
        y = lw.pw("add", y, bias)
    return y


def _channel_view(lw: Lowering, t: Any, rank: int) -> Any:
    """A per-channel (C,) tensor as (C, 1, ..., 1) so it broadcasts over dim 1 of a rank-`rank` input."""
    if not isinstance(t, IRNode) or rank <= 2:
        return t
    shape = [t.shape[0]] + [1] * (rank - 2)
    return lw.host(torch.ops.aten.view.default, [t, shape], shape=tuple(shape), dtype=t.dtype)


def _layer_norm(lw, fx_node, overload, args, kwargs):
    x, normalized = args[0], args[1]
    weight, bias = _arg(args, kwargs, 2, "weight"), _arg(args, kwargs, 3, "bias")
    eps = _arg(args, kwargs, 4, "eps", 1e-5)
    dims = tuple(range(len(x.shape) - len(normalized), len(x.shape)))
    out = _final(lw, _affine(lw, _normalize(lw, x, dims, eps), weight, bias), fx_node)
    if _packet_name(fx_node) == "native_layer_norm":
        return out, Missing("native_layer_norm mean"), Missing("native_layer_norm rstd")
    return out


def _rms_norm(lw, fx_node, overload, args, kwargs):
    x, normalized = args[0], args[1]
    weight, eps = _arg(args, kwargs, 2, "weight"), _arg(args, kwargs, 3, "eps")
    eps = torch.finfo(x.dtype).eps if eps is None else eps
    dims = tuple(range(len(x.shape) - len(normalized), len(x.shape)))
    ms = lw.reduce("mean", lw.pw("mul", x, x), dims, True)
    y = lw.pw("mul", x, lw.pw("rsqrt", lw.pw("add", ms, float(eps))))
    return _final(lw, _affine(lw, y, weight, None), fx_node)


def _batch_norm(lw, fx_node, overload, args, kwargs):
    x, weight, bias, mean, var = args[:5]
    training, eps = args[5], args[7]
    rank = len(x.shape)
    weight, bias = _channel_view(lw, weight, rank), _channel_view(lw, bias, rank)
    if training:
        dims = tuple(d for d in range(rank) if d != 1)
        y = _normalize(lw, x, dims, eps)
    else:
        mean, var = _channel_view(lw, mean, rank), _channel_view(lw, var, rank)
        y = lw.pw("mul", lw.pw("sub", x, mean), lw.pw("rsqrt", lw.pw("add", var, float(eps))))
    return _final(lw, _affine(lw, y, weight, bias), fx_node)


def _instance_norm(lw, fx_node, overload, args, kwargs):
    x, weight, bias, mean, var, use_input_stats, _, eps = args[:8]
    if not use_input_stats:
        raise Unsupported("instance_norm with running statistics")
    rank = len(x.shape)
    y = _normalize(lw, x, tuple(range(2, rank)), eps)
    y = _affine(lw, y, _channel_view(lw, weight, rank), _channel_view(lw, bias, rank))
    return _final(lw, y, fx_node)


def _group_norm(lw, fx_node, overload, args, kwargs):
    """Normalise x viewed as (N, G, rest), view back, then the per-channel affine."""
    x, groups = args[0], args[1]
    weight, bias = _arg(args, kwargs, 2, "weight"), _arg(args, kwargs, 3, "bias")
    eps = _arg(args, kwargs, 4, "eps", 1e-5)
    n = x.shape[0]
    rest = 1
    for s in x.shape[1:]:
        rest *= s
    sizes = [lw.host(torch.ops.aten.sym_size.int, [x, d]) for d in range(len(x.shape))]
    grouped = lw.host(torch.ops.aten.view.default, [x, [sizes[0], groups, -1]],
                      shape=(n, groups, rest // groups), dtype=x.dtype)
    y = _normalize(lw, grouped, (2,), eps)
    back = lw.host(torch.ops.aten.view.default, [y, sizes], shape=tuple(x.shape), dtype=y.dtype)
    rank = len(x.shape)
    out = _affine(lw, back, _channel_view(lw, weight, rank), _channel_view(lw, bias, rank))
    if out is back:
        out = lw.pw("identity", back)
    return _final(lw, out, fx_node)


# -- matmul family ------------------------------------------------------------------------------
def _mm(lw, fx_node, overload, args, kwargs):
    return matmul_node(lw, args[0], args[1], fx_node)


def _einsum(lw, fx_node, overload, args, kwargs):
    """Two-operand contractions that are a matmul as written ("bijl,lk->bijk"), or with the
    second operand transposed ("mk,nk->mn")."""
    equation, operands = args[0], args[1]
    if len(operands) != 2 or "->" not in equation or "..." in equation:
        raise Unsupported(f"einsum {equation!r} is not a two-operand contraction the library writes as a matmul")
    (a_idx, b_idx), out = equation.replace(" ", "").split("->")[0].split(","), equation.replace(" ", "").split("->")[1]
    a, b = operands
    contracted = (set(a_idx) & set(b_idx)) - set(out)
    if len(contracted) != 1 or len(set(a_idx)) != len(a_idx) or len(set(b_idx)) != len(b_idx) or len(b_idx) < 2:
        raise Unsupported(f"einsum {equation!r} is not a single contraction")
    k = contracted.pop()
    batch_ok = a_idx[:-2].endswith(b_idx[:-2])
    if a_idx[-1] == k and b_idx[-2] == k and out == a_idx[:-1] + b_idx[-1] and batch_ok:
        return matmul_node(lw, a, b, fx_node)
    if a_idx[-1] == k and b_idx[-1] == k and out == a_idx[:-1] + b_idx[-2] and batch_ok:
        shape = (*b.shape[:-2], b.shape[-1], b.shape[-2])
        bt = lw.host(torch.ops.aten.transpose.int, [b, -1, -2], shape=shape, dtype=b.dtype)
        return matmul_node(lw, a, bt, fx_node)
    raise Unsupported(f"einsum {equation!r} is not in matmul form")


def _linear(lw, fx_node, overload, args, kwargs):
    x, weight = args[0], args[1]
    bias = _arg(args, kwargs, 2, "bias")
    if len(weight.shape) != 2:
        raise Unsupported("linear with a weight that is not 2-D")
    wt = lw.host(torch.ops.aten.t.default, [weight], shape=(weight.shape[1], weight.shape[0]), dtype=weight.dtype)
    out_shape, _ = lw.meta(fx_node)
    mm = matmul_node(lw, x, wt, fx_node)
    if bias is None:
        return mm
    return _final(lw, lw.pw("add", mm, bias, shape=out_shape), fx_node)


def _addmm(lw, fx_node, overload, args, kwargs):
    bias, a, b = args[0], args[1], args[2]
    beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
    mm = matmul_node(lw, a, b, fx_node)
    if alpha != 1:
        mm = lw.pw("mul", mm, alpha)
    scaled = lw.pw("mul", bias, beta) if beta != 1 else bias
    if beta == 0:
        return _final(lw, mm, fx_node)
    return _final(lw, lw.pw("add", mm, scaled, shape=mm.shape), fx_node)


HANDLERS: dict[str, Any] = {}
for _op in _UNARY_PLAIN:
    HANDLERS[_op] = _unary(_op)
for _op in _UNARY_PARAMS:
    HANDLERS[_op] = _unary_params(_op)
HANDLERS.update({
    "add": _binary("add", scaled=True), "sub": _binary("sub", scaled=True), "rsub": _binary("sub", True, True),
    "mul": _binary("mul"), "div": _div, "true_divide": _div,
    "maximum": _binary("maximum"), "minimum": _binary("minimum"), "fmax": _binary("maximum"),
    "fmin": _binary("minimum"),
    "gt": _binary("gt"), "lt": _binary("lt"), "ge": _binary("ge"), "le": _binary("le"), "eq": _binary("eq"),
    "ne": _binary("ne"), "logical_and": _binary("logical_and"), "logical_or": _binary("logical_or"),
    "clamp": _clamp, "clip": _clamp, "clamp_min": _clamp_side("lo"), "clamp_max": _clamp_side("hi"),
    "relu6": _relu6, "pow": _pow, "where": _where, "addcmul": _addc("addcmul"), "addcdiv": _addc("addcdiv"),
    "lerp": _lerp, "masked_fill": _masked_fill, "_to_copy": _to_copy, "to": _to_copy, "type_as": None,
    "dropout": _dropout, "feature_dropout": _dropout,
    "sum": _sum_mean("sum"), "mean": _sum_mean("mean"), "amax": _amax_amin("max"), "amin": _amax_amin("min"),
    "max": _max_min("max"), "min": _max_min("min"), "logsumexp": _logsumexp,
    "var": _var_std("var"), "std": _var_std("std"), "linalg_vector_norm": _vector_norm, "norm": _vector_norm,
    "softmax": _softmax(False), "_softmax": _softmax(False), "log_softmax": _softmax(True),
    "_log_softmax": _softmax(True),
    "layer_norm": _layer_norm, "native_layer_norm": _layer_norm, "rms_norm": _rms_norm,
    "batch_norm": _batch_norm, "instance_norm": _instance_norm, "group_norm": _group_norm,
    "mm": _mm, "bmm": _mm, "matmul": _mm, "linear": _linear, "addmm": _addmm, "einsum": _einsum,
})
HANDLERS = {k: v for k, v in HANDLERS.items() if v is not None}
HANDLERS.update(_NN_HANDLERS)
