"""Correctness: reference trial cases, and comparing a candidate's outputs against them.

The comparison is two-sided on purpose. The elementwise test is KernelBench's allclose made
scale-aware: |out - ref| <= atol * S + rtol * |ref| with S = max(1, RMS of the reference output).
For outputs of RMS <= 1 (most KernelBench outputs on their "given" inputs) this is KernelBench's
test exactly; for large outputs (a K=4096 matmul on the "wide" inputs, |x| up to 100) the absolute
part grows with the output's scale, because a correct kernel that sums in another order differs
from the reference by rounding relative to the *sums*, not to each (possibly cancelling) element.
Elementwise tests alone accept an all-zero softmax over a very wide row (every true value is
below atol, and its RMS is far below 1, so S = 1); the relative L2 error ||out - ref|| / ||ref||
of that output is 1, so the second test rejects it.

Inputs are generated on the device itself where `get_inputs()` allows it (`make_inputs`): a
gigabyte of `torch.rand` on the CPU takes seconds, on the GPU a millisecond. Reference outputs
stay on the device within a memory budget (`reference_cases`), else they are kept on the CPU.
Tensors are compared in chunks on the output's device: KernelBench outputs reach gigabytes, and a
float64 copy of a whole output would not fit in memory.
"""
from __future__ import annotations

import hashlib
import math
import random
from dataclasses import asdict, dataclass, field

import torch

from ..problem.inputs import variant_for_trial
from .scheduling.admission import names_oom

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
    # inputs the reference writes in place: index -> their value after its call (see inplace.py)
    ref_inputs: dict[int, torch.Tensor] = field(default_factory=dict)
    ref_grads: dict[str, torch.Tensor] = field(default_factory=dict)  # backward problems (see grad.py)
    input_bytes: int = 0  # bytes of the trial's tensor inputs (what a trial allocates for them)


@dataclass
class Comparison:
    ok: bool
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    rel_l2_err: float | None = None
    atol_scale: float | None = None  # S in |out - ref| <= atol * S + rtol * |ref| (the largest, over outputs)
    error_ratio: float | None = None  # max |out - ref| / (atol * S + rtol * |ref|): 1.0 is the limit
    rel_l2_ratio: float | None = None  # rel_l2_err / the dtype's bound
    shape_ok: bool = True
    dtype_ok: bool = True
    nonfinite: bool = False
    poisoned: int = 0  # output elements still holding the allocator poison: never written
    message: str = ""


# (id(problem), device) -> True when get_inputs() runs with the device as torch's default device
_ON_DEVICE: dict[tuple[int, str], bool] = {}


def make_inputs(problem, seed: int, variant: str, device: str) -> list:
    """Inputs of one trial; every RNG a get_inputs() might use is seeded, so they regenerate exactly.

    On a GPU, `get_inputs()` runs with the GPU as torch's default device, so its `torch.rand` &
    co. draw there (the same distributions, other values than on the CPU). A `get_inputs()` that
    cannot run that way (it calls `.numpy()`, say) is run on the CPU instead, for every trial of
    the process: the choice is made once, at the first call, so inputs always regenerate exactly.
    Running out of GPU memory there is not such a reason: it is raised (the pool judges an
    evaluation that ran out of memory beside others again, alone), never answered by generating
    seconds of inputs on the CPU under the device's hold.
    """
    key = (id(problem), str(device))
    if not str(device).startswith("cuda") or _ON_DEVICE.get(key) is False:
        return _seeded(problem, seed, variant, device)
    if key in _ON_DEVICE:
        with torch.device(device):
            return _seeded(problem, seed, variant, device)
    try:
        with torch.device(device):
            inputs = _seeded(problem, seed, variant, device)
    except Exception as exc:  # noqa: BLE001 - get_inputs() needs the CPU: generate there from now on
        if out_of_memory(exc):  # no room on the GPU now (others' memory, say): not a reason to use the CPU
            raise
        _ON_DEVICE[key] = False
        return _seeded(problem, seed, variant, device)
    _ON_DEVICE[key] = True
    return inputs


