"""timing.measure: statistics, repetition choice, clocks a candidate cannot replace, side streams."""
from __future__ import annotations

import statistics
import time

import numpy as np
import pytest
import torch

from kernelwright.judge import timing
from kernelwright.judge.config import JudgeConfig
from kernelwright.judge.verdict import REJECT, WARN

FAST = JudgeConfig(warmup_ms=2.0, rep_ms=20.0, min_reps=5, max_reps=50)


def busy(ms: float):
    """A CPU call that takes about `ms` milliseconds by the real clock."""
    clock = timing.ORIGINALS["time.perf_counter"]

    def call():
        end = clock() + ms / 1e3
        while clock() < end:
            pass

    return call


def test_summarize_matches_numpy_percentiles():
    times = [3.0, 1.0, 2.0, 10.0, 4.0, 5.0, 2.5]
    stats = timing.summarize(times, "wall_cpu")
    q1, q3 = np.percentile(times, [25, 75])
    assert stats.median_ms == pytest.approx(np.median(times))
    assert stats.iqr_ms == pytest.approx(q3 - q1)
    assert (stats.min_ms, stats.max_ms, stats.n) == (1.0, 10.0, 7)
    assert stats.mean_ms == pytest.approx(statistics.fmean(times))


def test_summarize_single_and_empty():
    assert timing.summarize([2.0], "wall_cpu").iqr_ms == 0.0
    with pytest.raises(ValueError):
        timing.summarize([], "wall_cpu")


def test_rep_count_fills_rep_ms_within_bounds():
    config = JudgeConfig(rep_ms=100.0, min_reps=20, max_reps=1000)
    assert timing.rep_count(1.0, config) == 100
    assert timing.rep_count(50.0, config) == 20  # slow calls: at least min_reps
    assert timing.rep_count(1e-4, config) == 1000  # fast calls: at most max_reps


def test_cpu_measure_reports_wall_time_in_ms():
    stats, flags = timing.measure(busy(2.0), FAST, "cpu")
    assert stats.method == "wall_cpu"
    assert "not GPU performance" in stats.note
    assert FAST.min_reps <= stats.n <= FAST.max_reps
    assert 1.9 <= stats.median_ms < 6.0
    assert stats.min_ms <= stats.median_ms <= stats.max_ms
    assert flags == []


def test_captured_clock_survives_monkeypatched_perf_counter(monkeypatch):
    """A candidate that freezes time.perf_counter cannot make itself look instant."""
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    monkeypatch.setattr(time, "perf_counter_ns", lambda: 0)
    stats, _ = timing.measure(busy(1.0), FAST, "cpu")
    assert stats.median_ms >= 0.9
    assert "time.perf_counter" in timing.tampered()


def test_originals_keep_the_objects_from_import_time(monkeypatch):
    real_elapsed = torch.cuda.Event.elapsed_time
    monkeypatch.setattr(torch.cuda.Event, "elapsed_time", lambda self, end: 0.001)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    assert timing.ORIGINALS["torch.cuda.Event.elapsed_time"] is real_elapsed
    assert timing._O["torch.cuda.Event.elapsed_time"] is real_elapsed
    assert {"torch.cuda.Event.elapsed_time", "torch.cuda.synchronize"} <= set(timing.tampered())
    for name in ("torch.cuda.Event.record", "torch.cuda.Event.synchronize", "time.time", "time.monotonic"):
        assert name in timing.ORIGINALS


def test_tampered_is_empty_when_nothing_was_replaced():
    assert timing.tampered() == []


def test_side_stream_rule():
    assert timing.side_stream_flag(1.0, 1.03) is None  # launch + sync overhead
    assert timing.side_stream_flag(0.001, 0.04) is None  # too short to judge
    warn = timing.side_stream_flag(1.0, 1.3)
    assert warn is not None and warn.severity == WARN
    reject = timing.side_stream_flag(0.01, 2.0)
    assert reject is not None and reject.severity == REJECT and reject.code == "side_stream"


class _EventsSay:
    """A clock whose events always report `ms`, whatever the call took on the host."""

    def __init__(self, ms: float):
        self.ms = ms

    def event(self):
        return object()

    def record(self, event) -> None:
        pass

    def elapsed(self, start, end) -> float:
        return self.ms

    def synchronize(self) -> None:
        pass


def test_wall_check_keeps_the_call_least_delayed_by_the_host():
    # four of five calls are held up 30 ms on the host (a process descheduled on a busy machine):
    # not GPU work of the candidate's, so the check must not see it
    delays = iter([30.0, 30.0, 0.0, 30.0, 30.0])
    events_ms, wall_ms = timing._wall_check(lambda: busy(next(delays))(), _EventsSay(1.0), None, 5)
    assert events_ms == 1.0 and wall_ms < 10.0
    assert timing.side_stream_flag(events_ms, max(wall_ms, events_ms)) is None


