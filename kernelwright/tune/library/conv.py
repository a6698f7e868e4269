"""Convolution (1-3D, groups, stride, padding, dilation; transposed too) as an implicit GEMM with
the pointwise ops after it fused as an epilogue.

Per group g of the convolution, output = A @ B with M = batch x output positions, N = output
channels of the group, K = input channels of the group x kernel taps. Nothing is materialised:
each K step decomposes its indices into (channel, kd, kh, kw) and gathers the A tile from the
input through its strides (positions outside the input read 0: the padding), the B tile from the
weight. 1-D and 2-D convolutions are 3-D ones with unit leading dims, which compile away. Kernel
sizes, strides, padding and dilation are literals of the kernel (fixed by the reference's module);
the output size follows the input's at run time.

A transposed convolution's output o reads input (o + p - k*d) / s where that is whole: with
stride s, only about 1/s of the taps reach a given output. So the outputs are taken by phase
(o = r + s*j, one launch per phase r of each dim), and a phase runs as a dense convolution over
the taps that reach it (runtime.kw_phase_taps: taps k0 + step*t, input j + c0 - c1*t): no
multiply is spent on a tap that does not contribute.

The product is tl.dot (fp32 inputs: exact "ieee" or "tf32x3", which keeps fp32 accuracy; plain
tf32 only when the judge allows it), or, for groups with few output channels (depthwise), a direct
product (DOT=0) that needs no 16-wide tiles. Tunable: BLOCK_M/N/K, GROUP_M, num_warps, num_stages,
PRECISION (fp32), DOT (few channels per group).
"""
from __future__ import annotations

import math

import torch

from .codegen import (
                      Emitter, GroupCode, call_args, choose_default, load_suffix, operand_names, pointwise_line, pow2_range,
                      store_value, torch_dtype)
from .fuse import Group
from .runtime import kw_phase_taps


def _pad3(values: tuple, fill: int) -> tuple:
    return (fill,) * (3 - len(values)) + tuple(values)


def _epilogue_inputs(group: Group) -> list[int]:
    read = {a.id for node in group.nodes[1:] for a in node.args if hasattr(a, "id")}
    return [i for i, x in enumerate(group.inputs) if x.id in read]


def _phase_lines() -> list[str]:
    """A transposed convolution's phase: input j + c0 - c1*t, weight tap k0 + step*t."""
    lines = []
    for name in "dhw":
        up = name.upper()
        lines += [f"p_{name} = j_{name}[:, None] + C0_{up} - t_{name}[None, :] * C1_{up}",
                  f"ok_{name} = (p_{name} >= 0) & (p_{name} < {up})",
                  f"k_{name} = K0_{up} + t_{name} * KS_{up}"]
    return lines


def _position_lines(conv) -> list[str]:
    """Input positions p_d/p_h/p_w of the A tile and their validity ok_*, per window dim."""
    kernel = _pad3(conv.params["kernel"], 1)
    stride, padding = _pad3(conv.params["stride"], 1), _pad3(conv.params["padding"], 0)
    dilation = _pad3(conv.params["dilation"], 1)
    lines = []
    for axis, name in enumerate("dhw"):
        size, s, p, d = "DHW"[axis], stride[axis], padding[axis], dilation[axis]
        if kernel[axis] == 1 and s == 1 and p == 0:
            lines += [f"p_{name} = o_{name}[:, None] + k_{name}[None, :] * 0", f"ok_{name} = p_{name} < {size}"]
        else:
            lines += [f"p_{name} = o_{name}[:, None] * {s} - {p} + k_{name}[None, :] * {d}",
                      f"ok_{name} = (p_{name} >= 0) & (p_{name} < {size})"]
    return lines


