"""Max/avg pooling over the last 1-3 dims, with the pointwise ops after it fused as an epilogue.

A program computes BLOCK outputs (flat index over the output); each output walks its window,
reading the input through its strides (the leading dims merge into two), skipping the padding
(max) or counting it as PyTorch does (avg: count_include_pad, divisor_override, windows clipped
by ceil_mode). 1-D and 2-D pooling are 3-D pooling with unit leading window dims, which compile
away. Window sizes, strides, padding and dilation are literals of the generated kernel (fixed by
the reference's op); the output size follows the input's at run time. Tunable: BLOCK, num_warps.
"""
from __future__ import annotations

import math

from .codegen import (
    Emitter, GroupCode, call_args, choose_default, load_suffix, operand_names, pointwise_line, pow2_range,
    store_value, torch_dtype,
)
from .fuse import Group

MAX_UNROLLED = 27  # windows up to this volume are unrolled whole; larger ones loop over their outer dims


def _pad3(values: tuple, fill: int) -> tuple:
    return (fill,) * (3 - len(values)) + tuple(values)


def _epilogue_inputs(group: Group) -> list[int]:
    read = {a.id for node in group.nodes[1:] for a in node.args if hasattr(a, "id")}
    return [i for i, x in enumerate(group.inputs) if x.id in read]


def _window_loops(k: Emitter, pool, volume: int) -> None:
    """Open the three window loops (the caller closes them), bounds-checking each dim."""
    kernel, dilation = _pad3(pool.params["kernel"], 1), _pad3(pool.params["dilation"], 1)
    for axis, name in enumerate("dhw"):
        loop = "tl.static_range" if volume <= MAX_UNROLLED or axis == 2 else "range"
        k(f"for k{name} in {loop}({kernel[axis]}):")
        k.push()
        k(f"p_{name} = {name}0 + k{name} * {dilation[axis]}")
        k(f"ok_{name} = (p_{name} >= 0) & (p_{name} < {'DHW'[axis]})")


def _emit_kernel(group: Group, kname: str) -> str:
    pool = group.anchor
    names = operand_names(group)
    epi = _epilogue_inputs(group)
    n_out = len(group.outputs)
    kernel, stride, padding = (_pad3(pool.params[n], f) for n, f in (("kernel", 1), ("stride", 1), ("padding", 0)))
    volume = math.prod(kernel)
    is_max = pool.op == "max"
    k = Emitter()
    k("@triton.jit")
    sig = ["x"] + [f"in{i}" for i in epi] + [f"out{j}" for j in range(n_out)] + [f"sc{i}" for i in range(len(group.scalars))]
    sig += ["N", "C", "OD", "OH", "OW", "D", "H", "W", "sx_n", "sx_c", "sx_d", "sx_h", "sx_w", "D1", "D2"]
    sig += [f"in{i}_s{d}" for i in epi for d in range(3)]
    sig += ["BLOCK: tl.constexpr", "INDEX64: tl.constexpr"]
    k(f"def {kname}({call_args(sig)}):")
    k.push()
    k("pid = tl.program_id(0)")
    k("if INDEX64:")
    k("    pid = pid.to(tl.int64)")
    k("idx = pid * BLOCK + tl.arange(0, BLOCK)")
    k("mask = idx < N")
    for line in ["o_w = idx % OW", "t = idx // OW", "o_h = t % OH", "t = t // OH", "o_d = t % OD", "t = t // OD",
                 "base = (t // C) * sx_n + (t % C) * sx_c"]:
        k(line)
    for axis, name in enumerate("dhw"):
        k(f"{name}0 = o_{name} * {stride[axis]} - {padding[axis]}")
    neutral = '-float("inf")' if is_max else "0.0"
    k(f"acc = tl.full([BLOCK], {neutral}, tl.float32)")
    _window_loops(k, pool, volume)
    k("ok = mask & ok_d & ok_h & ok_w")
    k(f"v = tl.load(x + (base + p_d * sx_d + p_h * sx_h + p_w * sx_w), mask=ok, other={neutral}).to(tl.float32)")
    k("acc = tl.maximum(acc, v)" if is_max else "acc = acc + v")
    for _ in range(3):
        k.pop()
    if not is_max:
        k(f"{pool.name} = acc / ({_divisor(pool, kernel, padding)})")
    else:
        k(f"{pool.name} = acc")
    k("i2 = idx % D2")
    k("rest = idx // D2")
    k("i1 = rest % D1")
    k("i0 = rest // D1")
    for i in epi:
        offset = f"i0 * in{i}_s0 + i1 * in{i}_s1 + i2 * in{i}_s2"
        k(f"x{i} = tl.load(in{i} + ({offset}), mask=mask, other=0){load_suffix(group.inputs[i])}")
    for node in group.nodes[1:]:
        k(pointwise_line(node, names))
    for j, node in enumerate(group.outputs):
        k(f"tl.store(out{j} + idx, {store_value(node, f'out{j}')}, mask=mask)")
    k.pop()
    return k.text()


