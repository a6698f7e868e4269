"""Rows longer than one block: the statistics of a rowwise group gathered in one pass over the
row, with the row optionally split across several programs.

A rowwise group's reductions form levels (the mean, then the variance around it; the max, then the
sum of exponentials shifted by it). Read naively, each level is one pass over the row. Two
patterns cover the dependent reductions of the library's compound ops, and each combines online:

- softmax: sum(exp(y - max(y))) keeps a running max m and a running sum s rescaled by
  exp(m_old - m_new) (softmax, log-softmax, logsumexp);
- welford: mean(y) with sum/mean((y - mean(y))**2) keeps (count, mean, M2) and merges chunks by
  Chan's formula (layer/group/instance/batch norm, var, std).

Other level-1 reductions (sum, mean, max, min of values that depend on no reduction) combine
plainly. With every reduction in one of these forms (`find_stats`), the statistics take one pass
over the row and full-size outputs a second (instead of one pass per level plus one). When the
rows alone cannot fill the GPU (few rows: a batch norm's channels, a norm of the whole tensor), a
row is split into SPLIT ranges: phase 1 writes each range's partial statistics to a workspace,
phase 2 combines them (cheap: SPLIT values per column) and writes the outputs of its range.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .codegen import Emitter, operand
from .ir import REDUCE, IRNode

NEG_INF = '-float("inf")'
NEUTRAL = {"sum": "0.0", "mean": "0.0", "max": NEG_INF, "min": 'float("inf")'}
COMBINE = {"sum": "{a} + {b}", "mean": "{a} + {b}", "max": "tl.maximum({a}, {b})", "min": "tl.minimum({a}, {b})"}
FINISH = {"sum": "tl.sum", "mean": "tl.sum", "max": "tl.max", "min": "tl.min"}
SLOTS = {"simple": 1, "softmax": 2, "welford": 3}


@dataclass
class Stat:
    """One running statistic of the group: `nodes` are the reductions it yields."""

    kind: str  # simple | softmax | welford
    nodes: list[IRNode]  # simple: [r]; softmax: [max, sum of exp]; welford: [mean, sum/mean of squares]
    arg: IRNode  # the full-size value reduced (a group node or input)
    index: int = 0

    def var(self, slot: int) -> str:
        return f"st{self.index}_{'abc'[slot]}"

    @property
    def variables(self) -> list[str]:
        return [self.var(i) for i in range(SLOTS[self.kind])]


def _member(node: Any, group_ids: set[int], op: str | tuple[str, ...]) -> bool:
    ops = (op,) if isinstance(op, str) else op
    return isinstance(node, IRNode) and node.id in group_ids and node.op in ops


def _level1_reduce(node: Any, op: str, arg: IRNode, plan) -> bool:
    return (isinstance(node, IRNode) and node.kind == REDUCE and node.op == op and node.id in plan.member
            and node.args[0] is arg and plan.level.get(node.id) == 1)


def _softmax_pair(s: IRNode, plan) -> Stat | None:
    """s = sum(exp(y - m)) with m = max(y)."""
    e = s.args[0]
    if s.op != "sum" or not _member(e, plan.member, "exp"):
        return None
    shifted = e.args[0]
    if not _member(shifted, plan.member, "sub") or len(shifted.args) != 2:
        return None
    y, m = shifted.args
    if not isinstance(y, IRNode) or not _level1_reduce(m, "max", y, plan):
        return None
    return Stat("softmax", [m, s], y)


def _centered(d: Any, plan) -> tuple[IRNode, IRNode] | None:
    """(y, mu) when d = y - mu with mu = mean(y)."""
    if not _member(d, plan.member, "sub") or len(d.args) != 2:
        return None
    y, mu = d.args
    if isinstance(y, IRNode) and _level1_reduce(mu, "mean", y, plan):
        return y, mu
    return None


def _welford_pair(s2: IRNode, plan) -> Stat | None:
    """s2 = sum/mean((y - mu)**2) with mu = mean(y) (the square as d*d, square(d) or d**2)."""
    sq = s2.args[0]
    if s2.op not in ("sum", "mean") or not isinstance(sq, IRNode) or sq.id not in plan.member:
        return None
    if sq.op == "mul" and len(sq.args) == 2:
        first, second = (_centered(a, plan) for a in sq.args)
        found = first if first is not None and first == second else None
    elif sq.op == "square" or (sq.op == "pow_scalar" and sq.params.get("exponent") == 2.0):
        found = _centered(sq.args[0], plan)
    else:
        found = None
    if found is None:
        return None
    y, mu = found
    return Stat("welford", [mu, s2], y)


def find_stats(group, plan) -> list[Stat] | None:
    """The group's reductions as running statistics, or None when one of them depends on another
    in a way no online form covers (then each level is its own pass, and rows are not split)."""
    reductions = [n for n in group.nodes if n.kind == REDUCE and not plan.is_alias_reduce(n)]
    stats: list[Stat] = []
    claimed: set[int] = set()
    for node in reductions:
        if plan.level[node.id] <= 1:
            continue
        pair = _softmax_pair(node, plan) or _welford_pair(node, plan)
        if pair is None or pair.nodes[0].id in claimed:
            return None
        claimed.add(pair.nodes[0].id)
        stats.append(pair)
    for node in reductions:
        if plan.level[node.id] == 1 and node.id not in claimed:
            stats.append(Stat("simple", [node], node.args[0]))
    stats.sort(key=lambda st: [n.id for n in group.nodes].index(st.nodes[-1].id))
    for i, st in enumerate(stats):
        st.index = i
    return stats


# -- code ---------------------------------------------------------------------------------------
def _init(k: Emitter, st: Stat, tile: bool) -> None:
    """Neutral state; a simple statistic accumulates a whole tile inside the loop (`tile`)."""
    if st.kind == "simple":
        neutral = NEUTRAL[st.nodes[0].op]
        if tile:
            k(f"acc{st.index} = tl.full([BLOCK_R, BLOCK_Q], {neutral}, tl.float32)")
        else:
            k(f"{st.var(0)} = tl.full([1, BLOCK_Q], {neutral}, tl.float32)")
        return
    values = [NEG_INF, "0.0"] if st.kind == "softmax" else ["0.0", "0.0", "0.0"]
    for var, value in zip(st.variables, values, strict=True):
        k(f"{var} = tl.full([1, BLOCK_Q], {value}, tl.float32)")


def _softmax_merge(k: Emitter, m: str, s: str, bm: str, bs: str) -> None:
    """(m, s) <- merge with (bm, bs): the sums are rescaled to the larger max (no inf - inf)."""
    k(f"m_new = tl.maximum({m}, {bm})")
    k(f"m_use = tl.where(m_new == {NEG_INF}, 0.0, m_new)")
    k(f"{s} = {s} * tl.exp({m} - m_use) + {bs} * tl.exp({bm} - m_use)")
    k(f"{m} = m_new")


def _welford_merge(k: Emitter, n: str, mu: str, m2: str, bn: str, bmu: str, bm2: str) -> None:
    """Chan et al.: (n, mu, M2) <- merge with (bn, bmu, bM2); empty parts change nothing."""
    k(f"t_n = {n} + {bn}")
    k(f"delta = {bmu} - {mu}")
    k(f"ratio = {bn} / tl.maximum(t_n, 1.0)")
    k(f"{mu} = {mu} + delta * ratio")
    k(f"{m2} = {m2} + {bm2} + delta * delta * {n} * ratio")
    k(f"{n} = t_n")


def _update(k: Emitter, st: Stat, names: dict[int, str]) -> None:
    """Fold the chunk in `mask` into the statistic."""
    y = operand(st.arg, names)
    if st.kind == "simple":
        op = st.nodes[0].op
        acc = f"acc{st.index}"
        k(f"{acc} = " + COMBINE[op].format(a=acc, b=f"tl.where(mask, {y}, {NEUTRAL[op]})"))
    elif st.kind == "softmax":
        m, s = st.variables
        k(f"c_m = tl.max(tl.where(mask, {y}, {NEG_INF}), axis=0)[None, :]")
        k(f"m_new = tl.maximum({m}, c_m)")
        k(f"m_use = tl.where(m_new == {NEG_INF}, 0.0, m_new)")
        k(f"{s} = {s} * tl.exp({m} - m_use) + tl.sum(tl.where(mask, tl.exp({y} - m_use), 0.0), axis=0)[None, :]")
        k(f"{m} = m_new")
    else:
        k("c_n = tl.minimum(r_stop - r0, BLOCK_R).to(tl.float32)  # rows of the chunk (>= 1 in the loop)")
        k(f"c_mu = tl.sum(tl.where(mask, {y}, 0.0), axis=0)[None, :] / c_n")
        k(f"c_d = tl.where(mask, {y} - c_mu, 0.0)")
        k("c_m2 = tl.sum(c_d * c_d, axis=0)[None, :]")
        _welford_merge(k, *st.variables, "c_n", "c_mu", "c_m2")


def _finish_tiles(k: Emitter, st: Stat) -> None:
    if st.kind == "simple":
        k(f"{st.var(0)} = {FINISH[st.nodes[0].op]}(acc{st.index}, axis=0)[None, :]")


def _merge_partial(k: Emitter, st: Stat, loaded: list[str]) -> None:
    if st.kind == "simple":
        k(f"{st.var(0)} = " + COMBINE[st.nodes[0].op].format(a=st.var(0), b=loaded[0]))
    elif st.kind == "softmax":
        _softmax_merge(k, *st.variables, *loaded)
    else:
        _welford_merge(k, *st.variables, *loaded)


def _values(k: Emitter, st: Stat) -> None:
    """The reductions' values from the final statistic (means divide by the reduced count RF)."""
    if st.kind == "simple":
        node = st.nodes[0]
        k(f"{node.name} = {st.var(0)}" + (" / RF" if node.op == "mean" else ""))
    elif st.kind == "softmax":
        m, s = st.nodes
        k(f"{m.name} = {st.var(0)}")
        k(f"{s.name} = {st.var(1)}")
    else:
        mu, s2 = st.nodes
        k(f"{mu.name} = {st.var(1)}")
        k(f"{s2.name} = {st.var(2)}" + (" / RF" if s2.op == "mean" else ""))