def _emit_kernel(group: Group, kname: str, fp32: bool) -> str:
    conv = group.anchor
    names = operand_names(group)
    epi = _epilogue_inputs(group)
    has_bias = len(conv.args) > 2
    transposed = conv.params["transposed"]
    kd, kh, kw = ("T_D", "T_H", "T_W") if transposed else _pad3(conv.params["kernel"], 1)
    k = Emitter()
    k("@triton.jit")
    sig = ["x", "w"] + (["bias", "s_bias"] if has_bias else []) + [f"in{i}" for i in epi]
    sig += [f"out{j}" for j in range(len(group.outputs))] + [f"sc{i}" for i in range(len(group.scalars))]
    sig += ["M", "COG", "K", "CIG", "OD", "OH", "OW", "D", "H", "W", "sx_n", "sx_c", "sx_d", "sx_h", "sx_w",
            "sw_g", "sw_o", "sw_i", "sw_d", "sw_h", "sw_w"]
    if transposed:  # per dim: taps, first tap, tap step, input offset and step, output phase and stride
        sig += [f"{v}_{d}" for d in "DHW" for v in ("T", "K0", "KS", "C0", "C1", "R", "S")]
    for prefix in [f"in{i}" for i in epi] + [f"out{j}" for j in range(len(group.outputs))]:
        sig += [f"{prefix}_s{d}" for d in range(5)]
    sig += [f"{n}: tl.constexpr" for n in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "PRECISION", "DOT", "INDEX64")]
    k(f"def {kname}({call_args(sig)}):")
    k.push()
    for line in [
        "pid = tl.program_id(0)",
        "g = tl.program_id(1)",
        "num_pid_m = tl.cdiv(M, BLOCK_M)",
        "num_pid_n = tl.cdiv(COG, BLOCK_N)",
        "num_pid_in_group = GROUP_M * num_pid_n",
        "first_pid_m = (pid // num_pid_in_group) * GROUP_M",
        "group_size_m = min(num_pid_m - first_pid_m, GROUP_M)",
        "pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)",
        "pid_n = (pid % num_pid_in_group) // group_size_m",
        "offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)",
        "if INDEX64:",
        "    offs_m = offs_m.to(tl.int64)",
        "offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)",
        "m_ok = offs_m < M",
        "n_ok = offs_n < COG",
        "j_w = offs_m % OW",
        "t = offs_m // OW",
        "j_h = t % OH",
        "t = t // OH",
        "j_d = t % OD",
        "n_i = t // OD",
        *(["o_d = R_D + S_D * j_d", "o_h = R_H + S_H * j_h", "o_w = R_W + S_W * j_w"] if transposed
          else ["o_d = j_d", "o_h = j_h", "o_w = j_w"]),
        "x_row = n_i * sx_n + (g * CIG) * sx_c",
        "w_col = g * sw_g + offs_n * sw_o",
        "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
        "for k0 in range(0, K, BLOCK_K):",
    ]:
        k(line)
    k.push()
    tap = "t" if transposed else "k"  # a transposed phase counts its own taps; the weight tap follows
    for line in ["kk = k0 + tl.arange(0, BLOCK_K)", "k_ok = kk < K", f"{tap}_w = kk % {kw}", f"t2 = kk // {kw}",
                 f"{tap}_h = t2 % {kh}", f"t2 = t2 // {kh}", f"{tap}_d = t2 % {kd}", f"ci = t2 // {kd}"]:
        k(line)
    for line in (_phase_lines() if transposed else _position_lines(conv)):
        k(line)
    k("a_off = x_row[:, None] + ci[None, :] * sx_c + p_d * sx_d + p_h * sx_h + p_w * sx_w")
    k("a = tl.load(x + a_off, mask=m_ok[:, None] & k_ok[None, :] & ok_d & ok_h & ok_w, other=0.0)")
    k("b_off = w_col[None, :] + (ci * sw_i + k_d * sw_d + k_h * sw_h + k_w * sw_w)[:, None]")
    k("b = tl.load(w + b_off, mask=k_ok[:, None] & n_ok[None, :], other=0.0)")
    k("if DOT:")
    k("    acc = tl.dot(a, b, acc" + (", input_precision=PRECISION)" if fp32 else ")"))
    k("else:")
    k("    acc += tl.sum(a.to(tl.float32)[:, :, None] * b.to(tl.float32)[None, :, :], axis=1)")
    k.pop()
    k("co = (g * COG + offs_n)[None, :]")
    k("mask = m_ok[:, None] & n_ok[None, :]")
    if has_bias:
        k(f"{conv.name} = acc + tl.load(bias + co * s_bias, mask=n_ok[None, :], other=0.0).to(tl.float32)")
    else:
        k(f"{conv.name} = acc")
    where = "n_i[:, None] * {p}_s0 + co * {p}_s1 + o_d[:, None] * {p}_s2 + o_h[:, None] * {p}_s3 + o_w[:, None] * {p}_s4"
    for i in epi:
        k(f"x{i} = tl.load(in{i} + ({where.format(p=f'in{i}')}), mask=mask, other=0){load_suffix(group.inputs[i])}")
    for node in group.nodes[1:]:
        k(pointwise_line(node, names))
    for j, node in enumerate(group.outputs):
        k(f"tl.store(out{j} + ({where.format(p=f'out{j}')}), {store_value(node, f'out{j}')}, mask=mask)")
    k.pop()
    return k.text()