def out_of_memory(exc: BaseException) -> bool:
    """Whether `exc` is the GPU running out of memory, as the pool tells one it judges again
    (`admission.names_oom`)."""
    return names_oom(f"{type(exc).__name__}: {exc}")


def inputs_on_device(problem, device: str) -> bool | None:
    """Whether this process generates `problem`'s inputs on `device` (None: not decided yet)."""
    return _ON_DEVICE.get((id(problem), str(device)))


def assume_inputs_on_device(problem, device: str, on_device: bool) -> None:
    """Take the choice `make_inputs` made for `problem` when its references were computed (they
    came from the reference store), so this process's inputs regenerate the same way."""
    _ON_DEVICE[(id(problem), str(device))] = bool(on_device)


def _seeded(problem, seed: int, variant: str, device: str) -> list:
    random.seed(seed)
    try:
        import numpy as np  # noqa: PLC0415 -- numpy may be absent (torch does not need it): then only Python's and torch's generators are seeded

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


def reference_case(problem, model, index: int, seed: int, variant: str, device: str, sync,
                   keep_on_device: bool = False) -> tuple[TrialCase, list[int]]:
    """Run the reference on one trial's inputs; also report which inputs it mutated (their values
    after the call are kept in `ref_inputs`: a candidate must write the same).

    A variant on which the reference itself is non-finite (while "given" is finite) lies outside
    the op's domain: the trial falls back to "given" and records which variant it replaced.
    With `keep_on_device` the outputs stay where they were computed (copied only where they share
    memory with an input); otherwise a CPU copy is kept.
    """
    outs, mutated, inputs = _run_reference(problem, model, seed, variant, device, sync)
    fallback = None
    if variant != "given" and not all_finite(outs):
        given, given_mutated, given_inputs = _run_reference(problem, model, seed, "given", device, sync)
        if all_finite(given):
            outs, mutated, inputs, fallback, variant = given, given_mutated, given_inputs, variant, "given"
    on_device = keep_on_device and str(device).startswith("cuda")
    if on_device:
        kept = [_unaliased(o, inputs) for o in outs]
    else:
        kept = [host_copy(o) for o in outs]
    written = {i: inputs[i].detach().clone() if on_device else host_copy(inputs[i]) for i in mutated}
    return TrialCase(index, seed, variant, kept, fallback_from=fallback, pinned=outs, ref_inputs=written,
                     input_bytes=sum(tensor_bytes(inputs))), mutated


def host_copy(t: torch.Tensor) -> torch.Tensor:
    """A CPU copy of `t` (same strides). From a GPU the host pages are touched before the copy: the
    driver's copy into untouched pageable memory ran at 0.9 GB/s on the H100 machine, zeroing the
    pages first and then copying at 4.1 GB/s in all (7.5 GB: 8.3 s against 1.8 s; docs/benchmarks.md)."""
    t = t.detach()
    if t.device.type == "cpu":
        return t.clone()
    out = torch.empty_like(t, device="cpu")
    return out.zero_().copy_(t)


def _unaliased(out: torch.Tensor, inputs: list) -> torch.Tensor:
    """`out`, or a copy of it when it shares storage with an input (a view or the input itself)."""
    storage = out.untyped_storage().data_ptr()
    shares = any(isinstance(x, torch.Tensor) and x.untyped_storage().data_ptr() == storage for x in inputs)
    return out.clone() if shares else out


def _run_reference(problem, model, seed, variant, device, sync) -> tuple[list[torch.Tensor], list[int], list]:
    inputs = make_inputs(problem, seed, variant, device)
    before = [fingerprint(x) for x in inputs]
    torch.manual_seed(seed)
    with torch.no_grad():
        outs = flatten_outputs(model(*inputs))
    sync()
    mutated = [i for i, (x, b) in enumerate(zip(inputs, before, strict=False)) if fingerprint(x) != b]
    return [o.detach() for o in outs], mutated, inputs


