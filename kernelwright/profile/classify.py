"""Bottleneck classification: the rules that decide what limits a kernel or a whole forward pass.

Two levels. A *kernel* is memory-, compute- or latency-bound, decided from ncu's speed-of-light
percentages (stage 1). A *forward pass* is launch- or host-bound when the GPU sits idle for most
of the forward's own time, decided from the torch-profiler timeline (time between forwards never
counts). The thresholds live in `Thresholds`
and are documented in docs/profiling.md; every classification carries the numbers it used, so a
finding can quote them and a person can check them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from .parse import KernelProfile
from .torchprof import GAP_REPORT_US


class Bottleneck(StrEnum):
    memory = "memory"
    compute = "compute"
    latency = "latency"
    launch = "launch"
    host = "host"
    unknown = "unknown"  # nothing measured (no GPU, ncu unavailable, candidate failed)


@dataclass(frozen=True)
class Thresholds:
    """Percentages are of the sustained peak that ncu reports (speed of light)."""

    roof_pct: float = 60.0  # a unit at or above this is what bounds the kernel
    latency_pct: float = 40.0  # both SM and memory below this: nothing is busy -> latency
    low_occupancy_pct: float = 25.0  # achieved occupancy below this counts as low
    idle_fraction: float = 0.5  # GPU idle for this share of a forward -> launch or host bound
    host_gap_share: float = 0.5  # idle gaps >= torchprof.GAP_REPORT_US hold this share of the idle -> host


DEFAULT_THRESHOLDS = Thresholds()


@dataclass
class Classification:
    bottleneck: Bottleneck
    reason: str  # one sentence with the numbers, for people and prompts
    numbers: dict[str, float] = field(default_factory=dict)
    confident: bool = True  # False when the kernel sits between the thresholds


def _pct(value: float | None) -> float:
    return 0.0 if value is None else value


def classify_kernel(profile: KernelProfile, t: Thresholds = DEFAULT_THRESHOLDS) -> Classification:
    """Memory, compute or latency from the speed-of-light section of one kernel.

    Rules, in order:
    1. the busier of memory (max of memory-throughput and DRAM %) and compute (max of SM and tensor
       pipe %) is at or above `roof_pct`: that side bounds the kernel (memory wins ties);
    2. both below `latency_pct`: no unit is busy, the kernel waits on latency (small grid, low
       occupancy, dependent instructions);
    3. in between: latency if occupancy is low or the grid does not fill the GPU once, else the
       busier side, marked not confident.
    """
    sm, tensor = _pct(profile.get("sm_pct")), _pct(profile.get("tensor_pct"))
    mem = max(_pct(profile.get("mem_pct")), _pct(profile.get("dram_pct")))
    compute = max(sm, tensor)
    numbers = {"sm_pct": sm, "tensor_pct": tensor, "mem_pct": mem}
    occupancy, waves = profile.get("achieved_occupancy_pct"), profile.get("waves")
    if occupancy is not None:
        numbers["achieved_occupancy_pct"] = occupancy
    if waves is not None:
        numbers["waves"] = waves
    if profile.get("sm_pct") is None and profile.get("mem_pct") is None and profile.get("dram_pct") is None:
        return Classification(Bottleneck.unknown, "ncu reported no speed-of-light metrics", numbers, False)
    busy = f"memory {mem:.0f}% / SM {sm:.0f}%" + (f" / tensor {tensor:.0f}%" if tensor else "") + " of peak"
    if max(mem, compute) >= t.roof_pct:
        side = Bottleneck.memory if mem >= compute else Bottleneck.compute
        return Classification(side, f"{side}-bound: {busy}", numbers)
    starved = (occupancy is not None and occupancy < t.low_occupancy_pct) or (waves is not None and waves < 1.0)
    if max(mem, compute) < t.latency_pct or starved:
        why = _latency_cause(occupancy, waves, t)
        return Classification(Bottleneck.latency, f"latency-bound: {busy}{why}", numbers)
    side = Bottleneck.memory if mem >= compute else Bottleneck.compute
    return Classification(side, f"leaning {side}-bound: {busy}, no unit saturated", numbers, confident=False)


def _latency_cause(occupancy: float | None, waves: float | None, t: Thresholds) -> str:
    causes = []
    if waves is not None and waves < 1.0:
        causes.append(f"the grid fills {waves:.2f} of one wave")
    if occupancy is not None and occupancy < t.low_occupancy_pct:
        causes.append(f"achieved occupancy {occupancy:.0f}%")
    return "; " + ", ".join(causes) if causes else ""


def forward_us(summary) -> float:
    """The forward's duration to judge idleness against: the shorter of its profiled window and the
    plain synchronised call without any profiler.

    Both over-state the forward: the profiler adds its own host work to every launch, and the plain
    call adds the final synchronisation. The GPU counts as idle for most of the forward only when it
    is idle by the tighter of the two.
    """
    candidates = [v for v in (summary.wall_us_per_call, summary.plain_us_per_call) if v and v > 0]
    return min(candidates) if candidates else 0.0


def classify_timeline(summary, t: Thresholds = DEFAULT_THRESHOLDS) -> Classification | None:
    """Launch- or host-bound from a torchprof.TimelineSummary; None when the GPU is mostly busy.

    The GPU must be idle for at least `idle_fraction` of the forward (`forward_us`). Then the idle
    time is explained: host-device synchronisations, or idle gaps of at least GAP_REPORT_US holding
    `host_gap_share` of it, mean the host is doing work or waiting (Python, CPU ops, `.item()`):
    host-bound. Otherwise the idle time is spread over the short gaps between many launches:
    launch-bound (fuse kernels, capture a CUDA graph).
    """
    if summary is None or summary.kernels_per_call <= 0:
        return None
    wall = forward_us(summary)
    if wall <= 0:
        return None
    busy = min(summary.busy_us_per_call, wall)
    idle_us = wall - busy
    idle = idle_us / wall
    numbers = {
        "idle_fraction": idle,
        "kernels_per_call": summary.kernels_per_call,
        "median_kernel_us": summary.median_kernel_us,
        "idle_us_per_launch": idle_us / summary.kernels_per_call,
        "long_gap_us_per_call": summary.long_gap_us_per_call,
        "syncs_per_call": summary.syncs_per_call,
        "wall_us_per_call": wall,
        "window_us_per_call": summary.wall_us_per_call,
        "plain_us_per_call": summary.plain_us_per_call,
    }
    if idle < t.idle_fraction:
        return None
    head = f"GPU idle {idle:.0%} of the {wall:.0f} us forward"
    host_gaps = summary.long_gap_us_per_call >= t.host_gap_share * idle_us
    if summary.syncs_per_call < 1 and not host_gaps:
        reason = (
            f"launch-bound: {head} across {summary.kernels_per_call:g} kernel launches "
            f"(median kernel {summary.median_kernel_us:.1f} us, {numbers['idle_us_per_launch']:.1f} us idle per launch)"
        )
        return Classification(Bottleneck.launch, reason, numbers)
    reason = f"host-bound: {head}"
    if host_gaps:
        reason += (f"; gaps of {GAP_REPORT_US:.0f} us or more hold {summary.long_gap_us_per_call:.0f} us of it, "
                   f"the largest {summary.max_gap_us:.0f} us")
    if summary.syncs_per_call >= 1:
        reason += f"; {summary.syncs_per_call:g} host-device synchronisations per forward"
    return Classification(Bottleneck.host, reason, numbers)


def classify_forward(workload: Classification | None, kernels) -> Classification:
    """The class of the whole forward: launch/host from the timeline when it found one, else that of
    the kernel with the most GPU time (`kernels` hottest first, as parse.aggregate_by_name returns)."""
    if workload is not None:
        return workload
    if not kernels:
        return Classification(Bottleneck.unknown, "no kernel was measured", {}, False)
    return classify_kernel(kernels[0])
