"""Time one call of a candidate's forward, like `triton.testing.do_bench`, with the clocks pinned.

What it measures: the median time of one call of `fn()`, in milliseconds.
- GPU ("cuda_events"): CUDA events recorded on the current stream around each call, the L2 cache
  flushed before each call (a read of a buffer twice the L2 size, see `L2Flush`), a device-wide synchronize
  after the loop. With `config.cuda_graph`, `fn` is captured once in a CUDA graph and the replays
  are timed ("cuda_graph"), which removes CPU launch gaps; when capture fails, eager calls are
  timed and the note says why.
- CPU ("wall_cpu"): `time.perf_counter` around each call; CPU wall time, not GPU performance.

Why the clocks are captured at import: the candidate runs in the same process as this code. A
candidate that replaces `torch.cuda.Event.elapsed_time` or `time.perf_counter` (KernelBench has
seen both) would otherwise time itself. Every clock, event and synchronize used below is the
object captured when this module was first imported, before any candidate was loaded; import
this module before loading a candidate. `tampered()` lists what has been replaced since.

Side streams: events on the current stream do not see work a candidate launches on another stream
without joining it back. So a few extra calls are timed twice, by events and by the wall clock
around a device-wide synchronize; when the wall clock is much longer, the candidate is flagged
`side_stream` (see `side_stream_flag`).
"""
from __future__ import annotations

import math
import statistics
import time
from typing import Callable

import torch

from kernelwright.profile.energy import EnergyMeter

from .checks import check_flag
from .config import JudgeConfig
from .verdict import INFO, REJECT, WARN, Flag, TimingStats


def _capture() -> dict[str, object]:
    cuda = torch.cuda
    event_base = getattr(torch._C, "_CudaEventBase", None)
    graph_cls = getattr(cuda, "CUDAGraph", None)
    return {
        "torch.cuda.synchronize": cuda.synchronize,
        "torch.cuda.Event": cuda.Event,
        "torch.cuda.Event.record": cuda.Event.record,
        "torch.cuda.Event.elapsed_time": cuda.Event.elapsed_time,
        "torch.cuda.Event.synchronize": cuda.Event.synchronize,
        "torch.cuda.current_stream": cuda.current_stream,
        "torch.cuda.CUDAGraph": graph_cls,
        "torch.cuda.CUDAGraph.replay": getattr(graph_cls, "replay", None),
        # the C-level objects the Python wrappers call at run time (module attributes are patchable)
        "torch._C._cuda_synchronize": getattr(torch._C, "_cuda_synchronize", None),
        "torch._C._CudaEventBase.elapsed_time": getattr(event_base, "elapsed_time", None),
        "time.perf_counter": time.perf_counter,
        "time.perf_counter_ns": time.perf_counter_ns,
        "time.time": time.time,
        "time.monotonic": time.monotonic,
    }


# name -> the object as it was when this module was imported (before any candidate code ran)
ORIGINALS: dict[str, object] = _capture()
_O = dict(ORIGINALS)  # private copy: what `measure` calls, even if ORIGINALS itself is edited
_SUM = torch.sum  # the L2 flush's read, captured before any candidate is loaded

DEFAULT_FLUSH_BYTES = 256 * 2**20  # when the device does not report its L2 size
WALL_CHECK_REPS = 7  # at most this many calls timed by both events and wall clock (side streams)
# side-stream rule (milliseconds / ratios): see side_stream_flag
SIDE_MIN_WALL_MS = 0.05
SIDE_SLACK_MS = 0.02
SIDE_REJECT_RATIO = 1.5
SIDE_WARN_RATIO = 1.15


def tampered() -> list[str]:
    """Names in ORIGINALS whose live object is no longer the one captured at import."""
    live = _capture()
    return sorted(name for name, obj in _O.items() if obj is not None and live.get(name) is not obj)


def measure(fn: Callable[[], object], config: JudgeConfig, device: str) -> tuple[TimingStats, list[Flag]]:
    """Median time of one `fn()` call on `device` ("cuda", "cuda:1", "cpu"), and timing flags."""
    if str(device).startswith("cuda"):
        return _measure_cuda(fn, config, torch.device(device))
    return _measure_cpu(fn, config), []


