"""Bottleneck rules: kernels from the hand-written stage-1 sample, edge cases from metric dicts."""
from pathlib import Path

import pytest

from kernelwright.profile.classify import (Bottleneck, Thresholds, classify_forward, classify_kernel,
                                           classify_timeline, forward_us)
from kernelwright.profile.parse import KernelProfile, parse_raw_csv
from kernelwright.profile.torchprof import TimelineSummary

HANDWRITTEN = Path(__file__).parent / "fixtures" / "handwritten"
SM = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEM = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
DRAM = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
OCC = "sm__warps_active.avg.pct_of_peak_sustained_active"
WAVES = "launch__waves_per_multiprocessor"
TENSOR = "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"


def kernel(**metrics) -> KernelProfile:
    names = {"sm": SM, "mem": MEM, "dram": DRAM, "occ": OCC, "waves": WAVES, "tensor": TENSOR}
    return KernelProfile("k", metrics={names[k]: v for k, v in metrics.items()})


def test_handwritten_sample_kernels_get_their_classes():
    classes = {p.name: classify_kernel(p) for p in parse_raw_csv((HANDWRITTEN / "stage1_raw.csv").read_text())}
    assert classes["add_kernel"].bottleneck == Bottleneck.memory
    assert classes["sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64"].bottleneck == Bottleneck.compute
    serial = classes["serial_kernel"]
    assert serial.bottleneck == Bottleneck.latency
    assert "0.01 of one wave" in serial.reason and "occupancy 3%" in serial.reason
    assert serial.numbers["waves"] == pytest.approx(0.01)


@pytest.mark.parametrize("metrics, expected, confident", [
    ({"sm": 20, "mem": 85, "occ": 80, "waves": 10}, Bottleneck.memory, True),
    ({"sm": 20, "mem": 30, "dram": 62, "occ": 80, "waves": 10}, Bottleneck.memory, True),  # DRAM alone decides
    ({"sm": 82, "mem": 40, "occ": 50, "waves": 10}, Bottleneck.compute, True),
    ({"sm": 30, "mem": 20, "tensor": 70, "occ": 20, "waves": 1}, Bottleneck.compute, True),  # tensor pipe counts
    ({"sm": 65, "mem": 65, "occ": 80, "waves": 10}, Bottleneck.memory, True),  # memory wins ties
    ({"sm": 20, "mem": 30, "occ": 80, "waves": 10}, Bottleneck.latency, True),  # nothing busy
    ({"sm": 45, "mem": 55, "occ": 80, "waves": 10}, Bottleneck.memory, False),  # in between, leaning
    ({"sm": 55, "mem": 45, "occ": 80, "waves": 10}, Bottleneck.compute, False),
    ({"sm": 55, "mem": 45, "occ": 12, "waves": 10}, Bottleneck.latency, True),  # in between, starved
    ({"sm": 50, "mem": 45, "occ": 80, "waves": 0.5}, Bottleneck.latency, True),  # grid below one wave
])
def test_rules(metrics, expected, confident):
    result = classify_kernel(kernel(**metrics))
    assert result.bottleneck == expected
    assert result.confident is confident


def test_thresholds_move_the_boundary():
    k = kernel(sm=20, mem=55, occ=80, waves=10)
    assert classify_kernel(k).confident is False
    assert classify_kernel(k, Thresholds(roof_pct=50)).bottleneck == Bottleneck.memory
    assert classify_kernel(k, Thresholds(roof_pct=50)).confident is True


def test_no_speed_of_light_metrics_is_unknown():
    result = classify_kernel(KernelProfile("k", metrics={OCC: 50.0}))
    assert result.bottleneck == Bottleneck.unknown


def test_reason_quotes_the_numbers():
    result = classify_kernel(kernel(sm=12, mem=91, occ=80, waves=10))
    assert result.reason == "memory-bound: memory 91% / SM 12% of peak"
    assert result.numbers["mem_pct"] == 91 and result.numbers["sm_pct"] == 12


def timeline(**fields) -> TimelineSummary:
    base = dict(calls=3, kernels_per_call=1, kernel_us_per_call=90, busy_us_per_call=90, wall_us_per_call=100,
                idle_fraction=0.1, median_kernel_us=90, max_gap_us=5, syncs_per_call=0)
    base.update(fields)
    return TimelineSummary(**base)


def test_busy_gpu_is_not_launch_or_host_bound():
    assert classify_timeline(timeline()) is None
    assert classify_timeline(None) is None
    assert classify_timeline(timeline(kernels_per_call=0)) is None
    assert classify_timeline(timeline(wall_us_per_call=0)) is None  # nothing to judge against


def test_the_plain_call_caps_the_forward_time():
    """A profiler window inflated by the profiler's own host work does not make a busy GPU idle."""
    inflated = timeline(busy_us_per_call=260, wall_us_per_call=1400, idle_fraction=0.81)
    assert classify_timeline(inflated).bottleneck == Bottleneck.launch  # no plain time: the window decides
    assert classify_timeline(timeline(busy_us_per_call=260, wall_us_per_call=1400, plain_us_per_call=350)) is None
    # and the window caps a plain call made slow by its synchronisation
    assert forward_us(timeline(wall_us_per_call=120, plain_us_per_call=400)) == 120


def test_many_short_kernels_with_small_gaps_are_launch_bound():
    s = timeline(kernels_per_call=40, busy_us_per_call=120, wall_us_per_call=400, median_kernel_us=2.5,
                 max_gap_us=12)
    result = classify_timeline(s)
    assert result.bottleneck == Bottleneck.launch
    assert result.numbers["idle_us_per_launch"] == pytest.approx(280 / 40)
    assert result.numbers["idle_fraction"] == pytest.approx(0.7)
    assert "40 kernel launches" in result.reason


def test_long_gaps_holding_most_of_the_idle_time_are_host_bound():
    gaps = timeline(kernels_per_call=4, busy_us_per_call=200, wall_us_per_call=1200, median_kernel_us=50,
                    max_gap_us=600, long_gap_us_per_call=900)
    result = classify_timeline(gaps)
    assert result.bottleneck == Bottleneck.host
    assert "gaps of 50 us or more hold 900 us of it, the largest 600 us" in result.reason
    few = timeline(kernels_per_call=4, busy_us_per_call=200, wall_us_per_call=1200, long_gap_us_per_call=300)
    assert classify_timeline(few).bottleneck == Bottleneck.launch  # 300 of 1000 idle us: not most of it
    share = Thresholds(host_gap_share=0.25)
    assert classify_timeline(few, share).bottleneck == Bottleneck.host


def test_syncs_are_host_bound():
    syncs = timeline(kernels_per_call=40, busy_us_per_call=120, wall_us_per_call=400, median_kernel_us=2.5,
                     max_gap_us=12, syncs_per_call=2)
    result = classify_timeline(syncs)
    assert result.bottleneck == Bottleneck.host
    assert "2 host-device synchronisations" in result.reason


def test_the_forward_takes_the_hottest_kernels_class_unless_the_timeline_decided():
    kernels = parse_raw_csv((HANDWRITTEN / "stage1_raw.csv").read_text())
    hottest_first = sorted(kernels, key=lambda k: -k.total_ns)
    assert classify_forward(None, hottest_first).bottleneck == Bottleneck.latency  # serial_kernel, 2048 us
    launch = classify_timeline(timeline(kernels_per_call=40, busy_us_per_call=120, wall_us_per_call=400))
    assert classify_forward(launch, hottest_first) is launch
    assert classify_forward(None, []).bottleneck == Bottleneck.unknown
