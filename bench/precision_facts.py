"""Precision facts for float32 matrix products: the numbers every prompt quotes, from one file.

    python bench/precision_facts.py --emulate [--out kernelwright/rules/precision_facts.json]
    python bench/precision_facts.py --gpu     [--out $OUT/precision_facts.json]   # on the target GPU

`--emulate` (CPU, seconds) rounds the operands as each scheme does (single-pass TF32, 3xTF32,
bf16, 3xBF16, bf16 with one operand split, fp16, 3xFP16), multiplies the parts exactly (float64) and
compares the result with a float32 reference through the judge's own comparison and input variants
(`kernelwright.judge.check.compare`, `problem.inputs.apply_variant`), at several K. Exact
accumulation: it shows what the operands' rounding costs, not what a tensor core's accumulator does.

`--gpu` (the target) runs Triton kernels for the same schemes and, for the split products, both
accumulation patterns: every product of every K tile into one running accumulator, and each tile's
products from zero added to the running float32 accumulator; it records the device, torch and Triton.
Its output replaces the emulated file: `kernelwright/rules/precision.py` reads whichever is there, and
says which it is ("emulated" or "measured on <device>").
"""
from __future__ import annotations

import argparse
import json
import math
import platform
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kernelwright.judge.check import compare  # noqa: E402 -- after the path fix, for runs from a checkout
from kernelwright.judge.config import JudgeConfig  # noqa: E402
from kernelwright.problem.inputs import DEFAULT_CYCLE, apply_variant  # noqa: E402

M = N = 64
KS = (1024, 4096, 8192)
DEFAULT_OUT = REPO / "kernelwright" / "rules" / "precision_facts.json"


def tf32(x: torch.Tensor) -> torch.Tensor:
    """float32 rounded to TF32 (nearest, ties to even): the low 13 mantissa bits cleared."""
    bits = x.contiguous().view(torch.int32).to(torch.int64)
    rounded = (bits + 0x0FFF + ((bits >> 13) & 1)) & ~0x1FFF
    return rounded.to(torch.int32).view(torch.float32)


def rounder(kind: str):
    return {"tf32": tf32, "bf16": lambda x: x.to(torch.bfloat16).float(),
            "fp16": lambda x: x.to(torch.float16).float()}[kind]


