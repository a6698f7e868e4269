"""Partition a lowered program into kernels: each group becomes one Triton kernel.

Greedy, in program order. A matmul starts a `gemm` group whose epilogue takes the pointwise ops
on its output (a pooling window starts a `pool` group, a convolution a `conv` group, alike); pointwise ops gather into a `pointwise` group over one domain shape; a reduction
turns that into a `reduce` group over one set of dims, which then also takes
pointwise ops on the full or the reduced values (softmax, norms, logsumexp fuse whole). A host op
reading a value of the open group closes it; values read outside their group are its outputs.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .ir import ANCHORS, HOST, POINTWISE, REDUCE, IRNode, Program, Unsupported, flat_args

FULL, RED, SQZ = "full", "reduced", "squeezed"


@dataclass
class Group:
    index: int
    kind: str  # "pointwise" | "reduce" | "gemm" | "pool" | "conv"
    domain: tuple[int, ...]  # the full shape the group iterates over (gemm/pool/conv: the anchor's output)
    nodes: list[IRNode] = field(default_factory=list)
    dims: tuple[int, ...] = ()  # reduce: the reduced dims of the domain
    inputs: list[IRNode] = field(default_factory=list)  # tensors read from memory
    scalars: list[IRNode] = field(default_factory=list)  # host scalars the kernel takes as arguments
    outputs: list[IRNode] = field(default_factory=list)

    @property
    def matmul(self) -> IRNode | None:
        return self.nodes[0] if self.kind == "gemm" else None

    @property
    def anchor(self) -> IRNode | None:
        """The matmul, pooling or convolution a group with an epilogue starts with."""
        return self.nodes[0] if self.kind in ANCHORS.values() else None

    @property
    def keep_shape(self) -> tuple[int, ...]:
        return tuple(1 if i in self.dims else s for i, s in enumerate(self.domain))

    @property
    def squeezed_shape(self) -> tuple[int, ...]:
        return tuple(s for i, s in enumerate(self.domain) if i not in self.dims)

    def shape_class(self, shape: tuple[int, ...]) -> str | None:
        if shape == self.domain:
            return FULL
        if self.kind != "reduce":
            return None
        if shape == self.keep_shape:
            return RED
        if shape == self.squeezed_shape:
            return SQZ
        return None

    def describe(self) -> str:
        origins = []
        for node in self.nodes:
            if node.origin and node.origin not in origins:
                origins.append(node.origin)
        return f"{self.kind}[{', '.join(origins)}]"


def _broadcasts_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    try:
        return tuple(torch.broadcast_shapes(shape, target)) == tuple(target)
    except RuntimeError:
        return False


class _Partitioner:
    def __init__(self, program: Program):
        self.program = program
        self.groups: list[Group] = []
        self.current: Group | None = None
        self.group_of: dict[int, Group] = {}

    def run(self) -> list[Group]:
        for node in self.program.nodes:
            if node.kind == HOST:
                if any(isinstance(a, IRNode) and self._in_current(a) for a in flat_args(node)):
                    self._close()
            elif node.is_kernel:
                if not (self.current and self._can_join(self.current, node)):
                    self._close()
                    self.current = self._start(node)
                self._add(self.current, node)
        self._close()
        _assign_io(self.program, self.groups, self.group_of)
        return self.groups

    def _in_current(self, node: IRNode) -> bool:
        return self.current is not None and self.group_of.get(node.id) is self.current

    def _close(self) -> None:
        if self.current is not None:
            self.groups.append(self.current)
        self.current = None

    def _add(self, group: Group, node: IRNode) -> None:
        group.nodes.append(node)
        self.group_of[node.id] = group

    def _start(self, node: IRNode) -> Group:
        index = len(self.groups)
        if node.kind in ANCHORS:
            return Group(index, ANCHORS[node.kind], node.shape)
        if node.kind == POINTWISE:
            if node.op == "squeeze":
                raise Unsupported("a squeeze of a value from another kernel")
            return Group(index, "pointwise", node.shape)
        arg = node.args[0]
        if not node.dims:
            raise Unsupported(f"a reduction over no dims of shape {list(arg.shape)}")
        return Group(index, "reduce", arg.shape, dims=node.dims)

    def _can_join(self, group: Group, node: IRNode) -> bool:
        if node.kind in ANCHORS:
            return False
        if node.kind == REDUCE:
            return self._can_join_reduce(group, node)
        return self._can_join_pointwise(group, node)

    def _can_join_reduce(self, group: Group, node: IRNode) -> bool:
        arg = node.args[0]
        if group.kind in ANCHORS.values() or not node.dims:
            return False
        if group.kind == "pointwise":
            if arg.shape != group.domain:
                return False
            group.kind, group.dims = "reduce", node.dims  # the group now iterates rows of `dims`
            return True
        if node.dims != group.dims:
            return False
        cls = group.shape_class(arg.shape)
        return cls == FULL or (cls == RED and node.keepdim)

    def _can_join_pointwise(self, group: Group, node: IRNode) -> bool:
        cls = group.shape_class(node.shape)
        if cls is None:
            return False
        for arg in node.tensor_args():
            inside = self.group_of.get(arg.id) is group
            if inside:
                arg_cls = group.shape_class(arg.shape)
                allowed = {FULL: {FULL, RED}, RED: {RED}, SQZ: {SQZ}}[cls]
                if node.op == "squeeze":
                    allowed = {RED}
                if arg_cls not in allowed:
                    return False
            elif cls == SQZ:
                if _numel(arg.shape) != 1:
                    return False
            elif not _broadcasts_to(arg.shape, node.shape):
                return False
        return True


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _assign_io(program: Program, groups: list[Group], group_of: dict[int, Group]) -> None:
    users = program.users()
    output_ids = {o.id for o in program.outputs if isinstance(o, IRNode)}
    for group in groups:
        members = {n.id for n in group.nodes}
        for node in group.nodes:
            for arg in node.args:
                if not isinstance(arg, IRNode) or arg.id in members:
                    continue
                if arg.is_tensor:
                    if arg not in group.inputs:
                        group.inputs.append(arg)
                elif arg not in group.scalars:
                    group.scalars.append(arg)
            read_outside = any(u.id not in members for u in users[node.id])
            if read_outside or node.id in output_ids:
                group.outputs.append(node)


def partition(program: Program) -> list[Group]:
    """Kernel groups of `program`, in launch order."""
    return _Partitioner(program).run()
