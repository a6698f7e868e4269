"""Timeline summary from torch-profiler events (hand-built event lists) and a real CPU profile."""
import pytest
import torch

from kernelwright.profile.torchprof import (
    FORWARD_RANGE, PROFILER_WARMUP_CALLS, TimelineEvent, collect_timeline, events_from_json, events_to_json,
    forward_windows, record_timeline, summarize_timeline, timeline_from_runner,
)


def forward_events(offset: float, kernels: list[tuple[float, float]], length: float, name="k") -> list[TimelineEvent]:
    events = [TimelineEvent(FORWARD_RANGE, "range", offset, offset + length)]
    return events + [TimelineEvent(name, "kernel", offset + s, offset + e) for s, e in kernels]


def test_busy_time_is_the_union_of_overlapping_kernels():
    events = forward_events(0, [(10, 30), (20, 40), (60, 70)], 80)
    s = summarize_timeline(events)
    assert s.calls == 1 and s.kernels_per_call == 3
    assert s.kernel_us_per_call == pytest.approx(50)  # 20 + 20 + 10, overlap counted twice
    assert s.busy_us_per_call == pytest.approx(40)  # [10, 40] + [60, 70]
    assert s.wall_us_per_call == pytest.approx(80)
    assert s.idle_fraction == pytest.approx(0.5)
    assert s.max_gap_us == pytest.approx(20)  # 40 -> 60
    assert s.median_kernel_us == pytest.approx(20)


def test_kernels_running_past_the_forward_extend_its_window():
    events = forward_events(0, [(5, 150)], 20)  # the host returns long before the GPU is done
    s = summarize_timeline(events)
    assert s.wall_us_per_call == pytest.approx(150)
    assert s.idle_fraction == pytest.approx(5 / 150)


def test_time_between_forwards_is_not_idle_time():
    """Three 100-us forwards, 1 ms apart: the loop around them is not the model's idle time."""
    events = [e for i in range(3) for e in forward_events(1000 * i, [(10, 90)], 100)]
    s = summarize_timeline(events)
    assert s.calls == 3 and s.wall_us_per_call == pytest.approx(100)
    assert s.idle_fraction == pytest.approx(0.2) and s.max_gap_us == pytest.approx(10)
    assert s.long_gaps_per_call == 0 and s.long_gap_us_per_call == 0


def test_the_profiler_warm_up_forward_is_dropped():
    slow_first = forward_events(0, [(3000, 3090)], 3100)  # the profiler setting itself up
    events = slow_first + forward_events(5000, [(10, 90)], 100) + forward_events(6000, [(10, 90)], 100)
    assert summarize_timeline(events).max_gap_us == pytest.approx(3000)
    s = summarize_timeline(events, skip=1)
    assert s.calls == 2 and s.max_gap_us == pytest.approx(10) and s.wall_us_per_call == pytest.approx(100)


def test_times_are_medians_so_one_slow_forward_does_not_decide():
    events = [e for i, length in enumerate((100, 100, 4000)) for e in forward_events(10000 * i, [(10, 90)], length)]
    s = summarize_timeline(events)
    assert s.wall_us_per_call == pytest.approx(100) and s.busy_us_per_call == pytest.approx(80)
    assert s.max_gap_us == pytest.approx(3910)  # the slow forward's tail, still reported as the largest gap


def test_host_work_after_the_last_kernel_and_long_gaps_are_counted():
    events = forward_events(0, [(5, 10), (200, 205)], 400)  # 190 us between kernels, 195 us after the last
    (window,) = forward_windows(events)
    assert window.gaps_us == [5, 190, 195]
    s = summarize_timeline(events)
    assert s.long_gaps_per_call == 2 and s.long_gap_us_per_call == pytest.approx(385)


def test_device_work_belongs_to_the_forward_it_started_in():
    events = forward_events(0, [(10, 20)], 50) + forward_events(100, [(5, 15), (20, 30)], 50)
    first, second = forward_windows(events)
    assert len(first.kernels) == 1 and len(second.kernels) == 2


def test_values_are_per_call_and_syncs_only_count_inside_forwards():
    events = forward_events(0, [(10, 12), (20, 22)], 100) + forward_events(1000, [(10, 12), (20, 22)], 100)
    events += [TimelineEvent("aten::item", "cpu", 50, 60), TimelineEvent("cudaStreamSynchronize", "cpu", 1050, 1060),
               TimelineEvent("cudaDeviceSynchronize", "cpu", 1200, 1300)]  # the recorder's sync between forwards
    s = summarize_timeline(events)
    assert s.kernels_per_call == 2 and s.syncs_per_call == 1
    assert s.top_kernels == [{"name": "k", "total_us": pytest.approx(4.0), "count": 2.0}]
    assert s.long_gaps_per_call == 1  # 22 -> 100 inside each forward