def _output_size_lines(conv, nd: int) -> list[str]:
    if conv.params["transposed"]:
        formula = ("(spatial[i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (kernel[i] - 1) "
                   "+ output_padding[i] + 1")
    else:
        formula = "(spatial[i] + 2 * padding[i] - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1"
    return [f"out_sp = tuple({formula} for i in range({nd}))"]


def _emit_launcher(group: Group, kname: str, lname: str, prefix: str, fp32: bool, dot_param: bool) -> str:
    conv = group.anchor
    nd = len(conv.params["kernel"])
    transposed = conv.params["transposed"]
    index = {x.id: i for i, x in enumerate(group.inputs)}
    epi = [f"in{i}" for i in _epilogue_inputs(group)]
    inputs = [f"in{i}" for i in range(len(group.inputs))]
    scalars = [f"sc{i}" for i in range(len(group.scalars))]
    outs = [f"out{j}" for j in range(len(group.outputs))]
    groups = conv.params["groups"]
    p = lambda name: f"KW_PARAMS[{prefix + name!r}]"  # noqa: E731
    h = Emitter()
    h(f"def {lname}({call_args(inputs + scalars)}):")
    h.push()
    h(f"kw_check_device({call_args(inputs)})")
    h(f"x, w = in{index[conv.args[0].id]}, in{index[conv.args[1].id]}")
    if len(conv.args) > 2:
        h(f"bias = in{index[conv.args[2].id]}")
    h(f"stride, padding, dilation = {conv.params['stride']!r}, {conv.params['padding']!r}, "
      f"{conv.params['dilation']!r}")
    h(f"output_padding = {conv.params['output_padding']!r}")
    h("kernel, spatial = tuple(w.shape[2:]), tuple(x.shape[2:])")
    for line in _output_size_lines(conv, nd):
        h(line)
    h(f"groups = {groups}")
    h(f"cout = {'w.shape[1] * groups' if transposed else 'w.shape[0]'}")
    h("cig, cog = x.shape[1] // groups, cout // groups")
    h("shape = (x.shape[0], cout) + out_sp")
    for j, node in enumerate(group.outputs):
        h(f"out{j} = torch.empty(shape, device=x.device, dtype={torch_dtype(node.dtype)})")
    ret = call_args(outs) + ("," if len(outs) == 1 else "")
    h("m = x.shape[0] * kw_numel(out_sp)")
    h("if m * cout == 0:")
    h(f"    return {ret}")
    h(f"pad = (1,) * {3 - nd}")
    h("sx, sw = list(x.stride()), list(w.stride())")
    h(f"zero = [0] * {3 - nd}")
    if transposed:  # weight (Cin, Cout/groups, k...): the input channel of group g starts at g * cig
        h("w_roles = [cig * sw[0], sw[1], sw[0]] + zero + sw[2:]")
    else:
        h("w_roles = [cog * sw[0], sw[0], sw[1]] + zero + sw[2:]")
    h(f"mn = [{call_args([f'kw_strides({t}, shape)' for t in epi + outs])}]")
    h("mn = [s[:2] + zero + s[2:] for s in mn]")
    h(f"block_m, block_n = {p('BLOCK_M')}, {p('BLOCK_N')}")
    bias_args = ["bias", "bias.stride(0)"] if len(conv.args) > 2 else []
    precision = p("PRECISION") if fp32 else '"ieee"'
    dot = p("DOT") if dot_param else "1"
    h(f"options = dict(BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K={p('BLOCK_K')}, GROUP_M={p('GROUP_M')}, "
      f"PRECISION={precision}, DOT={dot}, INDEX64=max(x.numel(), kw_numel(shape)) >= 2**31, "
      f"num_warps={p('num_warps')}, num_stages={p('num_stages')})")
    h(f"tensors = ({call_args(['x', 'w'] + bias_args + epi + outs + scalars)},)")
    h("strides_in = (*(pad + spatial), sx[0], sx[1], *(zero + sx[2:]), *w_roles)")
    h("strides_out = [v for s in mn for v in s]")
    if not transposed:
        h("grid = (triton.cdiv(m, block_m) * triton.cdiv(cog, block_n), groups)")
        h(f"{kname}[grid](*tensors, m, cog, cig * kw_numel(kernel), cig, *(pad + out_sp), *strides_in, *strides_out, "
          "**options)")
    else:
        h("# one launch per output phase: a dense convolution over the taps that reach it")
        h("s3, p3, d3, k3, o3 = (pad + stride, (0,) * len(pad) + padding, pad + dilation, pad + kernel, pad + out_sp)")
        h("for phase in [(a, b, c) for a in range(s3[0]) for b in range(s3[1]) for c in range(s3[2])]:")
        h.push()
        h("counts = [triton.cdiv(o3[i] - phase[i], s3[i]) for i in range(3)]")
        h("if min(counts) <= 0:")
        h("    continue")
        h("taps = [kw_phase_taps(phase[i], s3[i], p3[i], d3[i], k3[i]) for i in range(3)]")
        h("m = x.shape[0] * counts[0] * counts[1] * counts[2]")
        h("k_size = cig * taps[0][2] * taps[1][2] * taps[2][2]")
        h("phase_args = [v for i in range(3) for v in (max(1, taps[i][2]), taps[i][0], taps[i][1], taps[i][3], "
          "taps[i][4], phase[i], s3[i])]")
        h("grid = (triton.cdiv(m, block_m) * triton.cdiv(cog, block_n), groups)")
        h(f"{kname}[grid](*tensors, m, cog, k_size, cig, *counts, *strides_in, *phase_args, *strides_out, **options)")
        h.pop()
    h(f"return {ret}")
    h.pop()
    return h.text()