def test_wall_check_still_sees_work_that_widens_every_call():
    # every call takes 20 ms of wall time while its events see 1 ms (work on a stream the events
    # miss): the least-widened call still shows it, and the rule rejects
    events_ms, wall_ms = timing._wall_check(busy(20.0), _EventsSay(1.0), None, 4)
    assert wall_ms >= 19.0
    flag = timing.side_stream_flag(events_ms, wall_ms)
    assert flag is not None and flag.severity == REJECT


# ---------------------------------------------------------------- GPU


@pytest.mark.gpu
def test_gpu_events_agree_with_wall_clock():
    a = torch.randn(4096, 4096, device="cuda")
    out = torch.empty_like(a)
    stats, flags = timing.measure(lambda: torch.matmul(a, a, out=out), FAST, "cuda")
    assert stats.method == "cuda_events" and stats.l2_flushed
    clock = timing.ORIGINALS["time.perf_counter"]
    walls = []
    for _ in range(10):
        torch.cuda.synchronize()
        start = clock()
        torch.matmul(a, a, out=out)
        torch.cuda.synchronize()
        walls.append((clock() - start) * 1e3)
    assert statistics.median(walls) == pytest.approx(stats.median_ms, rel=0.15, abs=0.05)
    assert not [f for f in flags if f.code == "side_stream"]


@pytest.mark.gpu
def test_l2_flush_buffer_is_twice_l2():
    buffer = timing.l2_flush_buffer(torch.device("cuda"))
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    assert buffer.numel() * buffer.element_size() == (2 * l2 if l2 else timing.DEFAULT_FLUSH_BYTES)


@pytest.mark.gpu
def test_the_l2_flush_reads_its_buffer_and_writes_only_one_int32():
    """The flush evicts L2 by reading (no dirty lines left to write back during the timed call)."""
    flush = timing.L2Flush(torch.device("cuda"))
    flush.buffer[:7] = 3
    before = flush.buffer.clone()
    flush()
    torch.cuda.synchronize()
    assert torch.equal(flush.buffer, before) and int(flush.sink) == 21 and flush.sink.numel() == 1


@pytest.mark.gpu
def test_gpu_side_stream_work_is_flagged():
    a = torch.randn(4096, 4096, device="cuda")
    out = torch.empty_like(a)
    side = torch.cuda.Stream()

    def hidden():
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(4):
                torch.matmul(a, a, out=out)

    _, flags = timing.measure(hidden, FAST, "cuda")
    assert any(f.code == "side_stream" and f.severity == REJECT for f in flags)


@pytest.mark.gpu
def test_gpu_patched_elapsed_time_does_not_fool_measure(monkeypatch):
    a = torch.randn(4096, 4096, device="cuda")
    out = torch.empty_like(a)
    honest, _ = timing.measure(lambda: torch.matmul(a, a, out=out), FAST, "cuda")
    monkeypatch.setattr(torch.cuda.Event, "elapsed_time", lambda self, end: 1e-6)
    patched, _ = timing.measure(lambda: torch.matmul(a, a, out=out), FAST, "cuda")
    assert patched.median_ms == pytest.approx(honest.median_ms, rel=0.2)


@pytest.mark.gpu
def test_gpu_cuda_graph_replays():
    a = torch.randn(256, 256, device="cuda")
    config = JudgeConfig(warmup_ms=2, rep_ms=20, min_reps=5, max_reps=100, cuda_graph=True)
    stats, _ = timing.measure(lambda: torch.relu(a), config, "cuda")
    assert stats.method == "cuda_graph"


def test_energy_on_cpu_says_why_not_and_off_means_off():
    config = JudgeConfig()
    assert timing.energy_per_call(lambda: None, config, "cpu") == {
        "available": False, "reason": "CPU run: GPU energy is not measured"}
    config.energy_ms = 0
    assert timing.energy_per_call(lambda: None, config, "cuda")["reason"] == "switched off (energy_ms = 0)"


@pytest.mark.gpu
def test_gpu_energy_per_call_is_counted_without_the_l2_flush():
    import torch

    x = torch.randn(1 << 24, device="cuda")
    reading = timing.energy_per_call(lambda: x.mul(2.0), JudgeConfig(energy_ms=300), "cuda")
    if reading["available"]:  # an energy counter or power readings were found
        assert reading["calls"] > 10 and 0 < reading["joules_per_call"] < 1.0
    else:
        assert reading["reason"]