def test_nested_sync_events_count_once():
    events = forward_events(0, [(10, 12)], 100) + [
        TimelineEvent("aten::item", "cpu", 20, 40), TimelineEvent("aten::_local_scalar_dense", "cpu", 21, 39),
        TimelineEvent("cudaStreamSynchronize", "cpu", 25, 38), TimelineEvent("aten::item", "cpu", 60, 70)]
    assert summarize_timeline(events).syncs_per_call == 2


def test_memcpy_is_busy_time_but_not_a_kernel():
    events = forward_events(0, [(0, 10)], 40) + [TimelineEvent("Memcpy DtoH", "memcpy", 10, 30)]
    s = summarize_timeline(events)
    assert s.kernels_per_call == 1 and s.busy_us_per_call == pytest.approx(30)


def test_device_events_without_forward_ranges_form_one_window():
    s = summarize_timeline([TimelineEvent("k", "kernel", 100, 110), TimelineEvent("k", "kernel", 150, 160)])
    assert s.calls == 1 and s.wall_us_per_call == pytest.approx(60) and s.busy_us_per_call == pytest.approx(20)


def test_no_events_gives_an_empty_summary():
    s = summarize_timeline([])
    assert s.calls == 0 and s.kernels_per_call == 0 and s.wall_us_per_call == 0


def test_events_round_trip_through_their_compact_form():
    events = forward_events(1000.5, [(10, 12.25), (20, 22)], 100, name="void k<4>(float*)")
    events.append(TimelineEvent("aten::item", "cpu", 1050, 1060))
    stored = events_to_json(events)
    assert stored["names"] == [FORWARD_RANGE, "void k<4>(float*)", "aten::item"] and not stored["truncated"]
    back = events_from_json(stored)
    assert summarize_timeline(back) == summarize_timeline(events)
    assert len(events_from_json(events_to_json(events, limit=2))) == 2


def test_summary_from_runner_output_fills_the_plain_time_of_older_recordings():
    old = {"plain_ms_per_call": 0.35, "timeline": {"calls": 3, "kernels_per_call": 1.0, "wall_us_per_call": 1367.0,
                                                   "unknown_field": 1}}
    summary = timeline_from_runner(old)
    assert summary.plain_us_per_call == pytest.approx(350) and summary.wall_us_per_call == 1367.0
    new = {"plain_ms_per_call": 0.35, "timeline": {"calls": 3, "plain_us_per_call": 340.0}}
    assert timeline_from_runner(new).plain_us_per_call == 340.0
    assert timeline_from_runner({"ok": False}) is None


def test_record_timeline_on_cpu_keeps_one_range_per_forward_plus_the_warm_up():
    x = torch.randn(32, 32)
    events = record_timeline(lambda: (x @ x).sum().item(), calls=2, use_cuda=False)
    assert sum(1 for e in events if e.kind == "range") == 2 + PROFILER_WARMUP_CALLS
    assert {e.kind for e in events} <= {"range", "cpu"}  # other CPU ops are not kept
    assert any(e.name == "aten::item" for e in events)


def test_a_hold_around_the_recording_leaves_the_profiler_set_up_and_the_parsing_outside(monkeypatch):
    """The judge holds the device exclusively only while the forwards run: the profiler's set-up
    (kineto and CUPTI on a GPU) happens before the hold, the parsing of its events after it."""
    import contextlib

    from torch.profiler import profile

    log = []
    for name in ("prepare_trace", "start_trace", "stop_trace", "events"):
        real = getattr(profile, name)
        monkeypatch.setattr(profile, name, lambda self, _real=real, _name=name: (log.append(_name), _real(self))[1])

    @contextlib.contextmanager
    def hold():
        log.append("take")
        yield
        log.append("give")

    x = torch.randn(32, 32)
    events = record_timeline(lambda: (log.append("forward"), (x @ x).sum().item()), calls=2, use_cuda=False, hold=hold)
    assert log == ["prepare_trace", "take", "start_trace", "forward", "forward", "forward", "stop_trace", "give",
                   "events"]
    assert sum(1 for e in events if e.kind == "range") == 2 + PROFILER_WARMUP_CALLS


def test_a_forward_that_raises_inside_the_hold_stops_the_profiler_and_gives_the_hold_back():
    import contextlib

    log = []

    @contextlib.contextmanager
    def hold():
        log.append("take")
        try:
            yield
        finally:
            log.append("give")

    def broken():
        raise RuntimeError("candidate failed")

    with pytest.raises(RuntimeError):
        record_timeline(broken, calls=2, use_cuda=False, hold=hold)
    assert log == ["take", "give"]
    assert record_timeline(lambda: None, calls=1, use_cuda=False)  # no profiler left running: a new one starts


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
