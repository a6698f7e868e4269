"""The speed-of-light floor: how fast a problem could possibly run on this device.

floor_ms = max(FLOPs / peak FLOP rate, minimal bytes / peak bandwidth), where
- FLOPs are what `torch.utils.flop_counter.FlopCounterMode` counts for one timed call of the
  reference on the meta device (the forward; plus the backward where the problem declares it part
  of the work): matrix products, convolutions, attention; elementwise work is not counted, so the
  floor errs low, never high;
- minimal bytes are every input, output, parameter and buffer moved once (inputs changed in place
  written back once more; with the backward, output gradients and gradients too): see
  problem/footprint.py. Inputs that fit in the L2 cache together are left out (`Floor.warm_bytes`):
  the judge writes every timed call's inputs right before starting its clock (its candidates' and
  its baselines' alike), so they may be read from L2;
- the peaks are the device's measured ceilings (peaks.py) or, on a cold start, datasheet values,
  marked as such in `Floor.peak_source`.

Which matrix rate applies depends on the reference's dtype. A float32 reference is entitled to
the fastest float32-accurate rate: the CUDA cores' fp32 peak (~52 TFLOP/s measured on an H100),
or a split on the tensor cores (each operand split into a high and a low part, three products):
3xTF32 at a third of the TF32 rate (~119 TFLOP/s), or 3xBF16 at a third of the bf16 rate (~227
TFLOP/s), which a candidate on the H100 used to pass the float32 bounds; `peak_kind` ("bf16x3",
"tf32x3" or "fp32") says which. Plain TF32 is counted only when the run allows TF32; bf16/fp16 use the
tensor-core rates. A candidate faster than the floor is suspicious: it skipped work or its timing
is wrong (`apply`).
"""
from __future__ import annotations

import dataclasses

import torch

from kernelwright.problem.footprint import measure

from .checks import check_flag
from .peaks import Peaks, peaks_for
from .verdict import REJECT, WARN, Flag, Floor, TimingStats

REJECT_BELOW = 0.5  # measured < 0.5 x floor is rejected, < 1 x floor warned
SPLIT_PASSES = 3  # hi*hi + hi*lo + lo*hi: three tensor-core products per fp32 product (3xTF32, 3xBF16)

_PEAK_KIND = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16", torch.float64: "fp64"}


def peak_kind(dtype: torch.dtype, allow_tf32: bool = False) -> str:
    """The matmul rate a reference of this dtype is entitled to (TF32 only when the run allows it)."""
    kind = _PEAK_KIND.get(dtype, "fp32")
    return "tf32" if kind == "fp32" and allow_tf32 else kind


def dominant_dtype(problem) -> torch.dtype:
    """The floating dtype holding the most elements among inputs and parameters (meta device)."""
    counts: dict[torch.dtype, int] = {}
    with torch.device("meta"):
        torch.manual_seed(0)
        tensors = [x for x in problem.module.get_inputs() if isinstance(x, torch.Tensor)]
        try:
            tensors += list(problem.Model(*problem.module.get_init_inputs()).state_dict().values())
        except Exception:  # noqa: BLE001 -- a constructor meta cannot run: inputs decide
            pass
    for tensor in tensors:
        if tensor.is_floating_point():
            counts[tensor.dtype] = counts.get(tensor.dtype, 0) + tensor.numel()
    return max(counts, key=counts.get) if counts else torch.float32


def compute_floor(problem, device: str, peaks: Peaks | None = None, allow_tf32: bool = False) -> Floor | None:
    """The floor for `problem` (a loaded Problem) on `device`; None when no peaks are known (CPU
    without a peaks table, an unknown GPU before `kernelwright device-peaks`) or nothing is counted."""
    peaks = peaks or peaks_for(device)
    if peaks is None:
        return None
    try:
        footprint = measure(problem)
        kind = peak_kind(dominant_dtype(problem), allow_tf32)
    except Exception:  # noqa: BLE001 -- a problem the meta device cannot describe has no floor
        return None
    return floor_from(footprint.flops, footprint.bytes, peaks, kind,
                      warm_bytes=warm_input_bytes(footprint.input_bytes, device))