# ---------------------------------------------------------------- statistics


def summarize(times_ms: list[float], method: str, l2_flushed: bool = False, note: str = "") -> TimingStats:
    """TimingStats over per-call times in milliseconds (median and inter-quartile range)."""
    if not times_ms:
        raise ValueError("no timings to summarize")
    ordered = sorted(times_ms)
    if len(ordered) >= 2:
        q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
    else:
        q1 = q3 = ordered[0]
    return TimingStats(
        median_ms=statistics.median(ordered),
        iqr_ms=q3 - q1,
        mean_ms=statistics.fmean(ordered),
        min_ms=ordered[0],
        max_ms=ordered[-1],
        n=len(ordered),
        method=method,
        l2_flushed=l2_flushed,
        note=note,
    )


def rep_count(per_call_ms: float, config: JudgeConfig) -> int:
    """Repetitions that fill config.rep_ms, kept within [min_reps, max_reps]."""
    wanted = config.rep_ms / max(per_call_ms, 1e-6)
    return int(min(max(math.ceil(wanted), config.min_reps), config.max_reps))


def warmup_count(per_call_ms: float, config: JudgeConfig) -> int:
    return int(min(max(math.ceil(config.warmup_ms / max(per_call_ms, 1e-6)), 1), config.max_reps))


# ---------------------------------------------------------------- CPU


def _measure_cpu(fn: Callable[[], object], config: JudgeConfig) -> TimingStats:
    clock = _O["time.perf_counter"]
    fn()  # first call: lazy initialisation, Triton interpreter set-up
    start = clock()
    fn()
    estimate_ms = (clock() - start) * 1e3
    for _ in range(warmup_count(estimate_ms, config) - 1):
        fn()
    times = []
    for _ in range(rep_count(estimate_ms, config)):
        start = clock()
        fn()
        times.append((clock() - start) * 1e3)
    return summarize(times, "wall_cpu", note="CPU wall time: not GPU performance")


# ---------------------------------------------------------------- GPU


class _CudaClock:
    """Captured CUDA events, stream and synchronize for one device; nothing looked up at call time."""

    def __init__(self, device: torch.device):
        self.device = device
        self.stream = _O["torch.cuda.current_stream"](device)
        self._sync = _O["torch._C._cuda_synchronize"] or _O["torch.cuda.synchronize"]

    def event(self):
        return _O["torch.cuda.Event"](enable_timing=True)

    def record(self, event) -> None:
        _O["torch.cuda.Event.record"](event, self.stream)

    def elapsed(self, start, end) -> float:
        return _O["torch.cuda.Event.elapsed_time"](start, end)

    def synchronize(self) -> None:
        """Device-wide: waits for every stream, including ones the candidate created."""
        self._sync()


def l2_flush_buffer(device: torch.device) -> torch.Tensor:
    """A byte buffer twice the L2 size; reading (or writing) it evicts whatever the last call left in L2."""
    props = torch.cuda.get_device_properties(device)
    l2_bytes = int(getattr(props, "L2_cache_size", 0) or 0)
    size = 2 * l2_bytes if l2_bytes > 0 else DEFAULT_FLUSH_BYTES
    return torch.zeros(size, dtype=torch.int8, device=device)


class L2Flush:
    """Evicts L2 before a timed call by READING a buffer twice its size (a sum into one int32).
    A write flush left dirty lines whose write-back to DRAM overlapped the timed call: on the H100
    (2026-11-24, bench/timing_agreement.py, 6 kernels of >= 50 µs) event times agreed with ncu's
    gpu__time_duration within 3 % on 3 of 6 kernels with the write flush and on 5 of 6 with the read
    (the bf16 8192 GEMM +5.7 to +9 % under every variant; docs/benchmarks.md)."""

    def __init__(self, device: torch.device):
        self.buffer = l2_flush_buffer(device)
        self.sink = torch.empty((), dtype=torch.int32, device=device)

    def __call__(self) -> None:
        _SUM(self.buffer, dim=0, dtype=torch.int32, out=self.sink)


