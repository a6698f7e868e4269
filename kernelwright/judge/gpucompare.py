"""The comparison's statistics in one pass over a GPU output and its reference (a Triton kernel).

`check.compare` needs, per output: the largest absolute and relative error, the sums of squares of
the error and of the reference, the elements outside atol + rtol * |ref|, the largest error over
its allowance, mismatched NaN/Inf and the finite count. Computed with torch ops, in float64 chunks,
that was a dozen passes over gigabytes and a host sync per statistic per chunk: 0.3-0.5 s for a
6.4 GB output on the H100, most of the check stage of a large problem (docs/benchmarks.md). This
kernel reads each element of both tensors once, in their own dtypes, widens them to float64 in
registers and does exactly the elementwise arithmetic of `check._accumulate`; each program writes
its partial statistics, which torch reduces on the device, read back with one sync.

`error_stats` returns None where the kernel does not apply: the caller then uses the torch path.
It applies only to large outputs (`MIN_ELEMENTS`: below it the torch path takes milliseconds) and
only in a specialisation `warm` compiled before any candidate code ran in the process (stage 1,
outside the device's hold; `judgekernels` shares the compiled files between evaluations): after
that, compiling would read a Triton cache folder the candidate can write. So an output of another
dtype than its reference's, or one not 16-byte aligned, takes the torch path. A reference kept in
host memory is moved to the device in chunks of its own dtype. The partial counts start at -1, so
a launch that did not run (Triton patched by candidate code, say) is an error, never a silent pass.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

BLOCK = 1024
MAX_PROGRAMS = 4096  # programs per launch; each strides over the tensor (a few MB of partials at most)
HOST_CHUNK_ELEMENTS = 1 << 26  # a host-kept reference moves to the device this many elements at a time
FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
MIN_ELEMENTS = 1 << 25  # smaller outputs: the torch path (one or two chunks) costs less than loading the kernel
_WARMED: set[tuple[torch.dtype, str]] = set()  # (dtype, device) compiled before candidate code ran

try:
    import triton
    import triton.language as tl
except ImportError:  # the torch path then
    triton = None


@dataclass(frozen=True)
class Sums:
    """The statistics `check._Stats` accumulates (see there), over one output."""

    max_abs: float
    max_rel: float
    max_ratio: float
    sq_diff: float
    sq_ref: float
    violations: int
    nan_mismatch: int
    finite: int


def applies(out: torch.Tensor, ref: torch.Tensor) -> bool:
    """Whether the kernel computes this comparison: a large float output on a GPU of its reference's
    dtype, 16-byte aligned, in a specialisation `warm` compiled."""
    return (triton is not None and out.device.type == "cuda" and out.dtype == ref.dtype
            and (out.dtype, str(out.device)) in _WARMED and out.numel() == ref.numel()
            and out.numel() >= MIN_ELEMENTS and out.data_ptr() % 16 == 0)


def wanted(refs: list[torch.Tensor], device: str) -> list[torch.dtype]:
    """The dtypes of the reference outputs the kernel will compare on `device` (none: no warm-up)."""
    if triton is None or not str(device).startswith("cuda"):
        return []
    return sorted({r.dtype for r in refs if r.dtype in FLOATS and r.numel() >= MIN_ELEMENTS}, key=str)


def warm(dtypes: list[torch.dtype], device: str) -> None:
    """Compile the kernel for outputs of `dtypes` on `device` without launching it (Triton's
    `warmup`: no device work, so no hold is needed), before any candidate code runs."""
    dev = torch.device(device)
    with torch.cuda.device(dev):
        for dtype in dtypes:
            o, r = torch.empty(BLOCK, dtype=dtype, device=dev), torch.empty(BLOCK, dtype=dtype, device=dev)
            params = torch.empty(3, dtype=torch.float64, device=dev)
            floats = torch.empty((1, 5), dtype=torch.float64, device=dev)
            counts = torch.empty((1, 3), dtype=torch.int64, device=dev)
            _stats_kernel.warmup(o, r, BLOCK, params, floats, counts, BLOCK=BLOCK, num_warps=4, grid=(1,))
            _WARMED.add((dtype, str(o.device)))


def error_stats(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float) -> Sums | None:
    """The statistics of `out` against `ref` (same number of elements) at |out - ref| <= atol +
    rtol * |ref|, or None where the kernel does not apply."""
    if not applies(out, ref):
        return None
    o = out.detach().contiguous().reshape(-1)
    r = ref.detach().contiguous().reshape(-1)
    parts = [_launch(o[s:s + len(c)], c, atol, rtol) for s, c in _on_device(r, o.device)]
    floats = torch.cat([p[0] for p in parts])
    counts = torch.cat([p[1] for p in parts])
    maxima = floats[:, :3].amax(dim=0)
    sums = floats[:, 3:].sum(dim=0)
    totals = counts.sum(dim=0)
    lowest = counts.amin().reshape(1)  # -1: a program did not run
    values = torch.cat([maxima, sums, totals.to(torch.float64), lowest.to(torch.float64)]).tolist()  # the one sync
    if values[8] < 0:
        raise RuntimeError("the judge's comparison kernel did not run (Triton's launch was altered?)")
    return Sums(*values[:5], int(values[5]), int(values[6]), int(values[7]))


def _on_device(r: torch.Tensor, device: torch.device):
    """(offset, chunk on `device`) pieces of the flat reference: itself when it is there already."""
    if r.device == device:
        yield 0, r
        return
    for start in range(0, r.numel(), HOST_CHUNK_ELEMENTS):
        yield start, r[start:start + HOST_CHUNK_ELEMENTS].to(device, non_blocking=False)


def _launch(o: torch.Tensor, r: torch.Tensor, atol: float, rtol: float) -> tuple[torch.Tensor, torch.Tensor]:
    """One launch over flat `o` and `r` (same device): its per-program partials (floats, counts)."""
    n = o.numel()
    programs = max(1, min(MAX_PROGRAMS, triton.cdiv(n, BLOCK)))
    # the tolerances as float64 in memory: a Python float argument would reach the kernel as float32
    params = torch.tensor([atol, rtol, max(rtol, 1e-12)], dtype=torch.float64, device=o.device)
    floats = torch.zeros((programs, 5), dtype=torch.float64, device=o.device)
    counts = torch.full((programs, 3), -1, dtype=torch.int64, device=o.device)
    on = torch.cuda.device(o.device) if o.device.type == "cuda" else contextlib.nullcontext()
    with on:
        _stats_kernel[(programs,)](o, r, n, params, floats, counts, BLOCK=BLOCK, num_warps=4)
    return floats, counts


if triton is not None:
    @triton.jit(do_not_specialize=["n"])
    def _stats_kernel(out_ptr, ref_ptr, n, params_ptr, floats_ptr, counts_ptr, BLOCK: tl.constexpr):
        """Partial statistics of one program over its strided tiles: floats [max |d|, max rel,
        max ratio, sum d^2, sum |r|^2], counts [violations, NaN/Inf mismatches, finite pairs];
        params [atol, rtol, the |ref| above which the relative error counts]."""
        atol = tl.load(params_ptr + 0)
        rtol = tl.load(params_ptr + 1)
        big = tl.load(params_ptr + 2)
        pid = tl.program_id(0)
        step = tl.num_programs(0).to(tl.int64) * BLOCK
        lanes = tl.arange(0, BLOCK)
        zero = tl.zeros([BLOCK], dtype=tl.float64)
        max_abs, max_rel, max_ratio, sq_diff, sq_ref = zero, zero, zero, zero, zero
        violations = tl.zeros([BLOCK], dtype=tl.int64)
        mismatch = tl.zeros([BLOCK], dtype=tl.int64)
        finite = tl.zeros([BLOCK], dtype=tl.int64)
        inf = float("inf")
        for start in range(pid.to(tl.int64) * BLOCK, n, step):
            offs = start + lanes
            mask = offs < n
            o = tl.load(out_ptr + offs, mask=mask, other=0.0).to(tl.float64)
            r = tl.load(ref_ptr + offs, mask=mask, other=0.0).to(tl.float64)
            finite_o = tl.abs(o) < inf
            finite_r = tl.abs(r) < inf
            both = finite_o & finite_r
            # where the reference is not finite, the output must be the same non-finite value
            same_special = ((o != o) & (r != r)) | (o == r)
            bad = mask & (~both) & ~((~finite_r) & same_special)
            diff = tl.where(both, tl.abs(o - r), 0.0)
            ref_abs = tl.where(both, tl.abs(r), 0.0)
            relative = tl.where(ref_abs > big, diff / ref_abs, 0.0)
            allowed = ref_abs * rtol + atol
            ratio = tl.where(allowed > 0, diff / allowed, 0.0)
            max_abs = tl.maximum(max_abs, diff)
            max_rel = tl.maximum(max_rel, relative)
            max_ratio = tl.maximum(max_ratio, ratio)
            sq_diff += diff * diff
            sq_ref += ref_abs * ref_abs
            violations += (diff > allowed).to(tl.int64)
            mismatch += bad.to(tl.int64)
            finite += (both & mask).to(tl.int64)
        row = floats_ptr + pid * 5
        tl.store(row + 0, tl.max(max_abs, axis=0))
        tl.store(row + 1, tl.max(max_rel, axis=0))
        tl.store(row + 2, tl.max(max_ratio, axis=0))
        tl.store(row + 3, tl.sum(sq_diff, axis=0))
        tl.store(row + 4, tl.sum(sq_ref, axis=0))
        counted = counts_ptr + pid * 3
        tl.store(counted + 0, tl.sum(violations, axis=0))
        tl.store(counted + 1, tl.sum(mismatch, axis=0))
        tl.store(counted + 2, tl.sum(finite, axis=0))
