"""ATen pooling and convolution ops -> library IR `pool` and `conv` nodes.

Pooling: max_pool{1,2,3}d (also with indices, when the indices go unused), avg_pool{1,2,3}d,
adaptive_avg_pool{1,2,3}d (a mean over the window dims when the output is 1 per dim, a plain
average pool when the input divides evenly). Every window setting the reference's op takes
(kernel, stride, padding, dilation, ceil_mode, count_include_pad, divisor_override) is kept.

Convolution: conv{1,2,3}d (numeric or "valid"/"same" padding), conv_transpose{1,2,3}d and
aten.convolution, with stride, padding, dilation, groups and output_padding, as one `conv` node
whose args are (input, weight, bias) and whose output the graph's shape gives.
"""
from __future__ import annotations

from typing import Any

from .graph import example_shape
from .ir import CONV, POOL, IRNode, Unsupported
from .lowering import Lowering, Missing


def _arg(args: list, kwargs: dict, index: int, name: str, default: Any = None) -> Any:
    if len(args) > index:
        return args[index]
    return kwargs.get(name, default)


def ntuple(value: Any, n: int, what: str) -> tuple[int, ...]:
    """An int or int list of an n-d op as n ints (a single value repeats)."""
    values = [value] if isinstance(value, int) else list(value)
    if len(values) == 1:
        values = values * n
    if len(values) != n or not all(isinstance(v, int) for v in values):
        raise Unsupported(f"{what}={value!r} is not {n} integer(s)")
    return tuple(values)


def _window_input(x: Any, nd: int, op: str) -> IRNode:
    if not isinstance(x, IRNode) or not x.is_tensor or len(x.shape) < nd + 1:
        raise Unsupported(f"{op} of a value that is not a tensor with {nd} window dims")
    if x.dtype is None or not x.dtype.is_floating_point:
        raise Unsupported(f"{op} of a {x.dtype} tensor; the library pools float tensors only")
    return x


def _pool_node(lw: Lowering, fx_node, kind: str, x: IRNode, params: dict) -> IRNode:
    val = fx_node.meta.get("val")
    if isinstance(val, (tuple, list)):  # max_pool*_with_indices: (values, indices)
        val = val[0]
    shape = example_shape(val)
    if shape is None:
        raise Unsupported(f"the graph records no output shape for {kind} pooling")
    return lw.add(POOL, kind, [x], params=params, shape=shape, dtype=x.dtype)


def _max_pool(nd: int, with_indices: bool = False):
    def handler(lw, fx_node, overload, args, kwargs):
        op = f"max_pool{nd}d"
        x = _window_input(args[0], nd, op)
        kernel = ntuple(_arg(args, kwargs, 1, "kernel_size"), nd, "kernel_size")
        stride = _arg(args, kwargs, 2, "stride", []) or kernel
        params = {
            "kernel": kernel, "stride": ntuple(stride, nd, "stride"),
            "padding": ntuple(_arg(args, kwargs, 3, "padding", 0), nd, "padding"),
            "dilation": ntuple(_arg(args, kwargs, 4, "dilation", 1), nd, "dilation"),
            "ceil_mode": bool(_arg(args, kwargs, 5, "ceil_mode", False)),
        }
        node = _pool_node(lw, fx_node, "max", x, params)
        if with_indices:
            return node, Missing(f"the indices of {op} are used; the library returns the pooled values only")
        return node
    return handler


def _avg_pool(nd: int):
    def handler(lw, fx_node, overload, args, kwargs):
        op = f"avg_pool{nd}d"
        x = _window_input(args[0], nd, op)
        kernel = ntuple(_arg(args, kwargs, 1, "kernel_size"), nd, "kernel_size")
        stride = _arg(args, kwargs, 2, "stride", []) or kernel
        divisor = _arg(args, kwargs, 6, "divisor_override", None) if nd > 1 else None
        params = {
            "kernel": kernel, "stride": ntuple(stride, nd, "stride"),
            "padding": ntuple(_arg(args, kwargs, 3, "padding", 0), nd, "padding"), "dilation": (1,) * nd,
            "ceil_mode": bool(_arg(args, kwargs, 4, "ceil_mode", False)),
            "count_include_pad": bool(_arg(args, kwargs, 5, "count_include_pad", True)),
            "divisor": int(divisor) if divisor else 0,
        }
        return _pool_node(lw, fx_node, "avg", x, params)
    return handler