def _capture_graph(fn: Callable[[], object], clock: _CudaClock):
    """fn captured in a CUDA graph, returning (replay callable, note); (None, why) when it cannot be."""
    graph_cls = _O["torch.cuda.CUDAGraph"]
    replay = _O["torch.cuda.CUDAGraph.replay"]
    try:
        side = torch.cuda.Stream(clock.device)
        side.wait_stream(clock.stream)
        with torch.cuda.stream(side):  # warm up off the default stream, as torch.cuda.graphs asks
            for _ in range(3):
                fn()
        clock.stream.wait_stream(side)
        clock.synchronize()
        graph = graph_cls()
        with torch.cuda.graph(graph):
            fn()
        clock.synchronize()
    except Exception as exc:  # noqa: BLE001 -- many candidates cannot be captured (host syncs, allocations): say so
        clock.synchronize()
        return None, f"CUDA graph capture failed ({type(exc).__name__}: {str(exc)[:200]}); timed eager calls"
    return (lambda: replay(graph)), "CUDA graph replays"


def _prepare(call: Callable[[], object], flush: "L2Flush | None") -> None:
    """Before a timed call: the L2 flushed, then the call's inputs written anew where it can
    (`refill`, see `timed.TimedCall`): the state the judge's checker times candidates in."""
    if flush is not None:
        flush()
    refill = getattr(call, "refill", None)
    if refill is not None:
        refill()


def _estimate_ms(call: Callable[[], object], clock: _CudaClock, flush: "L2Flush | None") -> float:
    """Per-call time (flush included) from one call, refined with five more when it is short."""
    start, end = clock.event(), clock.event()
    count = 1
    for attempt in range(2):
        clock.record(start)
        for _ in range(count):
            _prepare(call, flush)
            call()
        clock.record(end)
        clock.synchronize()
        per_call = clock.elapsed(start, end) / count
        if per_call >= 1.0 or attempt == 1:
            return per_call
        count = 5
    return per_call


def _timed_reps(call, clock: _CudaClock, flush: "L2Flush | None", reps: int) -> list[float]:
    starts = [clock.event() for _ in range(reps)]
    ends = [clock.event() for _ in range(reps)]
    for start, end in zip(starts, ends, strict=False):
        _prepare(call, flush)
        clock.record(start)
        call()
        clock.record(end)
    clock.synchronize()
    return [clock.elapsed(s, e) for s, e in zip(starts, ends, strict=False)]


def _measure_cuda(fn, config: JudgeConfig, device: torch.device) -> tuple[TimingStats, list[Flag]]:
    with torch.cuda.device(device):
        clock = _CudaClock(device)
        flush = L2Flush(device) if config.flush_l2 else None
        fn()  # first call: JIT compilation, module load, handle creation
        clock.synchronize()
        call, method, note = fn, "cuda_events", ""
        if config.cuda_graph:
            replay, note = _capture_graph(fn, clock)
            if replay is not None:
                call, method = replay, "cuda_graph"
        estimate = _estimate_ms(call, clock, flush)
        for _ in range(warmup_count(estimate, config)):
            call()
        times = _timed_reps(call, clock, flush, rep_count(estimate, config))
        stats = summarize(times, method, l2_flushed=flush is not None, note=note)
        wall_reps = max(3, min(WALL_CHECK_REPS, math.ceil(config.rep_ms / max(estimate, 1e-6))))
        flags = [f for f in (side_stream_flag(*_wall_check(fn, clock, flush, wall_reps)),) if f]
        del flush
    return stats, flags + noise_flags(stats)


def _wall_check(fn, clock: _CudaClock, flush, reps: int) -> tuple[float, float]:
    """(events ms, wall ms) of the call, of a few each ended by a device-wide sync, whose wall time
    exceeds its events' time least: GPU work on a stream the events do not see widens that gap in
    every call, while the host being descheduled (other processes' work on a shared machine)
    widens it only in some, so the least-widened call keeps the first and drops the second."""
    perf = _O["time.perf_counter"]
    start, end = clock.event(), clock.event()
    events, walls = [], []
    for _ in range(reps):
        if flush is not None:
            flush()
        clock.synchronize()
        t0 = perf()
        clock.record(start)
        fn()
        clock.record(end)
        clock.synchronize()
        walls.append((perf() - t0) * 1e3)
        events.append(clock.elapsed(start, end))
    return min(zip(events, walls, strict=True), key=lambda pair: pair[1] - pair[0])