def _divisor(pool, kernel: tuple, padding: tuple) -> str:
    """The average's divisor: divisor_override, else the window clipped to the padded input
    (count_include_pad) or to the input itself."""
    if pool.params.get("divisor"):
        return f"{float(pool.params['divisor'])!r}"
    include_pad = pool.params.get("count_include_pad", True)
    factors = []
    for axis, name in enumerate("dhw"):
        size, kk, pp = "DHW"[axis], kernel[axis], padding[axis]
        if kk == 1 and pp == 0:
            continue
        end = f"tl.minimum({name}0 + {kk}, {size} + {pp})"
        if include_pad:
            factors.append(f"({end} - {name}0)")
        else:
            factors.append(f"(tl.minimum({end}, {size}) - tl.maximum({name}0, 0))")
    return " * ".join(f"{f}.to(tl.float32)" for f in factors) or "1.0"


def _emit_launcher(group: Group, kname: str, lname: str, prefix: str) -> str:
    pool = group.anchor
    nd = len(pool.params["kernel"])
    index = {x.id: i for i, x in enumerate(group.inputs)}
    epi = [f"in{i}" for i in _epilogue_inputs(group)]
    inputs = [f"in{i}" for i in range(len(group.inputs))]
    scalars = [f"sc{i}" for i in range(len(group.scalars))]
    outs = [f"out{j}" for j in range(len(group.outputs))]
    window = [pool.params[n] for n in ("kernel", "stride", "padding", "dilation")]
    h = Emitter()
    h(f"def {lname}({call_args(inputs + scalars)}):")
    h.push()
    h(f"kw_check_device({call_args(inputs)})")
    h(f"x = in{index[pool.args[0].id]}")
    h(f"lead, spatial = tuple(x.shape[:-{nd}]), tuple(x.shape[-{nd}:])")
    h(f"kernel, stride, padding, dilation = {window[0]!r}, {window[1]!r}, {window[2]!r}, {window[3]!r}")
    h(f"out_sp = tuple(kw_pool_size(spatial[i], kernel[i], stride[i], padding[i], dilation[i], "
      f"{pool.params['ceil_mode']!r}) for i in range({nd}))")
    h("shape = lead + out_sp")
    for j, node in enumerate(group.outputs):
        h(f"out{j} = torch.empty(shape, device=x.device, dtype={torch_dtype(node.dtype)})")
    ret = call_args(outs) + ("," if len(outs) == 1 else "")
    h("n = kw_numel(shape)")
    h("if n == 0:")
    h(f"    return {ret}")
    h("(_, c), (st_nc,) = kw_merge(lead, [list(x.stride())[:len(lead)]], range(len(lead)), 2)")
    h(f"pad = (1,) * {3 - nd}")
    h(f"st_sp = (0,) * {3 - nd} + tuple(x.stride())[-{nd}:]")
    h(f"sizes, strides = kw_merge(shape, [{call_args([f'kw_strides({e}, shape)' for e in epi])}], "
      "range(len(shape)), 3)")
    h(f"block = KW_PARAMS[{prefix + 'BLOCK'!r}]")
    h(f"{kname}[(triton.cdiv(n, block),)](")
    h(f"    {call_args(['x'] + epi + outs + scalars)},")
    h("    n, c, *(pad + out_sp), *(pad + spatial), st_nc[0], st_nc[1], *st_sp, sizes[1], sizes[2],")
    h("    *[s for st in strides for s in st],")
    h(f"    BLOCK=block, INDEX64=max(n, x.numel()) >= 2**31, num_warps=KW_PARAMS[{prefix + 'num_warps'!r}])")
    h(f"return {ret}")
    h.pop()
    return h.text()


def generate(group: Group, prefix: str, env: dict) -> GroupCode:
    kname, lname = f"_kw_g{group.index}_kernel", f"_kw_g{group.index}"
    kernel = _emit_kernel(group, kname)
    launcher = _emit_launcher(group, kname, lname, prefix)
    b, w, n = prefix + "BLOCK", prefix + "num_warps", prefix + "N"
    params = {b: pow2_range(64, 4096), w: [1, 2, 4, 8, 16]}
    constraints = [
        f"{b} >= {w} * WARP_SIZE",  # every thread computes at least one output
        f"{b} <= {w} * WARP_SIZE * 16",  # at most 16 outputs per thread (each walks its whole window)
        f"{b} <= max(64, next_pow2({n}))",  # no block larger than the output
    ]
    sizes = {n: math.prod(group.domain)}
    defaults = choose_default(params, constraints, {**env, **sizes}, {b: 512, w: 4})
    return GroupCode(kernel, launcher, lname, params, constraints, defaults, sizes, "pool")
