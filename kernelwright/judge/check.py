"""Correctness: reference trial cases, and comparing a candidate's outputs against them.

The comparison is two-sided on purpose. Elementwise `allclose` (atol = rtol, KernelBench's test)
alone accepts an all-zero softmax over a very wide row, because every true value is below atol;
the relative L2 error ||out - ref|| / ||ref|| of that output is 1, so the second test rejects it.

Tensors are compared in chunks on the output's device: KernelBench outputs reach gigabytes, and a
float64 copy of a whole output would not fit in memory.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import torch

from ..problem.inputs import variant_for_trial

CHUNK_ELEMENTS = 1 << 24
RMS_FLOOR_OF_ATOL = 0.01
# bytes the judge fills freed memory with before each candidate call (see guards.poison_allocator)
POISON_BYTES = (0xFF, 0xFE)  # GPU fill; CPU malloc perturb fill (MALLOC_PERTURB_=1 -> ~1 = 0xFE)
_FLOAT_RANK = {torch.float64: 3, torch.float32: 2, torch.float16: 1, torch.bfloat16: 1}


class OutputError(Exception):
    """The candidate returned something that is not a tensor (or a tuple/list of tensors)."""


@dataclass
class TrialCase:
    """One correctness trial: how to regenerate its inputs, and the reference's outputs (on CPU)."""

    index: int
    seed: int
    variant: str
    ref_outputs: list[torch.Tensor]
    fallback_from: str | None = None
    pinned: list[torch.Tensor] = field(default_factory=list)  # reference outputs kept alive on device


@dataclass
class Comparison:
    ok: bool
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    rel_l2_err: float | None = None
    shape_ok: bool = True
    dtype_ok: bool = True
    nonfinite: bool = False
    poisoned: int = 0  # output elements still holding the allocator poison: never written
    message: str = ""


def make_inputs(problem, seed: int, variant: str, device: str) -> list:
    """Inputs of one trial; every RNG a get_inputs() might use is seeded, so they regenerate exactly."""
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % 2**32)
    except ImportError:  # numpy is optional here
        pass
    return problem.make_inputs(seed, variant, device)


def flatten_outputs(out) -> list[torch.Tensor]:
    """A forward's result as a flat list of tensors; numbers become 0-d tensors."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for item in out for t in flatten_outputs(item)]
    if isinstance(out, (bool, int, float)):
        return [torch.tensor(out)]
    raise OutputError(f"forward returned {type(out).__name__}; expected a tensor or a tuple/list of tensors")


def all_finite(tensors: list[torch.Tensor]) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in tensors if t.is_floating_point() or t.is_complex())


def reference_case(problem, model, index: int, seed: int, variant: str, device: str, sync) -> tuple[TrialCase, bool]:
    """Run the reference on one trial's inputs; also report whether it mutated its inputs.

    A variant on which the reference itself is non-finite (while "given" is finite) lies outside
    the op's domain: the trial falls back to "given" and records which variant it replaced.
    """
    outs, mutated = _run_reference(problem, model, seed, variant, device, sync)
    fallback = None
    if variant != "given" and not all_finite(outs):
        given, given_mutated = _run_reference(problem, model, seed, "given", device, sync)
        if all_finite(given):
            outs, mutated, fallback, variant = given, given_mutated, variant, "given"
    cpu = [o.detach().to("cpu", copy=True) for o in outs]
    return TrialCase(index, seed, variant, cpu, fallback_from=fallback, pinned=outs), mutated


def _run_reference(problem, model, seed, variant, device, sync) -> tuple[list[torch.Tensor], bool]:
    inputs = make_inputs(problem, seed, variant, device)
    before = [fingerprint(x) for x in inputs]
    torch.manual_seed(seed)
    with torch.no_grad():
        outs = flatten_outputs(model(*inputs))
    sync()
    mutated = any(fingerprint(x) != b for x, b in zip(inputs, before))
    return [o.detach() for o in outs], mutated


def reference_cases(problem, model, trials: int, seed: int, device: str, sync) -> tuple[list[TrialCase], TrialCase, bool]:
    """All trials' reference outputs, plus one extra case used to refill input buffers in place."""
    cases, mutates = [], False
    for i in range(trials):
        case, mutated = reference_case(problem, model, i, seed + i, variant_for_trial(i), device, sync)
        if i > 0:
            case.pinned = []  # only trial 0's outputs stay on the device (see worker: fresh trial)
        cases.append(case)
        mutates |= mutated
    # same variant as trial 0 (which the candidate must already handle), other values
    refill, mutated = reference_case(problem, model, trials, seed + 1000, cases[0].variant, device, sync)
    refill.pinned = []
    return cases, refill, mutates | mutated