def emulated(scheme: str, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The product as the scheme rounds its operands, multiplied and summed exactly (float64)."""
    kind, _, split = scheme.partition("x")
    r = rounder(kind)
    ah, bh = r(a), r(b)
    if not split:
        parts = [(ah, bh)]
    elif split == "2":  # one operand split: hi_a*b + lo_a*b, b rounded once
        parts = [(ah, bh), (r(a - ah), bh)]
    else:  # three products of the high and low halves; lo*lo dropped
        al, bl = r(a - ah), r(b - bh)
        parts = [(ah, bh), (ah, bl), (al, bh)]
    return sum(x.double() @ y.double() for x, y in parts).float()


SCHEMES = {
    "tf32": ("single-pass TF32", "tf32", 1, "the TF32 rate"),
    "tf32x3": ("3xTF32: TF32 high and low halves, three products", "tf32", 3, "a third of the TF32 rate"),
    "bf16": ("operands cast to bf16", "bf16", 1, "the bf16 rate"),
    "bf16x2": ("2xBF16: one operand split into bf16 halves, the other cast", "bf16", 2, "half the bf16 rate"),
    "bf16x3": ("3xBF16: bf16 high and low halves, three products", "bf16", 3, "a third of the bf16 rate"),
    "fp16": ("operands cast to fp16", "fp16", 1, "the fp16 rate"),
    "fp16x3": ("3xFP16: fp16 high and low halves, three products (overflows above 65504)", "fp16", 3,
               "a third of the fp16 rate"),
}


def judge_errors(product, k: int) -> dict[str, float]:
    """Worst relative L2 error and worst margin (measured / allowed) over the judge's input variants."""
    worst_l2, worst_margin, passed = 0.0, 0.0, True
    for index, variant in enumerate(DEFAULT_CYCLE):
        torch.manual_seed(index)
        a, b = apply_variant([torch.rand(M, k), torch.rand(k, N)], variant)
        result = compare([product(a, b)], [a @ b], JudgeConfig(), "cpu")
        worst_l2 = max(worst_l2, result.rel_l2_err or 0.0)
        worst_margin = max(worst_margin, result.error_ratio or 0.0, result.rel_l2_ratio or 0.0)
        passed = passed and result.ok
    return {"rel_l2": float(f"{worst_l2:.2g}"), "margin": float(f"{worst_margin:.2g}"), "passes": passed}


def emulate() -> dict:
    schemes = []
    for name, (title, kind, products, rate) in SCHEMES.items():
        by_k = {str(k): judge_errors(lambda a, b, n=name: emulated(n, a, b), k) for k in KS}
        schemes.append({"name": name, "title": title, "operand_kind": kind, "products": products, "rate": rate,
                        "fits_float32": all(v["passes"] for v in by_k.values()), "by_k": by_k})
    return {"schemes": schemes, "source": "emulated", "how": (
        "bench/precision_facts.py --emulate: operands rounded as the scheme does, products summed exactly "
        f"(float64), compared through the judge's comparison on its input variants, M = N = {M}"),
        "machine": platform.machine(), "torch": torch.__version__}


# ----------------------------------------------------------------------------------------- on the GPU

GPU_KERNELS = r'''
import triton
import triton.language as tl


@triton.jit
def _split(x, KIND: tl.constexpr):
    if KIND == "bf16":
        hi = x.to(tl.bfloat16)
        return hi, (x - hi.to(tl.float32)).to(tl.bfloat16)
    if KIND == "fp16":
        hi = x.to(tl.float16)
        return hi, (x - hi.to(tl.float32)).to(tl.float16)
    hi = ((x.to(tl.uint32, bitcast=True) + 0x1000) & 0xFFFFE000).to(tl.float32, bitcast=True)
    return hi, x - hi


@triton.jit
def mm_schemes(a_ptr, b_ptr, c_ptr, M, N, K, KIND: tl.constexpr, PRODUCTS: tl.constexpr, PER_TILE: tl.constexpr,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros([BM, BN], tl.float32)
    for k in range(0, K, BK):
        rk = k + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        a_hi, a_lo = _split(a, KIND)
        b_hi, b_lo = _split(b, KIND)
        prec: tl.constexpr = "tf32" if KIND == "tf32" else "ieee"
        if PER_TILE:
            part = tl.dot(a_hi, b_hi, input_precision=prec, out_dtype=tl.float32)
            if PRODUCTS >= 2:
                part = tl.dot(a_lo, b_hi, part, input_precision=prec, out_dtype=tl.float32)
            if PRODUCTS >= 3:
                part = tl.dot(a_hi, b_lo, part, input_precision=prec, out_dtype=tl.float32)
            acc += part
        else:
            if PRODUCTS >= 3:
                acc = tl.dot(a_hi, b_lo, acc, input_precision=prec, out_dtype=tl.float32)
            if PRODUCTS >= 2:
                acc = tl.dot(a_lo, b_hi, acc, input_precision=prec, out_dtype=tl.float32)
            acc = tl.dot(a_hi, b_hi, acc, input_precision=prec, out_dtype=tl.float32)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def mm_tf32x3_builtin(a_ptr, b_ptr, c_ptr, M, N, K, PER_TILE: tl.constexpr,
                      BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros([BM, BN], tl.float32)
    for k in range(0, K, BK):
        rk = k + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        if PER_TILE:
            acc += tl.dot(a, b, input_precision="tf32x3")
        else:
            acc = tl.dot(a, b, acc, input_precision="tf32x3")
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))
'''


def measure_gpu(out_dir: Path) -> dict:
    import importlib.util

    import triton

    path = out_dir / "precision_kernels.py"
    path.write_text(GPU_KERNELS)
    spec = importlib.util.spec_from_file_location("precision_kernels", path)
    kernels = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kernels)
    size = 256

    def launch(kind, products, per_tile, builtin=False):
        def product(a, b):
            a, b = a.cuda().contiguous(), b.cuda().contiguous()
            c = torch.empty(a.shape[0], b.shape[1], device="cuda")
            grid = (triton.cdiv(a.shape[0], 64), triton.cdiv(b.shape[1], 64))
            if builtin:
                kernels.mm_tf32x3_builtin[grid](a, b, c, a.shape[0], b.shape[1], a.shape[1], PER_TILE=per_tile,
                                                BM=64, BN=64, BK=32)
            else:
                kernels.mm_schemes[grid](a, b, c, a.shape[0], b.shape[1], a.shape[1], KIND=kind, PRODUCTS=products,
                                         PER_TILE=per_tile, BM=64, BN=64, BK=32)
            return c.cpu()
        return product

    global M, N
    M = N = size
    schemes = []
    for name, (title, kind, products, rate) in SCHEMES.items():
        patterns = {"per_tile": True, "running": False} if products > 1 else {"per_tile": True}
        for pattern, per_tile in patterns.items():
            by_k = {str(k): judge_errors(launch(kind, products, per_tile), k) for k in KS}
            schemes.append({"name": name, "title": title, "operand_kind": kind, "products": products, "rate": rate,
                            "accumulation": pattern, "fits_float32": all(v["passes"] for v in by_k.values()),
                            "by_k": by_k})
    for pattern, per_tile in {"per_tile": True, "running": False}.items():
        by_k = {str(k): judge_errors(launch("tf32", 3, per_tile, builtin=True), k) for k in KS}
        schemes.append({"name": "tf32x3-builtin", "title": "tl.dot(input_precision=\"tf32x3\")", "operand_kind": "tf32",
                        "products": 3, "rate": "a third of the TF32 rate", "accumulation": pattern,
                        "fits_float32": all(v["passes"] for v in by_k.values()), "by_k": by_k})
    return {"schemes": schemes, "source": f"measured on {torch.cuda.get_device_name()}", "how": (
        f"bench/precision_facts.py --gpu: Triton kernels, M = N = {size}, BK = 32, the judge's comparison on "
        "its input variants"), "torch": torch.__version__, "triton": triton.__version__}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--emulate", action="store_true")
    mode.add_argument("--gpu", action="store_true")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    facts = emulate() if args.emulate else measure_gpu(args.out.parent)
    args.out.write_text(json.dumps(facts, indent=1) + "\n")
    for scheme in facts["schemes"]:
        worst = max(v["rel_l2"] for v in scheme["by_k"].values())
        print(f"{scheme['name']:<16} {scheme.get('accumulation', ''):<9} fits float32: {scheme['fits_float32']!s:<5} "
              f"worst rel L2 {worst:.2g}" + ("" if math.isfinite(worst) else " (non-finite)"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
