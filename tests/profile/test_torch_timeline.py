"""Timeline summary from torch-profiler events (hand-built event lists) and a real CPU profile."""
import pytest
import torch

from kernelwright.profile.torchprof import FORWARD_RANGE, TimelineEvent, collect_timeline, summarize_timeline


def forward_events(offset: float, kernels: list[tuple[float, float]], length: float, name="k") -> list[TimelineEvent]:
    events = [TimelineEvent(FORWARD_RANGE, "range", offset, offset + length)]
    return events + [TimelineEvent(name, "kernel", offset + s, offset + e) for s, e in kernels]


def test_busy_time_is_the_union_of_overlapping_kernels():
    events = forward_events(0, [(10, 30), (20, 40), (60, 70)], 80)
    s = summarize_timeline(events, calls=1)
    assert s.kernels_per_call == 3
    assert s.kernel_us_per_call == pytest.approx(50)  # 20 + 20 + 10, overlap counted twice
    assert s.busy_us_per_call == pytest.approx(40)  # [10, 40] + [60, 70]
    assert s.wall_us_per_call == pytest.approx(80)
    assert s.idle_fraction == pytest.approx(0.5)
    assert s.max_gap_us == pytest.approx(20)  # 40 -> 60
    assert s.median_kernel_us == pytest.approx(20)


def test_kernels_running_past_the_forward_extend_the_window():
    events = forward_events(0, [(5, 150)], 20)  # the host returns long before the GPU is done
    s = summarize_timeline(events, calls=1)
    assert s.wall_us_per_call == pytest.approx(150)
    assert s.idle_fraction == pytest.approx(5 / 150)


def test_values_are_per_call_and_syncs_only_count_inside_forwards():
    events = forward_events(0, [(10, 12), (20, 22)], 100) + forward_events(1000, [(10, 12), (20, 22)], 100)
    events += [TimelineEvent("aten::item", "cpu", 50, 60), TimelineEvent("cudaStreamSynchronize", "cpu", 1050, 1060),
               TimelineEvent("cudaDeviceSynchronize", "cpu", 1200, 1300)]  # the profiler's own final sync
    s = summarize_timeline(events, calls=2)
    assert s.kernels_per_call == 2 and s.syncs_per_call == 1
    assert s.top_kernels == [{"name": "k", "total_us": pytest.approx(4.0), "count": 2.0}]
    assert s.long_gaps_per_call == 0.5  # one gap >= 50 us (between the forwards) in two calls
    assert s.wall_us_per_call == pytest.approx(550)  # 0 .. 1100 over two calls


def test_memcpy_is_busy_time_but_not_a_kernel():
    events = forward_events(0, [(0, 10)], 40) + [TimelineEvent("Memcpy DtoH", "memcpy", 10, 30)]
    s = summarize_timeline(events, calls=1)
    assert s.kernels_per_call == 1 and s.busy_us_per_call == pytest.approx(30)


def test_no_events_gives_an_empty_summary():
    s = summarize_timeline([], calls=3)
    assert s.calls == 3 and s.kernels_per_call == 0 and s.wall_us_per_call == 0


def test_collect_timeline_on_cpu_records_forwards_and_host_syncs():
    x = torch.randn(64, 64)

    def forward():
        y = x @ x
        return float(y.sum().item())  # a host synchronisation on a GPU

    s = collect_timeline(forward, calls=3, use_cuda=False)
    assert s.device == "cpu" and s.calls == 3
    assert s.kernels_per_call == 0  # no device
    assert s.syncs_per_call >= 1
    assert s.wall_us_per_call > 0


def test_nested_sync_events_count_once():
    events = forward_events(0, [(10, 12)], 100) + [
        TimelineEvent("aten::item", "cpu", 20, 40), TimelineEvent("aten::_local_scalar_dense", "cpu", 21, 39),
        TimelineEvent("cudaStreamSynchronize", "cpu", 25, 38), TimelineEvent("aten::item", "cpu", 60, 70)]
    assert summarize_timeline(events, calls=1).syncs_per_call == 2