def fingerprint(x) -> tuple:
    """A cheap content hash of a tensor (chunked integer sums of its bit pattern), or the value itself.

    Used to see whether a call changed its inputs without keeping a full copy of each input.
    """
    if not isinstance(x, torch.Tensor):
        return ("value", repr(x))
    flat = x.detach().contiguous().reshape(-1)
    bits = _as_int(flat)
    total, squares = 0, 0
    for start in range(0, bits.numel(), CHUNK_ELEMENTS):
        chunk = bits[start:start + CHUNK_ELEMENTS].to(torch.int64)
        total += int(chunk.sum())
        squares += int((chunk * chunk).sum())
    return (tuple(x.shape), str(x.dtype), total, squares)


def _as_int(flat: torch.Tensor) -> torch.Tensor:
    if flat.dtype == torch.bool:
        return flat.to(torch.uint8)
    size = flat.element_size()
    if flat.is_complex():
        flat, size = torch.view_as_real(flat).reshape(-1), size // 2
    int_type = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[size]
    return flat.view(int_type)


def poisoned_count(t: torch.Tensor) -> int:
    """How many elements of `t` consist entirely of a poison byte: memory the candidate never wrote."""
    if t.numel() == 0 or t.is_complex():
        return 0
    flat = t.detach().contiguous().reshape(-1)
    size = flat.element_size()
    raw = _as_int(flat) if flat.dtype != torch.bool else flat.to(torch.uint8)
    count = 0
    for byte in POISON_BYTES:
        pattern = int.from_bytes(bytes([byte]) * size, "little", signed=raw.dtype != torch.uint8)
        for start in range(0, raw.numel(), CHUNK_ELEMENTS):
            count += int((raw[start:start + CHUNK_ELEMENTS] == pattern).sum())
    return count


def compare(outs: list[torch.Tensor], refs: list[torch.Tensor], config, device: str) -> Comparison:
    """Compare every output with its reference; the first problem found explains the failure."""
    if len(outs) != len(refs):
        return Comparison(False, shape_ok=False,
                          message=f"forward returned {len(outs)} tensors; the reference returns {len(refs)}")
    results = [compare_tensor(o, r, config, device, i if len(refs) > 1 else None)
               for i, (o, r) in enumerate(zip(outs, refs))]
    merged = Comparison(ok=all(c.ok for c in results))
    for c in results:
        merged.shape_ok &= c.shape_ok
        merged.dtype_ok &= c.dtype_ok
        merged.nonfinite |= c.nonfinite
        merged.poisoned += c.poisoned
        for name in ("max_abs_err", "max_rel_err", "rel_l2_err"):
            value = getattr(c, name)
            if value is not None:
                setattr(merged, name, max(value, getattr(merged, name) or 0.0))
    merged.message = next((c.message for c in results if not c.ok), "")
    return merged


def compare_tensor(out, ref: torch.Tensor, config, device: str, index: int | None = None) -> Comparison:
    label = "output" if index is None else f"output {index}"
    if type(out) not in (torch.Tensor, torch.nn.Parameter):  # a subclass could override comparisons
        return Comparison(False, message=f"{label} is a {type(out).__name__}, not a plain torch.Tensor")
    if out.device.type != torch.device(device).type:
        return Comparison(False, message=f"{label} is on {out.device}; it must stay on {device}")
    if tuple(out.shape) != tuple(ref.shape):
        return Comparison(False, shape_ok=False,
                          message=f"{label} has shape {tuple(out.shape)}; the reference has {tuple(ref.shape)}")
    dtype_problem = _dtype_problem(out.dtype, ref.dtype)
    if dtype_problem:
        return Comparison(False, dtype_ok=False, message=f"{label}: {dtype_problem}")
    atol, rel_bound = config.tolerance_for(str(ref.dtype).removeprefix("torch."))
    exact = not (ref.is_floating_point() or ref.is_complex())
    stats = _error_stats(out.detach(), ref, 0.0 if exact else atol)
    return _judge_stats(stats, label, atol, rel_bound, exact, poisoned_count(out))


