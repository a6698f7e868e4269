"""Fused elementwise chain: one pass over the output, every operand read once through strides.

The domain is merged to at most three dimensions (all-contiguous operands become one flat
index); broadcast operands read with zero strides. Tunable: BLOCK (elements per program),
num_warps, and GRID: "oneshot" (one program per block of the output) or "persistent" (one full wave
of programs, as many as the SMs hold at this num_warps, each looping over blocks; declared active
only when the blocks outnumber two waves' worth of SMs, the one case it can pay).
"""
from __future__ import annotations

from .codegen import (
    Emitter, GroupCode, call_args, choose_default, load_suffix, operand_names, pointwise_line, pow2_range,
    store_value, torch_dtype,
)
from .fuse import Group


def generate(group: Group, prefix: str, env: dict) -> GroupCode:
    kname, lname = f"_kw_g{group.index}_kernel", f"_kw_g{group.index}"
    names = operand_names(group)
    n_in, n_out = len(group.inputs), len(group.outputs)
    numel = 1
    for s in group.domain:
        numel *= s

    k = Emitter()
    k("@triton.jit")
    sig = [f"in{i}" for i in range(n_in)] + [f"out{j}" for j in range(n_out)]
    sig += [f"sc{i}" for i in range(len(group.scalars))] + ["N", "D1", "D2"]
    sig += [f"in{i}_s{d}" for i in range(n_in) for d in range(3)]
    sig += ["BLOCK: tl.constexpr", "INDEX64: tl.constexpr", "PERSISTENT: tl.constexpr"]
    k(f"def {kname}({call_args(sig)}):")
    k.push()
    k("pid = tl.program_id(0)")
    k("if INDEX64:")
    k("    pid = pid.to(tl.int64)")
    k("if PERSISTENT:  # a wave of programs, each looping over blocks")
    k("    for tile in range(pid, tl.cdiv(N, BLOCK), tl.num_programs(0)):")
    k.level += 2
    _emit_block(k, group, names, "tile")
    k.level -= 2
    k("else:")
    k.push()
    _emit_block(k, group, names, "pid")
    k.pop()
    k.pop()

    inputs = [f"in{i}" for i in range(n_in)]
    scalars = [f"sc{i}" for i in range(len(group.scalars))]
    h = Emitter()
    h(f"def {lname}({call_args(inputs + scalars)}):")
    h.push()
    h(f"kw_check_device({call_args(inputs)})")
    h(f"shape = tuple(torch.broadcast_shapes({call_args(f'{x}.shape' for x in inputs)}))")
    for j, node in enumerate(group.outputs):
        h(f"out{j} = torch.empty(shape, device=in0.device, dtype={torch_dtype(node.dtype)})")
    outs = call_args(f"out{j}" for j in range(n_out)) + ("," if n_out == 1 else "")
    h("n = kw_numel(shape)")
    h("if n == 0:")
    h(f"    return {outs}")
    strides = call_args(f"kw_strides({x}, shape)" for x in inputs)
    h(f"sizes, strides = kw_merge(shape, [{strides}], range(len(shape)), 3)")
    h(f"block, warps = KW_PARAMS[{prefix + 'BLOCK'!r}], KW_PARAMS[{prefix + 'num_warps'!r}]")
    h("blocks = triton.cdiv(n, block)")
    h(f"persistent = KW_PARAMS[{prefix + 'GRID'!r}] == 'persistent'")
    h("programs = min(blocks, kw_wave(in0, warps)) if persistent else blocks")
    h(f"{kname}[(programs,)](")
    h(f"    {call_args(inputs + [f'out{j}' for j in range(n_out)] + scalars)},")
    h(f"    n, sizes[1], sizes[2], {call_args(f'*strides[{i}]' for i in range(n_in))},")
    h("    BLOCK=block, INDEX64=n >= 2**31, PERSISTENT=persistent, num_warps=warps)")
    h(f"return {outs}")
    h.pop()

    b, w, n, grid = prefix + "BLOCK", prefix + "num_warps", prefix + "N", prefix + "GRID"
    params = {b: pow2_range(128, 8192), w: [1, 2, 4, 8, 16], grid: ["oneshot", "persistent"]}
    specs = {grid: {"choice": True, "kind": "grid", "off": "oneshot", "when": f"cdiv({n}, {b}) > 2 * NUM_SMS"}}
    constraints = [
        f"{b} >= {w} * WARP_SIZE",  # every thread holds at least one element
        f"{b} <= {w} * WARP_SIZE * 32",  # at most 32 elements per thread (registers)
        f"{b} <= max(128, next_pow2({n}))",  # no block larger than the whole tensor
    ]
    sizes = {n: numel}
    defaults = choose_default(params, constraints, {**env, **sizes}, {b: 1024, w: 4, grid: "oneshot"}, specs)
    return GroupCode(k.text(), h.text(), lname, params, constraints, defaults, sizes, "pointwise", specs)


def _emit_block(k: Emitter, group: Group, names: dict[int, str], block: str) -> None:
    """The work of one block of BLOCK elements, `block` its index."""
    k(f"idx = {block} * BLOCK + tl.arange(0, BLOCK)")
    k("mask = idx < N")
    k("i2 = idx % D2")
    k("rest = idx // D2")
    k("i1 = rest % D1")
    k("i0 = rest // D1")
    for i, node in enumerate(group.inputs):
        offset = f"i0 * in{i}_s0 + i1 * in{i}_s1 + i2 * in{i}_s2"
        k(f"x{i} = tl.load(in{i} + ({offset}), mask=mask, other=0){load_suffix(node)}")
    for node in group.nodes:
        k(pointwise_line(node, names))
    for j, node in enumerate(group.outputs):
        k(f"tl.store(out{j} + idx, {store_value(node, f'out{j}')}, mask=mask)")