def warm_input_bytes(input_bytes: int, device: str) -> int:
    """The inputs' bytes when they fit in `device`'s L2 cache together (they are written right
    before each timed call), else 0."""
    if not str(device).startswith("cuda") or input_bytes <= 0:
        return 0
    try:
        l2 = int(getattr(torch.cuda.get_device_properties(torch.device(device)), "L2_cache_size", 0) or 0)
    except Exception:  # noqa: BLE001 -- no device properties: count every byte
        return 0
    return input_bytes if input_bytes <= l2 else 0


def matmul_rate(peaks: Peaks, kind: str) -> tuple[float | None, str]:
    """(TFLOP/s, kind used) for a reference of `kind`: fp32 counts the fastest fp32-accurate
    tensor-core emulation where that beats the fp32 peak: three products of split operands, at a
    third of the TF32 rate (3xTF32) or of the bf16 rate (3xBF16: hi + lo bf16 halves keep 16
    mantissa bits, inside the fp32 bounds: rules/precision_facts.json has the errors)."""
    tflops = peaks.tflops.get(kind) or peaks.tflops.get("fp32")
    if kind == "fp32":
        splits = {f"{name}x3": (peaks.tflops.get(name) or 0.0) / SPLIT_PASSES for name in ("tf32", "bf16")}
        best = max(splits, key=splits.get)
        if splits[best] > (tflops or 0.0):
            return splits[best], best
    return tflops, kind


def floor_from(flops: float, nbytes: float, peaks: Peaks, kind: str, warm_bytes: float = 0.0) -> Floor | None:
    """The floor of `flops` and `nbytes` (less `warm_bytes` read from L2) at the peaks' rates."""
    tflops, kind = matmul_rate(peaks, kind)
    if not tflops or not peaks.copy_gbps or (flops <= 0 and nbytes <= 0):
        return None
    nbytes = max(0.0, nbytes - warm_bytes)
    compute_ms = flops / (tflops * 1e12) * 1e3
    memory_ms = nbytes / (peaks.copy_gbps * 1e9) * 1e3
    return Floor(
        flops=float(flops),
        bytes=float(nbytes),
        peak_tflops=float(tflops),
        peak_gbps=float(peaks.copy_gbps),
        floor_ms=max(compute_ms, memory_ms),
        bound="compute" if compute_ms > memory_ms else "memory",
        peak_kind=kind,
        peak_source=peaks.source,
        warm_bytes=float(warm_bytes),
    )


def apply(floor: Floor, timing: TimingStats, reject_below: float = REJECT_BELOW) -> tuple[Floor, list[Flag]]:
    """The floor with pct_of_floor = floor / measured x 100, and a flag when measured < floor.

    Faster than the floor is a WARN (suspicious: the measured peaks are what the library reached,
    and a counted input might legitimately go unread); faster than half the floor is a REJECT
    (work was skipped or the clock was fooled).
    """
    if timing.median_ms <= 0:
        return dataclasses.replace(floor), [check_flag("speed_of_light_floor", REJECT, "measured time is zero")]
    pct = floor.floor_ms / timing.median_ms * 100
    result = dataclasses.replace(floor, pct_of_floor=pct)
    detail = (f"{timing.median_ms:.4g} ms measured against a floor of {floor.floor_ms:.4g} ms "
              f"({floor.bound}-bound; {floor.peak_source} peaks)")
    if timing.median_ms < reject_below * floor.floor_ms:
        return result, [check_flag("speed_of_light_floor", REJECT, f"impossible speed: {detail}")]
    if timing.median_ms < floor.floor_ms:
        return result, [check_flag("speed_of_light_floor", WARN,
                                   f"suspicious: faster than the speed-of-light floor: {detail}")]
    return result, []