def _dtype_problem(out_dtype: torch.dtype, ref_dtype: torch.dtype) -> str:
    if out_dtype == ref_dtype:
        return ""
    if out_dtype in _FLOAT_RANK and ref_dtype in _FLOAT_RANK and _FLOAT_RANK[out_dtype] > _FLOAT_RANK[ref_dtype]:
        return ""  # more precise than asked: compared after the fact at the reference's tolerance
    return f"dtype {out_dtype} differs from the reference's {ref_dtype} (lower precision or a different type)"


@dataclass
class _Stats:
    max_abs: float = 0.0
    max_rel: float = 0.0
    sq_diff: float = 0.0
    sq_ref: float = 0.0
    violations: int = 0  # elements outside atol + rtol * |ref|
    nan_mismatch: int = 0  # non-finite where the reference is finite, or a different non-finite value
    numel: int = 0


def _error_stats(out: torch.Tensor, ref: torch.Tensor, atol: float) -> _Stats:
    stats = _Stats(numel=ref.numel())
    o_flat, r_flat = out.contiguous().reshape(-1), ref.contiguous().reshape(-1)
    for start in range(0, r_flat.numel(), CHUNK_ELEMENTS):
        o = o_flat[start:start + CHUNK_ELEMENTS].to(torch.float64)
        r = r_flat[start:start + CHUNK_ELEMENTS].to(device=o.device, dtype=torch.float64)
        _accumulate(stats, o, r, atol)
    return stats


def _accumulate(stats: _Stats, o: torch.Tensor, r: torch.Tensor, atol: float) -> None:
    finite_ref = torch.isfinite(r)
    both = finite_ref & torch.isfinite(o)
    # where the reference is not finite, the output must be the same non-finite value
    same_special = (torch.isnan(o) & torch.isnan(r)) | (o == r)
    stats.nan_mismatch += int((~both & ~(~finite_ref & same_special)).sum())
    diff = torch.where(both, (o - r).abs(), torch.zeros_like(o))
    ref_abs = torch.where(both, r.abs(), torch.zeros_like(r))
    if diff.numel():
        stats.max_abs = max(stats.max_abs, float(diff.max()))
        big = ref_abs > max(atol, 1e-12)
        if bool(big.any()):
            stats.max_rel = max(stats.max_rel, float((diff[big] / ref_abs[big]).max()))
    stats.violations += int((diff > atol + atol * ref_abs).sum())
    stats.sq_diff += float((diff * diff).sum())
    stats.sq_ref += float((ref_abs * ref_abs).sum())


def _judge_stats(stats: _Stats, label: str, atol: float, rel_bound: float, exact: bool, poisoned: int) -> Comparison:
    # ||out - ref|| / ||ref||, enforced where the reference has magnitude at the tolerance's scale;
    # a reference that is (nearly) zero everywhere has no meaningful relative error: allclose rules
    ref_rms = math.sqrt(stats.sq_ref / max(stats.numel, 1))
    meaningful = not exact and ref_rms >= RMS_FLOOR_OF_ATOL * atol
    rel_l2 = math.sqrt(stats.sq_diff) / math.sqrt(stats.sq_ref) if meaningful else None
    result = Comparison(True, max_abs_err=stats.max_abs, max_rel_err=stats.max_rel, rel_l2_err=rel_l2,
                        nonfinite=stats.nan_mismatch > 0, poisoned=poisoned)
    if stats.nan_mismatch:
        result.ok = False
        result.message = (f"{label} has {stats.nan_mismatch} NaN/Inf values the reference does not have "
                          "(or lacks the reference's own NaN/Inf)")
    elif stats.violations:
        result.ok = False
        tol = "exact equality" if exact else f"atol=rtol={atol:g}"
        result.message = (f"{label} differs from the reference in {stats.violations} of {stats.numel} elements "
                          f"(max abs error {stats.max_abs:.3g}, {tol})")
    elif rel_l2 is not None and rel_l2 > rel_bound:
        result.ok = False
        result.message = (f"{label} passes allclose(atol=rtol={atol:g}) but its relative L2 error "
                          f"||out-ref||/||ref|| = {rel_l2:.3g} exceeds {rel_bound:g}: the values are wrong at "
                          f"scale (e.g. an all-zero output where every true value is below atol)")
    if not result.ok and poisoned:
        result.message += f"; {poisoned} elements still hold the judge's poison bytes (never written)"
    return result
