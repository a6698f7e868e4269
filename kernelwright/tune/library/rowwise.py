"""Reductions over adjacent dims with everything around them fused: softmax, log-softmax,
layer/rms/batch/instance norm, logsumexp, sum/mean/max/min, vector norms, and the elementwise ops
before and after.

The domain is viewed as (P, R, Q): R the reduced extent, P and Q the rest (when the reduced dims
are innermost, the rows go to Q so one program can take several rows; reduced dims apart from one
another, as batch norm's (N, H, W) around C, make R two dims and leave every kept dim to Q). A program owns a tile of
BLOCK_Q columns and walks R in chunks of BLOCK_R. When one chunk covers R (SINGLE), the row is
read once and kept in registers; otherwise each level of dependent reductions (mean, then the
variance around it) is one pass over R, and full-size outputs take a last pass; when every
reduction has an online form (rowstats.py: running max and rescaled sum, Welford), the statistics
take a single pass, and a row may be split over SPLIT programs (partials, then a combine).
"""
from __future__ import annotations

import torch

from .codegen import (
                      Emitter, GroupCode, call_args, choose_default, load_suffix, operand, operand_names, pointwise_line,
                      pow2_range, store_value, torch_dtype)
from .fuse import FULL, Group
from .ir import REDUCE, IRNode
from .rowstats import COMBINE, FINISH, NEUTRAL, emit_online, find_stats, slot_count
from .runtime import kw_row_layout



class _Plan:
    """Classes (full or reduced) and reduction levels of a group's nodes and inputs."""

    def __init__(self, group: Group):
        self.group = group
        self.member = {n.id for n in group.nodes}
        self.full_input = [group.shape_class(_bshape(x, group)) == FULL for x in group.inputs]
        self.cls: dict[int, str] = {}
        self.level: dict[int, int] = {}
        for i, x in enumerate(group.inputs):
            self.cls[x.id] = "full" if self.full_input[i] else "red"
            self.level[x.id] = 0
        for node in group.nodes:
            self._classify(node)

    def _classify(self, node: IRNode) -> None:
        tensors = [a for a in node.args if isinstance(a, IRNode) and a.id in self.cls]
        if node.kind == REDUCE:
            arg = node.args[0]
            self.cls[node.id] = "red"
            self.level[node.id] = self.level[arg.id] + (1 if self.cls[arg.id] == "full" else 0)
            return
        self.cls[node.id] = "full" if any(self.cls[a.id] == "full" for a in tensors) else "red"
        self.level[node.id] = max([self.level[a.id] for a in tensors], default=0)

    def is_alias_reduce(self, node: IRNode) -> bool:
        return node.kind == REDUCE and self.cls[node.args[0].id] == "red"

    def full_deps(self, targets: list[IRNode]) -> tuple[list[int], list[IRNode]]:
        """Full-class inputs and nodes needed to compute `targets` inside a chunk loop."""
        needed: set[int] = set()
        inputs: set[int] = set()
        index = {x.id: i for i, x in enumerate(self.group.inputs)}
        stack = list(targets)
        while stack:
            node = stack.pop()
            for arg in node.args:
                if not isinstance(arg, IRNode) or arg.id not in self.cls or self.cls[arg.id] != "full":
                    continue
                if arg.id in index:
                    inputs.add(index[arg.id])
                elif arg.id not in needed:
                    needed.add(arg.id)
                    stack.append(arg)
        for node in targets:
            if node.id in index:
                inputs.add(index[node.id])
            elif self.cls.get(node.id) == "full":
                needed.add(node.id)
        order = [n for n in self.group.nodes if n.id in needed]
        return sorted(inputs), order


def _bshape(x: IRNode, group: Group) -> tuple[int, ...]:
    """An input's shape broadcast to the domain's rank, as the group reads it."""
    full = tuple(torch.broadcast_shapes(x.shape, group.domain))
    keep = group.keep_shape
    reduced_only = all(x_s == 1 for x_s, d in zip(_pad(x.shape, len(full)), range(len(full)), strict=False) if d in group.dims)
    return keep if reduced_only else full


def _pad(shape, rank):
    return (1,) * (rank - len(shape)) + tuple(shape)


def _load(i: int, node: IRNode, full: bool) -> str:
    offset = f"in{i}_base + in{i}_q" + (f" + r_hi * in{i}_sr0 + r_lo * in{i}_sr1" if full else "")
    mask = "mask" if full else "q_mask"
    return f"x{i} = tl.load(in{i} + ({offset}), mask={mask}, other=0){load_suffix(node)}"


