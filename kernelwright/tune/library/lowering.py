"""The toolkit that lowers ATen ops into the library IR (ir.py): the `Lowering` state (values of
graph nodes, node creation, metadata), the op tables, and helpers the op handlers share
(decompose.py, decompose_nn.py). The entry point, `lower()`, is in lower.py.
"""
from __future__ import annotations

import operator
from typing import Any

import torch

from . import exprs
from .graph import Captured, example_shape, hint
from .ir import HOST, MATMUL, POINTWISE, REDUCE, IRNode, Unsupported

# ATen ops replayed on the host: they move no data (or only reshape it)
HOST_OPS = {
    "view", "_unsafe_view", "reshape", "permute", "transpose", "t", "numpy_T", "unsqueeze", "squeeze",
    "expand", "expand_as", "flatten", "unflatten", "select", "slice", "movedim", "view_as", "reshape_as",
    "sym_size", "sym_numel", "sym_stride", "sym_storage_offset",
}
# ops that return their input unchanged for reading purposes
ALIAS_OPS = {"clone", "detach", "alias", "lift_fresh_copy", "contiguous", "lift_fresh"}
PY_OPS = {
    operator.add: "add", operator.sub: "sub", operator.mul: "mul", operator.floordiv: "floordiv",
    operator.truediv: "truediv", operator.mod: "mod", operator.neg: "neg", operator.pow: "pow",
}


class Lowering:
    """Builds the IR node list while walking the exported graph in order."""

    def __init__(self, captured: Captured):
        self.captured = captured
        self.nodes: list[IRNode] = []
        self.env: dict[Any, Any] = {}
        self.current: Any = None  # the fx node being lowered

    # -- node construction -------------------------------------------------------------------
    def add(self, kind: str, op: str, args: list, *, shape=None, dtype=None, **fields) -> IRNode:
        node = IRNode(id=len(self.nodes), kind=kind, op=op, args=list(args), shape=shape, dtype=dtype, **fields)
        if self.current is not None and not node.origin:
            node.origin = packet_name(self.current.target)
        self.nodes.append(node)
        return node

    def pw(self, op: str, *operands, params: dict | None = None, shape=None, dtype=None) -> IRNode:
        """A pointwise node; shape is the broadcast of the tensor operands unless given."""
        if op not in exprs.SUPPORTED:
            raise Unsupported(f"pointwise op {op} has no Triton form in the library")
        tensors = [a for a in operands if isinstance(a, IRNode) and a.is_tensor]
        for a in tensors:
            if a.dtype is not None and not (a.dtype.is_floating_point or a.dtype == torch.bool):
                raise Unsupported(f"{op} reads a {a.dtype} tensor; the library handles float tensors only")
        if shape is None:
            shape = tuple(torch.broadcast_shapes(*[a.shape for a in tensors])) if tensors else ()
        if dtype is None:
            dtype = torch.bool if op in exprs.BOOLEAN_OPS else _float_dtype(tensors)
        return self.add(POINTWISE, op, list(operands), params=params or {}, shape=tuple(shape), dtype=dtype)

    def reduce(self, kind: str, x: IRNode, dims, keepdim: bool, *, shape=None, dtype=None) -> IRNode:
        dims = normalize_dims(dims, len(x.shape))
        if x.dtype is not None and not x.dtype.is_floating_point:
            raise Unsupported(f"{kind}-reduction of a {x.dtype} tensor; the library reduces float tensors only")
        keep = tuple(1 if i in dims else s for i, s in enumerate(x.shape))
        out_shape = keep if keepdim else tuple(s for i, s in enumerate(x.shape) if i not in dims)
        return self.add(REDUCE, kind, [x], shape=shape or out_shape, dtype=dtype or x.dtype,
                        dims=dims, keepdim=keepdim)

    def squeeze(self, x: IRNode, dims: tuple[int, ...], keepdim: bool, like=None) -> IRNode:
        """The logical squeeze at the end of a decomposed keepdim=False reduction."""
        if keepdim:
            return x
        shape = tuple(s for i, s in enumerate(x.shape) if i not in dims)
        return self.pw("squeeze", x, params={"dims": tuple(dims)}, shape=shape, dtype=like or x.dtype)

    def host(self, target, args: list, kwargs: dict | None = None, *, shape=None, dtype=None) -> IRNode:
        return self.add(HOST, packet_name(target), args, shape=shape, dtype=dtype, target=target, kwargs=kwargs or {})

    # -- walking -------------------------------------------------------------------------------
    def value(self, arg: Any) -> Any:
        if isinstance(arg, torch.fx.Node):
            if arg not in self.env:
                raise Unsupported(f"value {arg.name} is used but was never produced")
            found = self.env[arg]
            if isinstance(found, Missing):
                raise Unsupported(found.why)
            return found
        if isinstance(arg, (list, tuple)):
            return type(arg)(self.value(a) for a in arg)
        if isinstance(arg, (torch.SymInt, torch.SymFloat)):
            return hint(arg)
        return arg

    def meta(self, fx_node) -> tuple[tuple | None, Any]:
        val = fx_node.meta.get("val")
        return example_shape(val), getattr(val, "dtype", None)


class Missing:
    """An env entry for a value the library cannot provide (e.g. the indices of max.dim)."""

    def __init__(self, why: str):
        self.why = why


def packet_name(target) -> str:
    packet = getattr(target, "overloadpacket", None)
    if packet is not None:
        return packet.__name__
    return getattr(target, "__name__", str(target))


def overload_name(target) -> str:
    return getattr(target, "_overloadname", "")


def _float_dtype(tensors: list[IRNode]):
    floats = [a.dtype for a in tensors if a.dtype is not None and a.dtype.is_floating_point]
    if not floats:
        return torch.float32
    out = floats[0]
    for d in floats[1:]:
        out = torch.promote_types(out, d)
    return out


def normalize_dims(dims, rank: int) -> tuple[int, ...]:
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return tuple(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    out = tuple(sorted({d % rank if rank else 0 for d in dims}))
    return out


def matmul_node(lw: Lowering, a: IRNode, b: IRNode, fx_node) -> IRNode:
    for x in (a, b):
        if not isinstance(x, IRNode) or not x.is_tensor or len(x.shape) < 2:
            raise Unsupported("matmul with a 1-D operand is not in the library")
        if not x.dtype.is_floating_point:
            raise Unsupported(f"matmul of {x.dtype} tensors is not in the library")
    if a.dtype != b.dtype:
        raise Unsupported(f"matmul of mixed dtypes {a.dtype} and {b.dtype}")
    shape, dtype = lw.meta(fx_node)
    if shape is None:
        batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        shape = (*batch, a.shape[-2], b.shape[-1])
    return lw.add(MATMUL, "matmul", [a, b], shape=tuple(shape), dtype=dtype or a.dtype)
