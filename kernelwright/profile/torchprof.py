"""Timeline pass with torch.profiler: kernel launches per forward, GPU busy vs wall time, host gaps.

ncu replays kernels one by one and cannot see the time *between* them; the torch profiler can.
`collect_timeline` records a few forwards and turns the trace into plain `TimelineEvent`s;
`summarize_timeline` (pure) reduces them to the numbers that classify.classify_timeline needs.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Callable

FORWARD_RANGE = "kw_forward"
# host-side calls that block until the device catches up (CPU op names and CUDA runtime calls)
SYNC_NAMES = (
    "aten::item", "aten::_local_scalar_dense", "aten::nonzero", "cudaStreamSynchronize",
    "cudaDeviceSynchronize", "cudaEventSynchronize",
)
GAP_REPORT_US = 50.0  # idle gaps at least this long are counted as host gaps


@dataclass
class TimelineEvent:
    name: str
    kind: str  # "kernel", "memcpy", "range" (one forward), "cpu" (op or runtime call), "annotation"
    start_us: float
    end_us: float

    @property
    def dur_us(self) -> float:
        return max(0.0, self.end_us - self.start_us)


@dataclass
class TimelineSummary:
    calls: int = 0
    kernels_per_call: float = 0.0
    kernel_us_per_call: float = 0.0  # sum of kernel durations
    busy_us_per_call: float = 0.0  # union of kernel and copy intervals
    wall_us_per_call: float = 0.0
    idle_fraction: float = 0.0
    median_kernel_us: float = 0.0
    max_gap_us: float = 0.0
    long_gaps_per_call: float = 0.0  # idle gaps >= GAP_REPORT_US
    syncs_per_call: float = 0.0
    top_kernels: list[dict] = field(default_factory=list)  # name, total_us, count (per call)
    device: str = ""

    @property
    def idle_us_per_call(self) -> float:
        return max(0.0, self.wall_us_per_call - self.busy_us_per_call)


def _union(intervals: list[tuple[float, float]]) -> tuple[float, list[float]]:
    """Covered length of `intervals` and the gaps between consecutive covered stretches."""
    total, gaps = 0.0, []
    end = None
    for start, stop in sorted(intervals):
        if end is None or start > end:
            if end is not None:
                gaps.append(start - end)
            total += stop - start
            end = stop
        elif stop > end:
            total += stop - end
            end = stop
    return total, gaps


def _inside(event: TimelineEvent, ranges: list[TimelineEvent]) -> bool:
    """Whether `event` starts inside a forward (the final synchronize of the pass is not the model's)."""
    return not ranges or any(r.start_us <= event.start_us <= r.end_us for r in ranges)


def _outermost(events: list[TimelineEvent]) -> list[TimelineEvent]:
    """Drop events nested in an earlier one: `aten::item` runs `_local_scalar_dense`, which runs
    `cudaStreamSynchronize` — one synchronisation, three events."""
    kept: list[TimelineEvent] = []
    for event in sorted(events, key=lambda e: (e.start_us, -e.end_us)):
        if not kept or event.start_us >= kept[-1].end_us:
            kept.append(event)
    return kept


def summarize_timeline(events: list[TimelineEvent], calls: int, top: int = 5) -> TimelineSummary:
    """Per-forward numbers from the events of `calls` forwards (one `range` event per forward)."""
    calls = max(1, calls)
    ranges = [e for e in events if e.kind == "range"]
    device = [e for e in events if e.kind in ("kernel", "memcpy")]
    kernels = [e for e in events if e.kind == "kernel"]
    if ranges:
        window_start = min(e.start_us for e in ranges)
        window_end = max([e.end_us for e in ranges] + [e.end_us for e in device])
    elif device:
        window_start, window_end = min(e.start_us for e in device), max(e.end_us for e in device)
    else:
        return TimelineSummary(calls=calls)
    busy, gaps = _union([(e.start_us, e.end_us) for e in device])
    if device:  # idle before the first kernel (launch latency, host work) counts too
        first = min(e.start_us for e in device)
        gaps.append(max(0.0, first - window_start))
    wall = max(window_end - window_start, busy, 1e-9)
    totals: dict[str, list[float]] = {}
    for e in kernels:
        totals.setdefault(e.name, []).append(e.dur_us)
    ranked = sorted(totals.items(), key=lambda kv: -sum(kv[1]))[:top]
    syncs = _outermost([e for e in events if e.kind == "cpu" and e.name in SYNC_NAMES and _inside(e, ranges)])
    return TimelineSummary(
        calls=calls,
        kernels_per_call=len(kernels) / calls,
        kernel_us_per_call=sum(e.dur_us for e in kernels) / calls,
        busy_us_per_call=busy / calls,
        wall_us_per_call=wall / calls,
        idle_fraction=max(0.0, 1.0 - busy / wall),
        median_kernel_us=statistics.median([e.dur_us for e in kernels]) if kernels else 0.0,
        max_gap_us=max(gaps, default=0.0),
        long_gaps_per_call=sum(1 for g in gaps if g >= GAP_REPORT_US) / calls,
        syncs_per_call=len(syncs) / calls,
        top_kernels=[
            {"name": name, "total_us": sum(d) / calls, "count": len(d) / calls} for name, d in ranked
        ],
    )


def _event_kind(event, cuda_type) -> str:
    if event.name == FORWARD_RANGE:  # the CPU range, or its mirror on the GPU timeline
        return "range" if event.device_type != cuda_type else "annotation"
    if event.device_type == cuda_type:
        lowered = event.name.lower()
        return "memcpy" if lowered.startswith(("memcpy", "memset")) else "kernel"
    return "cpu"


def collect_timeline(forward: Callable[[], object], calls: int, use_cuda: bool) -> TimelineSummary:
    """Profile `calls` invocations of `forward` (already warmed up) and summarise the timeline."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if use_cuda else [])
    with profile(activities=activities) as prof:
        for _ in range(calls):
            with record_function(FORWARD_RANGE):
                forward()
        if use_cuda:
            torch.cuda.synchronize()
    cuda_type = torch.autograd.DeviceType.CUDA
    events = [
        TimelineEvent(e.name, _event_kind(e, cuda_type), float(e.time_range.start), float(e.time_range.end))
        for e in prof.events()
    ]
    summary = summarize_timeline(events, calls)
    summary.device = torch.cuda.get_device_name() if use_cuda else "cpu"
    return summary
