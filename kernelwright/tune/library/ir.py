"""The small dataflow IR the template library lowers a reference forward into.

Node kinds:
- input: a user input, parameter, buffer or tensor constant of the model;
- host: an op replayed on the host as is (views, reshapes, size arithmetic): no data is computed;
- pointwise: an elementwise op with tensor and scalar operands (exprs.py renders it in Triton);
- reduce: sum / mean / max / min over a set of dims (keepdim or not);
- matmul: a @ b with broadcast batch dims, both operands host tensors;
- pool: a max/avg window reduction over the last 1-3 dims (params: kernel, stride, padding,
  dilation, ceil_mode, count_include_pad, divisor);
- conv: an N-d convolution or transposed convolution (args: input, weight, bias or None; params:
  stride, padding, dilation, groups, transposed, output_padding).
Compound ATen ops (softmax, layer_norm, logsumexp, ...) are decomposed into pointwise and reduce
nodes by lower.py, so fusion only ever sees these kinds.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

INPUT, HOST, POINTWISE, REDUCE, MATMUL = "input", "host", "pointwise", "reduce", "matmul"
POOL, CONV = "pool", "conv"
KERNEL_KINDS = (POINTWISE, REDUCE, MATMUL, POOL, CONV)
ANCHORS = {MATMUL: "gemm", POOL: "pool", CONV: "conv"}  # node kinds that start a group with an epilogue


@dataclass(eq=False)
class IRNode:
    id: int
    kind: str
    op: str  # canonical op (pointwise/reduce/matmul), ATen target text (host), source (input)
    args: list[Any] = field(default_factory=list)  # Node or constants
    params: dict[str, Any] = field(default_factory=dict)
    shape: tuple[int, ...] | None = None  # example shape; None for scalars (host size arithmetic)
    dtype: Any = None  # torch.dtype of the value
    target: Any = None  # host: the callable replayed; input: fqn or user input index
    kwargs: dict[str, Any] = field(default_factory=dict)  # host op keyword arguments
    dims: tuple[int, ...] = ()  # reduce: reduced dims (non-negative)
    keepdim: bool = True  # reduce: whether the reduced dims stay as size-1 dims
    origin: str = ""  # the ATen op this node came from (softmax, layer_norm, ...)

    @property
    def name(self) -> str:
        return f"v{self.id}"

    @property
    def is_kernel(self) -> bool:
        return self.kind in KERNEL_KINDS

    @property
    def is_tensor(self) -> bool:
        return self.shape is not None

    def tensor_args(self) -> list["IRNode"]:
        return [a for a in self.args if isinstance(a, IRNode) and a.is_tensor]

    def __repr__(self) -> str:
        args = ", ".join(a.name if isinstance(a, IRNode) else repr(a) for a in self.args)
        return f"{self.name} = {self.kind}:{self.op}({args}) {list(self.shape) if self.shape else ''}"


@dataclass
class Program:
    """A lowered forward: nodes in execution order, its user inputs and outputs."""

    nodes: list[IRNode]
    user_inputs: list[IRNode]
    outputs: list[Any]  # Node or constants
    single_output: bool
    dynamic: bool  # shapes were exported as symbolic (instances follow runtime sizes)

    def users(self) -> dict[int, list[IRNode]]:
        found: dict[int, list[IRNode]] = {n.id: [] for n in self.nodes}
        for node in self.nodes:
            for arg in flat_args(node):
                if isinstance(arg, IRNode):
                    found[arg.id].append(node)
        return found


def _flat(items: list) -> list:
    out = []
    for item in items:
        if isinstance(item, (list, tuple)):
            out.extend(_flat(list(item)))
        else:
            out.append(item)
    return out


def flat_args(node: IRNode) -> list:
    return _flat(node.args) + _flat(list(node.kwargs.values()))


class Unsupported(Exception):
    """The forward uses something the library cannot express; the message says what."""