def _reduce_single(node: IRNode, names: dict[int, str]) -> str:
    arg = operand(node.args[0], names)
    value = f"tl.where(mask, {arg}, {NEUTRAL[node.op]})"
    out = f"{FINISH[node.op]}({value}, axis=0)[None, :]"
    return f"{node.name} = {out}" + (" / RF" if node.op == "mean" else "")


def _emit_nodes(k: Emitter, nodes: list[IRNode], plan: _Plan, names: dict[int, str], single: bool) -> None:
    for node in nodes:
        if node.kind == REDUCE:
            if plan.is_alias_reduce(node):
                k(f"{node.name} = {operand(node.args[0], names)}")
            elif single:
                k(_reduce_single(node, names))
        else:
            k(pointwise_line(node, names))


def _emit_kernel(group: Group, plan: _Plan, kname: str, stats) -> str:
    names = operand_names(group)
    n_in, n_out = len(group.inputs), len(group.outputs)
    k = Emitter()
    k("@triton.jit")
    sig = [f"in{i}" for i in range(n_in)] + [f"out{j}" for j in range(n_out)]
    sig += [f"sc{i}" for i in range(len(group.scalars))] + ["P1", "R", "R1", "Q", "Q1", "RF"]
    sig += ["ws", "RCHUNK", "NSPLIT", "WS_ROW"]
    for prefix in [f"in{i}" for i in range(n_in)] + [f"out{j}" for j in range(n_out)]:
        sig += [f"{prefix}_{s}" for s in ("sp0", "sp1", "sr0", "sr1", "sq0", "sq1")]
    sig += ["BLOCK_R: tl.constexpr", "BLOCK_Q: tl.constexpr", "SINGLE: tl.constexpr", "INDEX64: tl.constexpr",
            "PHASE: tl.constexpr"]
    k(f"def {kname}({call_args(sig)}):")
    k.push()
    k("pid = tl.program_id(0)")
    k("if INDEX64:")
    k("    pid = pid.to(tl.int64)")
    k("n_qb = tl.cdiv(Q, BLOCK_Q)")
    k("p = pid // n_qb")
    k("p0 = p // P1")
    k("p1 = p % P1")
    k("q = (pid % n_qb) * BLOCK_Q + tl.arange(0, BLOCK_Q)[None, :]")
    k("q_mask = q < Q")
    k("q0 = q // Q1")
    k("q1 = q % Q1")
    k("rr = tl.arange(0, BLOCK_R)[:, None]")
    for prefix in [f"in{i}" for i in range(n_in)] + [f"out{j}" for j in range(n_out)]:
        k(f"{prefix}_base = p0 * {prefix}_sp0 + p1 * {prefix}_sp1")
        k(f"{prefix}_q = q0 * {prefix}_sq0 + q1 * {prefix}_sq1")
    red_inputs = [i for i in range(n_in) if not plan.full_input[i]]
    for i in red_inputs:
        k(_load(i, group.inputs[i], full=False))
    k("if SINGLE:")
    k.push()
    k("r = rr")
    k("r_hi = r // R1")  # the reduced extent may span two separate dims (R1: the inner one's size)
    k("r_lo = r % R1")
    k("mask = (r < R) & q_mask")
    for i in range(n_in):
        if plan.full_input[i]:
            k(_load(i, group.inputs[i], full=True))
    _emit_nodes(k, group.nodes, plan, names, single=True)
    _emit_stores(k, group, plan, names)
    k.pop()
    k("else:")
    k.push()
    if stats is not None:
        emit_online(k, group, plan, names, stats, _chunk_loop, _emit_nodes, _emit_stores)
    else:
        _emit_looped(k, group, plan, names)
    k.pop()
    k.pop()
    return k.text()


def _emit_looped(k: Emitter, group: Group, plan: _Plan, names: dict[int, str]) -> None:
    red_nodes = [n for n in group.nodes if plan.cls[n.id] == "red"]
    top = max([plan.level[n.id] for n in red_nodes], default=0)
    _emit_nodes(k, [n for n in red_nodes if plan.level[n.id] == 0], plan, names, single=False)
    for level in range(1, top + 1):
        reductions = [n for n in red_nodes if n.kind == REDUCE and plan.level[n.id] == level
                      and not plan.is_alias_reduce(n)]
        for node in reductions:
            k(f"acc_{node.name} = tl.full([BLOCK_R, BLOCK_Q], {NEUTRAL[node.op]}, tl.float32)")
        _chunk_loop(k, group, plan, names, [n.args[0] for n in reductions], lambda reductions=reductions: [
            k(f"acc_{n.name} = " + COMBINE[n.op].format(
                a=f"acc_{n.name}", b=f"tl.where(mask, {operand(n.args[0], names)}, {NEUTRAL[n.op]})"))
            for n in reductions])
        for node in reductions:
            k(f"{node.name} = {FINISH[node.op]}(acc_{node.name}, axis=0)[None, :]"
              + (" / RF" if node.op == "mean" else ""))
        rest = [n for n in red_nodes if plan.level[n.id] == level and n not in reductions]
        _emit_nodes(k, rest, plan, names, single=False)
    full_outputs = [n for n in group.outputs if plan.cls[n.id] == "full"]
    if full_outputs:
        _chunk_loop(k, group, plan, names, full_outputs, lambda: _emit_stores(k, group, plan, names, full_only=True))
    _emit_stores(k, group, plan, names, red_only=True)


