"""Lower an exported ATen graph into the library IR (ir.py).

Each ATen op becomes host nodes (views and size arithmetic, replayed as is), pointwise nodes,
reduce nodes or a matmul node; compound ops are decomposed in decompose.py. Anything else raises
`Unsupported` naming the op, which is how the matcher explains that no template applies. The
toolkit the handlers share is lowering.py (so the handlers need not import this module).
"""
from __future__ import annotations

import operator
from typing import Any, Callable

import torch

from .decompose import HANDLERS
from .graph import Captured
from .ir import INPUT, IRNode, Program, Unsupported
from .lowering import PY_OPS, ALIAS_OPS, HOST_OPS, Lowering, overload_name, packet_name

def lower(captured: Captured) -> Program:
    """The IR program of an exported forward; Unsupported says which op stops the library."""
    ep = captured.program
    sig = ep.graph_signature
    lw = Lowering(captured)
    sources = _input_sources(sig)
    user_inputs = []
    fx_nodes = list(ep.graph.nodes)
    order = {n: i for i, n in enumerate(fx_nodes)}
    outputs: list[Any] = []
    for fx_node in fx_nodes:
        lw.current = fx_node
        if fx_node.op == "placeholder":
            kind, target = sources.get(fx_node.name, ("user", None))
            shape, dtype = lw.meta(fx_node)
            node = lw.add(INPUT, kind, [], shape=shape, dtype=dtype, target=target)
            if kind == "const":
                node.params["value"] = _small_constant(ep.constants.get(target))
            if kind == "user":
                node.target = len(user_inputs)
                user_inputs.append(node)
            lw.env[fx_node] = node
        elif fx_node.op == "call_function":
            _lower_call(lw, fx_node, order, HANDLERS)
        elif fx_node.op == "output":
            outputs = [lw.value(a) for a in fx_node.args[0]]
        else:
            raise Unsupported(f"graph node kind {fx_node.op} ({fx_node.target}) is not supported")
    return Program(nodes=lw.nodes, user_inputs=user_inputs, outputs=outputs, single_output=captured.single_output,
                   dynamic=captured.dynamic)


def _small_constant(value: Any) -> list | float | None:
    """The value of a small tensor constant (a `torch.tensor(0.5)` made inside forward, which is no
    attribute of the module), written into the template as a literal; None for large ones, which
    are read from the module."""
    if not isinstance(value, torch.Tensor) or value.numel() > 256:
        return None
    if value.is_meta:
        raise Unsupported("a tensor constant made inside forward whose value the export did not record")
    return value.tolist()


def _input_sources(sig) -> dict[str, tuple[str, Any]]:
    sources: dict[str, tuple[str, Any]] = {}
    for name, fqn in sig.inputs_to_parameters.items():
        sources[name] = ("param", fqn)
    for name, fqn in sig.inputs_to_buffers.items():
        sources[name] = ("buffer", fqn)
    for name, fqn in getattr(sig, "inputs_to_lifted_tensor_constants", {}).items():
        sources[name] = ("const", fqn)
    return sources


def _lower_call(lw: Lowering, fx_node, order: dict, handlers: dict[str, Callable]) -> None:
    target = fx_node.target
    if target is operator.getitem:
        base = lw.env.get(fx_node.args[0])
        if isinstance(base, tuple):
            lw.env[fx_node] = base[fx_node.args[1]]
            return
        raise Unsupported(f"indexing {fx_node.args[0]} is not supported")
    if target in PY_OPS:  # size arithmetic on the host
        args = [lw.value(a) for a in fx_node.args]
        lw.env[fx_node] = lw.host(target, args)
        return
    name = packet_name(target)
    if not isinstance(target, torch._ops.OpOverload):
        raise Unsupported(f"call to {name} is not an ATen op")
    inplace = name.endswith("_") and not name.startswith("_")
    base_name = name[:-1] if inplace else name
    if inplace and base_name in ALIAS_OPS:  # detach_ of a constant: the data stays what it was
        lw.env[fx_node] = lw.value(fx_node.args[0])
        return
    if inplace and _drop_side_effect(lw, fx_node, order):
        return
    args = [lw.value(a) for a in fx_node.args]
    kwargs = {k: lw.value(v) for k, v in fx_node.kwargs.items()}
    if base_name in HOST_OPS:
        shape, dtype = lw.meta(fx_node)
        lw.env[fx_node] = lw.host(target, args, kwargs, shape=shape, dtype=dtype)
        return
    if base_name in ALIAS_OPS:
        lw.env[fx_node] = args[0]
        return
    handler = handlers.get(base_name)
    if handler is None:
        raise Unsupported(f"aten.{name} has no template in the library")
    lw.env[fx_node] = handler(lw, fx_node, overload_name(target), args, kwargs)


def _drop_side_effect(lw: Lowering, fx_node, order: dict) -> bool:
    """An in-place op on a model input/buffer whose result nobody reads is a side effect (the
    batch-norm step counter, say): dropped. One whose mutated value is read again is refused."""
    mutated = fx_node.args[0]
    later_readers = [u for u in mutated.users if u is not fx_node and order.get(u, -1) > order[fx_node]]
    if later_readers:
        raise Unsupported(f"aten.{packet_name(fx_node.target)} mutates {mutated.name}, which is read again")
    base = lw.env.get(mutated)
    if isinstance(base, IRNode) and base.kind == INPUT:
        if fx_node.users:
            raise Unsupported(f"aten.{packet_name(fx_node.target)} mutates model input/state {mutated.name}")
        return True
    return False