@dataclass(frozen=True)
class DeviceRoom:
    """How many bytes of reference outputs may stay on the GPU: `share` of the memory `free` there
    before the references, and never so much that one trial no longer fits beside them. A trial
    needs its inputs twice (the output-cache refill regenerates them into trial 0's buffers), its
    outputs four times (the poisoned blocks: `guards.poison_allocator`; the candidate's outputs are
    then carved from them) and `TRIAL_MARGIN` for the candidate's own temporaries."""

    free: int = 0
    share: float = 0.0

    def budget(self, input_bytes: int, output_bytes: int) -> int:
        if self.free <= 0 or self.share <= 0:
            return 0
        trial = 2 * input_bytes + 4 * output_bytes + TRIAL_MARGIN
        return max(0, min(int(self.free * self.share), self.free - trial))


TRIAL_MARGIN = 2 << 30


def reference_cases(problem, model, trials: int, seed: int, device: str, sync,
                    room: DeviceRoom = DeviceRoom()) -> tuple[list[TrialCase], TrialCase, list[int]]:
    """All trials' reference outputs, plus one extra case used to refill input buffers in place,
    and the inputs the reference writes in place (in any trial).

    Outputs stay on the device while their total fits the room's budget (comparing there needs no
    transfer; the budget is known once the first trial's sizes are); the rest are kept on the CPU.
    """
    cases, mutates, kept_bytes = [], set(), 0
    budget = None  # known after the first case

    def run(index: int, seed_: int, variant: str) -> tuple[TrialCase, list[int]]:
        nonlocal kept_bytes, budget
        case, mutated = reference_case(problem, model, index, seed_, variant, device, sync,
                                       keep_on_device=budget is None or kept_bytes < budget)
        size = sum(tensor_bytes(case.ref_outputs))
        if budget is None:
            budget = room.budget(case.input_bytes, size)
        if case.ref_outputs and case.ref_outputs[0].device.type != "cpu":
            if kept_bytes + size > budget:  # over budget after all: move this one to the CPU
                case.ref_outputs = [host_copy(o) for o in case.ref_outputs]
            else:
                kept_bytes += size
        return case, mutated

    for i in range(trials):
        case, mutated = run(i, seed + i, variant_for_trial(i))
        if i > 0:
            case.pinned = []  # only trial 0's outputs stay pinned on the device (see worker: fresh trial)
        cases.append(case)
        mutates.update(mutated)
    # same variant as trial 0 (which the candidate must already handle), other values
    refill, mutated = run(trials, seed + 1000, cases[0].variant)
    refill.pinned = []
    return cases, refill, sorted(mutates.union(mutated))


def tensor_bytes(items) -> list[int]:
    return [t.numel() * t.element_size() for t in items if isinstance(t, torch.Tensor)]


def on_device_bytes(cases: list[TrialCase]) -> int:
    """Bytes of reference outputs held on a GPU."""
    return sum(sum(tensor_bytes(o for o in c.ref_outputs if o.device.type != "cpu")) for c in cases)


def fingerprint(x) -> tuple:
    """A cheap content hash of a tensor (chunked integer sums of its bit pattern), or the value itself.

    Used to see whether a call changed its inputs without keeping a full copy of each input.
    """
    if not isinstance(x, torch.Tensor):
        return ("value", repr(x))
    flat = x.detach().contiguous().reshape(-1)
    if flat.device.type == "cpu":  # hashing the bytes is three times faster than integer sums there
        digest = hashlib.blake2b(flat.view(torch.uint8).numpy().data, digest_size=16).hexdigest()
        return (tuple(x.shape), str(x.dtype), digest)
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