def side_stream_flag(events_ms: float, wall_ms: float) -> Flag | None:
    """Flag calls whose wall time (to a device-wide sync) far exceeds what the events saw.

    Wall time always includes the events' span plus launch and synchronize overhead (tens of µs),
    hence the slack and the 50 µs minimum. Beyond that, the gap is GPU work the current stream's
    events did not see: work on another stream that was never joined back. REJECT when
    wall > 1.5 x events + 20 µs, WARN when wall > 1.15 x events + 20 µs.
    """
    if wall_ms < SIDE_MIN_WALL_MS:
        return None
    detail = (f"events saw {events_ms:.4f} ms, the wall clock to a device-wide sync {wall_ms:.4f} ms "
              "(of the calls checked, the one whose wall time exceeds its events least)")
    if wall_ms > SIDE_REJECT_RATIO * events_ms + SIDE_SLACK_MS:
        return check_flag("side_stream", REJECT,
                          f"GPU work escapes the timed stream: {detail}; "
                          "launch on the current stream or make it wait for your streams before returning")
    if wall_ms > SIDE_WARN_RATIO * events_ms + SIDE_SLACK_MS:
        return check_flag("side_stream", WARN,
                          f"wall time exceeds event time more than launch overhead explains: {detail}")
    return None


def open_energy_meter(config: JudgeConfig, device: str):
    """An `EnergyMeter` for `device` with its NVML handle already open (`EnergyMeter.prepare`), for
    `energy_per_call(meter=...)`; None where no energy is measured (CPU, switched off, no module).
    Call it before taking the device lock: opening the driver needs no exclusive device."""
    if not str(device).startswith("cuda") or config.energy_ms <= 0:
        return None
    return EnergyMeter(torch.device(device).index or 0).prepare()


def energy_per_call(fn: Callable[[], object], config: JudgeConfig, device: str, meter=None) -> dict:
    """Joules per call of `fn` on the GPU, or {"available": False, "reason": ...}.

    `fn` is repeated for `config.energy_ms` without the L2 flush (whose reads would be counted as
    the candidate's energy) inside `kernelwright.profile.energy.EnergyMeter` (NVML's energy
    counter, else power samples; `meter`: one from `open_energy_meter`, else one is opened here).
    Run it right after `measure`, under the same exclusive device lock, so no other process's
    kernels are counted.
    """
    if not str(device).startswith("cuda"):
        return {"available": False, "reason": "CPU run: GPU energy is not measured"}
    if config.energy_ms <= 0:
        return {"available": False, "reason": "switched off (energy_ms = 0)"}
    dev = torch.device(device)
    meter = meter if meter is not None else EnergyMeter(dev.index or 0)
    clock = _CudaClock(dev)
    perf = _O["time.perf_counter"]
    calls = 0
    with torch.cuda.device(dev):
        clock.synchronize()
        with meter:
            deadline = perf() + config.energy_ms / 1e3
            while meter.method != "unavailable" and (calls == 0 or perf() < deadline):
                fn()
                calls += 1
                if calls % 8 == 0:
                    clock.synchronize()  # keep the host from racing ahead: the window must hold the work
            clock.synchronize()
    reading = meter.reading(calls).to_dict()
    reading["available"] = reading.get("joules") is not None
    if not reading["available"]:
        reading["reason"] = reading.get("note") or "no energy counter or power readings"
    return reading


def noise_flags(stats: TimingStats) -> list[Flag]:
    if stats.median_ms > 0 and stats.iqr_ms / stats.median_ms > 0.1:
        return [Flag("noisy_timing", INFO, f"inter-quartile range is {stats.iqr_ms / stats.median_ms:.0%} "
                     "of the median: compare with care")]
    return []