def _adaptive_avg_pool(nd: int):
    def handler(lw, fx_node, overload, args, kwargs):
        op = f"adaptive_avg_pool{nd}d"
        x = _window_input(args[0], nd, op)
        sizes = x.shape[-nd:]
        out = tuple(s if o is None else o for s, o in zip(sizes, ntuple(args[1], nd, "output_size"), strict=True))
        dims = tuple(range(len(x.shape) - nd, len(x.shape)))
        if all(o == 1 for o in out):  # a global average: a mean over the window dims
            node = lw.reduce("mean", x, dims, True)
            shape, dtype = lw.meta(fx_node)
            node.shape = shape or node.shape
            return node
        if any(s % o for s, o in zip(sizes, out, strict=True)):
            raise Unsupported(f"{op} from {list(sizes)} to {list(out)} (windows of unequal sizes)")
        kernel = tuple(s // o for s, o in zip(sizes, out, strict=True))
        params = {"kernel": kernel, "stride": kernel, "padding": (0,) * nd, "dilation": (1,) * nd,
                  "ceil_mode": False, "count_include_pad": True, "divisor": 0}
        return _pool_node(lw, fx_node, "avg", x, params)
    return handler


def _conv_node(lw: Lowering, fx_node, x: Any, weight: Any, bias: Any, nd: int, *, stride, padding, dilation,
               groups, transposed: bool, output_padding=0) -> IRNode:
    op = f"conv{'_transpose' if transposed else ''}{nd}d"
    x = _window_input(x, nd, op)
    if len(x.shape) != nd + 2:
        raise Unsupported(f"{op} of an unbatched input")
    if not isinstance(weight, IRNode) or not weight.is_tensor or len(weight.shape) != nd + 2:
        raise Unsupported(f"{op} with a weight that is not an {nd + 2}-d tensor")
    if weight.dtype != x.dtype or (isinstance(bias, IRNode) and bias.dtype != x.dtype):
        raise Unsupported(f"{op} of mixed dtypes")
    kernel = tuple(weight.shape[2:])
    dilation = ntuple(dilation, nd, "dilation")
    if isinstance(padding, str):
        padding = _string_padding(padding, kernel, dilation, ntuple(stride, nd, "stride"), op)
    params = {"stride": ntuple(stride, nd, "stride"), "padding": ntuple(padding, nd, "padding"), "dilation": dilation,
              "groups": int(groups), "transposed": bool(transposed), "kernel": kernel,
              "output_padding": ntuple(output_padding, nd, "output_padding")}
    shape, dtype = lw.meta(fx_node)
    if shape is None:
        raise Unsupported(f"the graph records no output shape for {op}")
    args = [x, weight] + ([bias] if isinstance(bias, IRNode) else [])
    return lw.add(CONV, op, args, params=params, shape=shape, dtype=dtype or x.dtype)


def _string_padding(padding: str, kernel: tuple, dilation: tuple, stride: tuple, op: str) -> tuple[int, ...]:
    if padding == "valid":
        return (0,) * len(kernel)
    totals = [d * (k - 1) for k, d in zip(kernel, dilation, strict=True)]
    if padding != "same" or any(t % 2 for t in totals) or any(s != 1 for s in stride):
        raise Unsupported(f"{op} with padding={padding!r} (asymmetric)")
    return tuple(t // 2 for t in totals)


def _conv(nd: int, transposed: bool):
    def handler(lw, fx_node, overload, args, kwargs):
        get = lambda i, name, default: _arg(args, kwargs, i, name, default)  # noqa: E731
        common = dict(stride=get(3, "stride", 1), padding=get(4, "padding", 0))
        if transposed:
            return _conv_node(lw, fx_node, args[0], args[1], get(2, "bias", None), nd, **common,
                              output_padding=get(5, "output_padding", 0), groups=get(6, "groups", 1),
                              dilation=get(7, "dilation", 1), transposed=True)
        return _conv_node(lw, fx_node, args[0], args[1], get(2, "bias", None), nd, **common,
                          dilation=get(5, "dilation", 1), groups=get(6, "groups", 1), transposed=False)
    return handler


def _convolution(lw, fx_node, overload, args, kwargs):
    x, weight, bias, stride, padding, dilation, transposed, output_padding, groups = args[:9]
    nd = len(weight.shape) - 2 if isinstance(weight, IRNode) and weight.is_tensor else 0
    if nd not in (1, 2, 3):
        raise Unsupported("aten.convolution over other than 1-3 dims")
    return _conv_node(lw, fx_node, x, weight, bias, nd, stride=stride, padding=padding, dilation=dilation,
                      groups=groups, transposed=bool(transposed), output_padding=output_padding)


HANDLERS: dict[str, Any] = {"convolution": _convolution, "_convolution": _convolution}
for _nd in (1, 2, 3):
    HANDLERS[f"max_pool{_nd}d"] = _max_pool(_nd)
    HANDLERS[f"max_pool{_nd}d_with_indices"] = _max_pool(_nd, with_indices=True)
    HANDLERS[f"avg_pool{_nd}d"] = _avg_pool(_nd)
    HANDLERS[f"adaptive_avg_pool{_nd}d"] = _adaptive_avg_pool(_nd)
    HANDLERS[f"_adaptive_avg_pool{_nd}d"] = _adaptive_avg_pool(_nd)
    HANDLERS[f"conv{_nd}d"] = _conv(_nd, transposed=False)
    HANDLERS[f"conv_transpose{_nd}d"] = _conv(_nd, transposed=True)