def _gemm_sizes(conv) -> tuple[int, int, int]:
    """(M, N, K) of each group's implicit GEMM at the example sizes (a transposed convolution: of
    its largest phase)."""
    x, w = conv.args[:2]
    groups = conv.params["groups"]
    cout = w.shape[1] * groups if conv.params["transposed"] else w.shape[0]
    outputs, taps = list(conv.shape[2:]), list(conv.params["kernel"])
    if conv.params["transposed"]:
        dims = zip(conv.params["stride"], conv.params["padding"], conv.params["dilation"], conv.params["kernel"],
                   strict=True)
        taps = [max(kw_phase_taps(r, s, p, d, k)[2] for r in range(s)) for s, p, d, k in dims]
        outputs = [-(-o // s) for o, s in zip(outputs, conv.params["stride"], strict=True)]
    return conv.shape[0] * math.prod(outputs), cout // groups, (x.shape[1] // groups) * math.prod(taps)


def generate(group: Group, prefix: str, env: dict, allow_tf32: bool = False) -> GroupCode:
    conv = group.anchor
    fp32 = conv.args[0].dtype == torch.float32
    m_size, n_size, k_size = _gemm_sizes(conv)
    few = n_size < 16  # few output channels per group: a direct product may beat 16-wide dot tiles
    kname, lname = f"_kw_g{group.index}_kernel", f"_kw_g{group.index}"
    kernel = _emit_kernel(group, kname, fp32)
    launcher = _emit_launcher(group, kname, lname, prefix, fp32, few)
    bm, bn, bk, w, s, g, dot = (prefix + x for x in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages",
                                                      "GROUP_M", "DOT"))
    ms, ns, ks, es = (prefix + x for x in ("M", "N", "K", "ELEM_BYTES"))
    params = {bm: [16, 32, 64, 128, 256], bn: pow2_range(1 if few else 16, 256), bk: pow2_range(1 if few else 16, 128),
              g: [1, 8], w: [2, 4, 8], s: [2, 3, 4]}
    specs = {g: {"kind": "order"}}
    if fp32:
        params[prefix + "PRECISION"] = ["ieee", "tf32x3"] + (["tf32"] if allow_tf32 else [])
        specs[prefix + "PRECISION"] = {"choice": True, "kind": "precision"}
    if few:
        params[dot] = [1, 0]
        specs[dot] = {"choice": True, "kind": "algorithm"}

    def with_dot(text: str) -> str:
        return f"{dot} == 0 or {text}" if few else text

    constraints = [
        f"{bm} <= max(16, next_pow2({ms}))",
        f"{bn} <= max(16, next_pow2({ns}))",
        f"{bk} <= max(16, next_pow2({ks}))",
        f"{g} == 1 or next_pow2({ms}) > {bm}",  # grouping needs more than one row of tiles
        with_dot(f"{bn} >= 16 and {bk} >= 16"),  # tl.dot tiles are at least 16 wide
        with_dot(f"({bm} + {bn}) * {bk} * {es} * {s} <= SMEM"),  # the pipelined A and B tiles fit
        with_dot(f"{bm} * {bn} <= {w} * WARP_SIZE * 128"),  # at most 128 fp32 accumulators per thread
        with_dot(f"{bm} * {bn} >= {w} * WARP_SIZE * 4"),  # no warp left without work
    ]
    if few:
        constraints += [
            f"{dot} == 1 or {bn} <= next_pow2({ns})",  # no more columns than output channels
            f"{dot} == 1 or {bm} * {bk} * {bn} <= {w} * WARP_SIZE * 64",  # the direct product's registers
            f"{dot} == 1 or {bm} * {bn} >= {w} * WARP_SIZE",  # every thread owns an output
            f"{dot} == 1 or {s} == 2",  # nothing to pipeline in the direct product: one stage setting
        ]
    sizes = {ms: m_size, ns: n_size, ks: k_size, es: conv.args[0].dtype.itemsize}
    if few and n_size < 4:
        preferred = {bm: 128, bn: 1 << max(0, (n_size - 1).bit_length()), bk: min(16, 1 << (k_size - 1).bit_length()),
                     g: 1, w: 4, s: 2, dot: 0}
    else:
        preferred = {bm: 64, bn: min(64, max(16, 1 << (n_size - 1).bit_length())), bk: 32, g: 8, w: 4, s: 3}
        if few:
            preferred[dot] = 1
    if fp32:
        preferred[prefix + "PRECISION"] = "ieee"
    defaults = choose_default(params, constraints, {**env, **sizes}, preferred, specs)
    return GroupCode(kernel, launcher, lname, params, constraints, defaults, sizes, "conv", specs)