def margin(trials) -> dict[str, float | None]:
    """The worst margins over trials (TrialResult-like objects): measured error / allowed error for
    the elementwise test and the relative-L2 test; the verdict reports them under precision."""
    def worst(name: str) -> float | None:
        values = [getattr(t, name) for t in trials if getattr(t, name, None) is not None]
        return round(max(values), 6) if values else None

    elementwise, rel_l2 = worst("error_ratio"), worst("rel_l2_ratio")
    present = [v for v in (elementwise, rel_l2) if v is not None]
    return {"elementwise": elementwise, "rel_l2": rel_l2, "worst": max(present) if present else None}


def compare(outs: list[torch.Tensor], refs: list[torch.Tensor], config, device: str) -> Comparison:
    """Compare every output with its reference; the first problem found explains the failure."""
    if len(outs) != len(refs):
        return Comparison(False, shape_ok=False,
                          message=f"forward returned {len(outs)} tensors; the reference returns {len(refs)}")
    results = [compare_tensor(o, r, config, device, i if len(refs) > 1 else None)
               for i, (o, r) in enumerate(zip(outs, refs, strict=False))]
    merged = Comparison(ok=all(c.ok for c in results))
    for c in results:
        merged.shape_ok &= c.shape_ok
        merged.dtype_ok &= c.dtype_ok
        merged.nonfinite |= c.nonfinite
        merged.poisoned += c.poisoned
        for name in ("max_abs_err", "max_rel_err", "rel_l2_err", "atol_scale", "error_ratio", "rel_l2_ratio"):
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
    stats = _error_stats(out.detach(), ref, 0.0 if exact else atol, 0.0 if exact else atol)
    scale = 1.0 if exact else max(1.0, stats.ref_rms())
    if scale > 1.0:  # counted at S = 1 in the one pass; recount (and the margin) at the real S
        stats.violations, stats.max_ratio = _count_violations(out.detach(), ref, atol * scale, atol)
    poisoned = 0 if (stats.violations == 0 and stats.nan_mismatch == 0) else poisoned_count(out)
    return _judge_stats(stats, label, atol, rel_bound, exact, poisoned, scale)


def _count_violations(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float) -> tuple[int, float]:
    """(elements with |out - ref| > atol + rtol * |ref|, the largest |out - ref| / (atol + rtol * |ref|)),
    both over the elements where both are finite."""
    sums = _one_pass(out, ref, atol, rtol)
    if sums is not None:
        return sums.violations, sums.max_ratio
    count, worst = 0, 0.0
    for o, r in _chunks(out, ref):
        both = torch.isfinite(o) & torch.isfinite(r)
        diff = torch.where(both, (o - r).abs_(), torch.zeros_like(o))
        allowed = r.abs().mul_(rtol).add_(atol)
        count += int((diff > allowed).sum())
        if diff.numel():
            worst = max(worst, float((diff / allowed).max()))
    return count, worst


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
    max_ratio: float = 0.0  # the largest |out - ref| / (atol + rtol * |ref|)
    nan_mismatch: int = 0  # non-finite where the reference is finite, or a different non-finite value
    numel: int = 0
    finite: int = 0  # elements where both are finite: the ones sq_ref sums over

    def ref_rms(self) -> float:
        """Root mean square of the reference (where finite): the scale S of the absolute tolerance."""
        return math.sqrt(self.sq_ref / self.finite) if self.finite else 0.0


def _error_stats(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float) -> _Stats:
    """Error statistics, elements outside atol + rtol * |ref|; the reference chunk moves to the
    output's device in its own dtype and widens there (a CPU-side float64 copy would double the
    transfer)."""
    sums = _one_pass(out, ref, atol, rtol)
    if sums is not None:
        return _Stats(numel=ref.numel(), **asdict(sums))
    stats = _Stats(numel=ref.numel())
    for o, r in _chunks(out, ref):
        _accumulate(stats, o, r, atol, rtol)
    return stats


def _one_pass(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float):
    """The statistics from the judge's one-pass GPU kernel (`gpucompare`), or None: then the torch
    path below computes the same ones (a CPU output, a dtype the kernel does not take, a kernel that
    could not run)."""
    from . import gpucompare  # noqa: PLC0415 -- gpucompare.py imports triton (0.4 s): loaded only for a large output on a GPU

    try:
        return gpucompare.error_stats(out, ref, atol, rtol)  # None where it does not apply
    except Exception:  # noqa: BLE001 - the torch path is the same comparison, only slower
        return None