def slot_count(stats: list[Stat]) -> int:
    return sum(SLOTS[st.kind] for st in stats)


def emit_online(k: Emitter, group, plan, names: dict[int, str], stats: list[Stat],
                chunk_loop: Callable, emit_nodes: Callable, emit_stores: Callable) -> None:
    """The looped (not SINGLE) body: PHASE 0 whole rows, 1 partial statistics of a range of the
    row into `ws`, 2 combine the partials and write the outputs of the range."""
    red_nodes = [n for n in group.nodes if plan.cls[n.id] == "red"]
    stat_ids = {n.id for st in stats for n in st.nodes}
    k("sid = tl.program_id(1)")
    k("if INDEX64:")
    k("    sid = sid.to(tl.int64)")
    k("r_start = sid * RCHUNK")
    k("r_stop = tl.minimum(r_start + RCHUNK, R)")
    k("ws_col = p * Q + q")
    emit_nodes(k, [n for n in red_nodes if plan.level[n.id] == 0], plan, names, single=False)
    k("if PHASE == 2:")
    k.push()
    _combine_partials(k, stats)
    k.pop()
    k("else:")
    k.push()
    for st in stats:
        _init(k, st, tile=True)
    chunk_loop(k, group, plan, names, [st.arg for st in stats], lambda: [_update(k, st, names) for st in stats],
               start="r_start", stop="r_stop")
    for st in stats:
        _finish_tiles(k, st)
    k("if PHASE == 1:")
    k.push()
    slot = 0
    for st in stats:
        for var in st.variables:
            k(f"tl.store(ws + ({slot} * NSPLIT + sid) * WS_ROW + ws_col, {var}, mask=q_mask)")
            slot += 1
    k.pop()
    k.pop()
    k("if PHASE != 1:")
    k.push()
    for st in stats:
        _values(k, st)
    rest = [n for n in red_nodes if plan.level[n.id] >= 1 and n.id not in stat_ids]
    emit_nodes(k, rest, plan, names, single=False)
    full_outputs = [n for n in group.outputs if plan.cls[n.id] == "full"]
    if full_outputs:
        chunk_loop(k, group, plan, names, full_outputs,
                   lambda: emit_stores(k, group, plan, names, full_only=True), start="r_start", stop="r_stop")
    # the first part of a split row stores its reduced values (a tensor condition: the interpreter
    # cannot combine a mask with a scalar one)
    emit_stores(k, group, plan, names, red_only=True, red_mask="q_mask & (sid * Q + q < Q)")
    k.pop()


def _combine_partials(k: Emitter, stats: list[Stat]) -> None:
    for st in stats:
        _init(k, st, tile=False)
    k("for part in range(0, NSPLIT):")
    k.push()
    slot = 0
    for st in stats:
        loaded = []
        for j, var in enumerate(st.variables):
            neutral = _slot_neutral(st, j)
            k(f"p_{var} = tl.load(ws + ({slot} * NSPLIT + part) * WS_ROW + ws_col, mask=q_mask, other={neutral})")
            loaded.append(f"p_{var}")
            slot += 1
        _merge_partial(k, st, loaded)
    k.pop()


def _slot_neutral(st: Stat, slot: int) -> str:
    if st.kind == "simple":
        return NEUTRAL[st.nodes[0].op]
    if st.kind == "softmax" and slot == 0:
        return NEG_INF
    return "0.0"