def _chunk_loop(k: Emitter, group: Group, plan: _Plan, names: dict[int, str], targets: list, body,
                start: str = "0", stop: str = "R") -> None:
    inputs, nodes = plan.full_deps([t for t in targets if isinstance(t, IRNode)])
    k(f"for r0 in range({start}, {stop}, BLOCK_R):")
    k.push()
    k("r = r0 + rr")
    k("r_hi = r // R1")
    k("r_lo = r % R1")
    k(f"mask = (r < {stop}) & q_mask")
    for i in inputs:
        k(_load(i, group.inputs[i], full=True))
    for node in nodes:
        k(pointwise_line(node, names))
    body()
    k.pop()


def _emit_stores(k: Emitter, group: Group, plan: _Plan, names: dict[int, str],
                 full_only: bool = False, red_only: bool = False, red_mask: str = "q_mask") -> None:
    for j, node in enumerate(group.outputs):
        full = plan.cls[node.id] == "full"
        if (full_only and not full) or (red_only and full):
            continue
        value_expr = store_value(node, f"out{j}")
        if full:
            k(f"tl.store(out{j} + (out{j}_base + out{j}_q + r_hi * out{j}_sr0 + r_lo * out{j}_sr1), {value_expr}, "
              "mask=mask)")
        else:
            k(f"tl.store(out{j} + (out{j}_base + out{j}_q), {value_expr}, mask={red_mask})")


def _emit_launcher(group: Group, plan: _Plan, kname: str, lname: str, prefix: str, n_slots: int) -> str:
    n_in = len(group.inputs)
    inputs = [f"in{i}" for i in range(n_in)]
    scalars = [f"sc{i}" for i in range(len(group.scalars))]
    outs = [f"out{j}" for j in range(len(group.outputs))]
    dims = tuple(group.dims)
    has_full = any(plan.cls[n.id] == "full" for n in group.outputs)
    h = Emitter()
    h(f"def {lname}({call_args(inputs + scalars)}):")
    h.push()
    h(f"kw_check_device({call_args(inputs)})")
    h(f"shape = tuple(torch.broadcast_shapes({call_args(f'{x}.shape' for x in inputs)}))")
    h(f"dims = {dims!r}")
    h("keep = tuple(1 if d in dims else s for d, s in enumerate(shape))")
    results = []
    for j, node in enumerate(group.outputs):
        full = plan.cls[node.id] == "full"
        h(f"out{j} = torch.empty({'shape' if full else 'keep'}, device=in0.device, dtype={torch_dtype(node.dtype)})")
        squeezed = not full and node.shape != group.keep_shape
        results.append(f"out{j}.view([s for d, s in enumerate(keep) if d not in dims])" if squeezed else f"out{j}")
    operands = [f"kw_strides({x}, shape)" for x in inputs + outs]
    h(f"strides = [{call_args(operands)}]")
    h("p_dims, q_dims = kw_row_layout(shape, dims)")
    h("p_sizes, p_st = kw_merge(shape, strides, p_dims, 2)")
    h("r_sizes, r_st = kw_merge(shape, strides, dims, 2)")
    h("r_size = r_sizes[0] * r_sizes[1]")
    h("q_sizes, q_st = kw_merge(shape, strides, q_dims, 2)")
    h("n_p, n_q = p_sizes[0] * p_sizes[1], q_sizes[0] * q_sizes[1]")
    ret = call_args(results) + ("," if len(results) == 1 else "")
    h("if n_p * n_q == 0:")
    h(f"    return {ret}")
    h(f"block_r, block_q = KW_PARAMS[{prefix + 'BLOCK_R'!r}], KW_PARAMS[{prefix + 'BLOCK_Q'!r}]")
    h("single = block_r >= r_size")
    h("# a row split over n_split programs: ranges of whole chunks")
    h(f"r_chunk = triton.cdiv(triton.cdiv(r_size, KW_PARAMS[{prefix + 'SPLIT'!r}]), block_r) * block_r")
    h("n_split = 1 if single else triton.cdiv(r_size, r_chunk)")
    h("args = []")
    h("for k in range(len(strides)):")
    h("    args += [p_st[k][0], p_st[k][1], r_st[k][0], r_st[k][1], q_st[k][0], q_st[k][1]]")
    h("big = kw_numel(shape) >= 2**31")
    h("grid0 = n_p * triton.cdiv(n_q, block_q)")
    h("sizes = (p_sizes[1], r_size, r_sizes[1], n_q, q_sizes[1], float(r_size))")
    h(f"options = dict(BLOCK_R=block_r, BLOCK_Q=block_q, SINGLE=single, INDEX64=big, "
      f"num_warps=KW_PARAMS[{prefix + 'num_warps'!r}])")
    call = f"{call_args(inputs + outs + scalars)}, *sizes"
    h("if n_split == 1:")
    h(f"    {kname}[(grid0, 1)]({call}, in0, r_size, 1, 0, *args, PHASE=0, **options)")
    h("else:")
    h(f"    ws = torch.empty(({n_slots}, n_split, n_p * n_q), device=in0.device, dtype=torch.float32)")
    h(f"    {kname}[(grid0, n_split)]({call}, ws, r_chunk, n_split, n_p * n_q, *args, PHASE=1, **options)")
    h(f"    {kname}[(grid0, {'n_split' if has_full else '1'})]({call}, ws, r_chunk, n_split, n_p * n_q, *args, "
      "PHASE=2, **options)")
    h(f"return {ret}")
    h.pop()
    return h.text()