def _chunks(out: torch.Tensor, ref: torch.Tensor):
    """(output, reference) chunks as float64 on the output's device."""
    o_flat, r_flat = out.contiguous().reshape(-1), ref.contiguous().reshape(-1)
    for start in range(0, r_flat.numel(), CHUNK_ELEMENTS):
        o = o_flat[start:start + CHUNK_ELEMENTS].to(torch.float64)
        yield o, r_flat[start:start + CHUNK_ELEMENTS].to(o.device).to(torch.float64)


def _accumulate(stats: _Stats, o: torch.Tensor, r: torch.Tensor, atol: float, rtol: float) -> None:
    both = torch.isfinite(r) & torch.isfinite(o)
    if bool(both.all()):  # the common case: no masking needed
        diff, ref_abs = (o - r).abs_(), r.abs()
        stats.finite += both.numel()
    else:
        stats.finite += int(both.sum())
        finite_ref = torch.isfinite(r)
        # where the reference is not finite, the output must be the same non-finite value
        same_special = (torch.isnan(o) & torch.isnan(r)) | (o == r)
        stats.nan_mismatch += int((~both & ~(~finite_ref & same_special)).sum())
        diff = torch.where(both, (o - r).abs(), torch.zeros_like(o))
        ref_abs = torch.where(both, r.abs(), torch.zeros_like(r))
    if diff.numel():
        stats.max_abs = max(stats.max_abs, float(diff.max()))
        big = ref_abs > max(rtol, 1e-12)
        relative = torch.where(big, diff / ref_abs.clamp_min(1e-300), torch.zeros_like(diff))
        stats.max_rel = max(stats.max_rel, float(relative.max()))
    allowed = ref_abs.mul(rtol).add_(atol)
    stats.violations += int((diff > allowed).sum())
    if diff.numel() and atol > 0:
        stats.max_ratio = max(stats.max_ratio, float((diff / allowed).max()))
    stats.sq_diff += float(torch.dot(diff, diff))
    stats.sq_ref += float(torch.dot(ref_abs, ref_abs))


def _judge_stats(stats: _Stats, label: str, atol: float, rel_bound: float, exact: bool, poisoned: int,
                 scale: float = 1.0) -> Comparison:
    # ||out - ref|| / ||ref||, enforced where the reference has magnitude at the tolerance's scale;
    # a reference that is (nearly) zero everywhere has no meaningful relative error: allclose rules
    ref_rms = math.sqrt(stats.sq_ref / max(stats.numel, 1))
    meaningful = not exact and ref_rms >= RMS_FLOOR_OF_ATOL * atol
    rel_l2 = math.sqrt(stats.sq_diff) / math.sqrt(stats.sq_ref) if meaningful else None
    result = Comparison(True, max_abs_err=stats.max_abs, max_rel_err=stats.max_rel, rel_l2_err=rel_l2,
                        atol_scale=None if exact else scale, nonfinite=stats.nan_mismatch > 0, poisoned=poisoned,
                        error_ratio=None if exact else stats.max_ratio,
                        rel_l2_ratio=rel_l2 / rel_bound if rel_l2 is not None and rel_bound > 0 else None)
    if stats.nan_mismatch:
        result.ok = False
        result.message = (f"{label} has {stats.nan_mismatch} NaN/Inf values the reference does not have "
                          "(or lacks the reference's own NaN/Inf)")
    elif stats.violations:
        result.ok = False
        if exact:
            tol = "exact equality"
        elif scale > 1.0:
            tol = f"|out-ref| <= {atol:g}*{scale:.3g} + {atol:g}*|ref|, the reference's RMS being {scale:.3g}"
        else:
            tol = f"atol=rtol={atol:g}"
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