def _extents(group: Group) -> tuple[int, int, int]:
    """(P, R, Q) of the example shapes, the sizes the constraints use."""
    shape, dims = group.domain, group.dims
    p_dims, q_dims = kw_row_layout(shape, dims)
    return (_prod(shape[d] for d in p_dims), _prod(shape[d] for d in dims), _prod(shape[d] for d in q_dims))


def _prod(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


def generate(group: Group, prefix: str, env: dict) -> GroupCode:
    plan = _Plan(group)
    stats = find_stats(group, plan)
    kname, lname = f"_kw_g{group.index}_kernel", f"_kw_g{group.index}"
    kernel = _emit_kernel(group, plan, kname, stats)
    launcher = _emit_launcher(group, plan, kname, lname, prefix, slot_count(stats or []))
    p, r, q = _extents(group)
    br, bq, w, sp = prefix + "BLOCK_R", prefix + "BLOCK_Q", prefix + "num_warps", prefix + "SPLIT"
    ps, rs, qs = prefix + "P", prefix + "R", prefix + "Q"
    params = {br: pow2_range(16, 65536), bq: pow2_range(1, 64), w: [1, 2, 4, 8, 16, 32],
              sp: pow2_range(1, 1024) if stats is not None else [1]}
    constraints = [
        f"{br} <= max(16, next_pow2({rs}))",  # no chunk longer than the reduced extent
        f"{bq} <= next_pow2({qs})",  # no more columns than there are
        f"{br} * {bq} <= {w} * WARP_SIZE * 64",  # a tile of at most 64 fp32 values per thread
        f"{br} * {bq} >= {w} * WARP_SIZE",  # no idle threads
        f"{sp} == 1 or {sp} * {br} <= {rs}",  # every part of a split row gets a whole chunk
        # split rows only while the row tiles alone leave the GPU short of programs
        f"{sp} == 1 or {ps} * cdiv({qs}, {bq}) * {sp} <= 32 * SM_COUNT",
    ]
    sizes = {ps: p, rs: r, qs: q}
    preferred_r = min(max(16, _next_pow2(r)), 4096)
    preferred_q = min(_next_pow2(q), max(1, 1024 // preferred_r))
    tiles = p * -(-q // preferred_q)
    split = 1
    while stats is not None and tiles * split < 4 * env.get("SM_COUNT", 132) and split * 2 * preferred_r <= r:
        split *= 2
    preferred = {br: preferred_r, bq: preferred_q, w: 8 if preferred_r * preferred_q >= 4096 else 4, sp: split}
    defaults = choose_default(params, constraints, {**env, **sizes}, preferred)
    return GroupCode(kernel, launcher, lname, params, constraints, defaults, sizes, "rowwise")


def _next_pow2(x: int) -> int:
    return 1 if x <= 1 else 1 << (x - 1).bit_length()
