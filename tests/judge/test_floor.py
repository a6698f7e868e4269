"""floor.py: FLOPs and bytes of a forward, the peak chosen by dtype, and faster-than-floor flags."""
from __future__ import annotations

import textwrap

import pytest
import torch

from kernelwright.judge import floor as kwfloor
from kernelwright.judge.peaks import Peaks, datasheet_peaks
from kernelwright.judge.verdict import REJECT, WARN, TimingStats
from kernelwright.problem import load_problem

# hand-written fake ceilings: small numbers so both terms are easy to compute
FAKE = Peaks("fake gpu", "0", copy_gbps=100.0, tflops={"fp32": 0.001, "tf32": 0.008, "bf16": 0.016, "fp16": 0.016})
FP32_ONLY = Peaks("fake gpu without tensor cores", "0", copy_gbps=100.0, tflops={"fp32": 0.001})

# a hand-written tiny problem in KernelBench format
LINEAR = textwrap.dedent("""\
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def __init__(self, in_features, out_features):
            super().__init__()
            self.linear = nn.Linear(in_features, out_features)

        def forward(self, x):
            return torch.relu(self.linear(x))

    batch = 16
    in_features = 64
    out_features = 32
    dtype = torch.float32

    def get_inputs():
        return [torch.randn(batch, in_features, dtype=dtype)]

    def get_init_inputs():
        return [in_features, out_features]
    """)


@pytest.fixture
def linear_problem(tmp_path):
    path = tmp_path / "tiny_linear.py"
    path.write_text(LINEAR)
    return path


def stats(ms: float) -> TimingStats:
    return TimingStats(median_ms=ms, iqr_ms=0.0, mean_ms=ms, min_ms=ms, max_ms=ms, n=1, method="cuda_events")


def test_floor_of_a_linear_layer(linear_problem):
    problem = load_problem(linear_problem)
    floor = kwfloor.compute_floor(problem, "cuda", peaks=FAKE)
    b, i, o = 16, 64, 32
    flops = 2 * b * i * o
    nbytes = 4 * (b * i + o * i + o + b * o)  # input, weight, bias, output, each once
    assert floor.flops == flops and floor.bytes == nbytes
    # fp32-accurate 3xBF16 (a third of the bf16 rate) beats 3xTF32 and the fp32 peak of the fake device
    rate = FAKE.tflops["bf16"] / 3
    assert rate > FAKE.tflops["tf32"] / 3 > FAKE.tflops["fp32"]
    compute_ms = flops / (rate * 1e12) * 1e3
    memory_ms = nbytes / (FAKE.copy_gbps * 1e9) * 1e3
    assert floor.floor_ms == pytest.approx(max(compute_ms, memory_ms))
    assert floor.bound == ("compute" if compute_ms > memory_ms else "memory")
    assert floor.peak_kind == "bf16x3" and floor.peak_source == "measured"


def test_fp32_floor_counts_a_split_only_where_it_beats_the_fp32_peak():
    slow_tensor_cores = Peaks("fake gpu", "0", copy_gbps=100.0, tflops={"fp32": 0.001, "tf32": 0.0024, "bf16": 0.0027})
    assert kwfloor.matmul_rate(slow_tensor_cores, "fp32") == (0.001, "fp32")  # 0.0008, 0.0009 < 0.001
    no_bf16 = Peaks("fake gpu", "0", copy_gbps=100.0, tflops={"fp32": 0.001, "tf32": 0.008})
    assert kwfloor.matmul_rate(no_bf16, "fp32") == (pytest.approx(0.008 / 3), "tf32x3")
    assert kwfloor.matmul_rate(FAKE, "fp32") == (pytest.approx(0.016 / 3), "bf16x3")
    assert kwfloor.matmul_rate(FAKE, "tf32") == (0.008, "tf32")  # TF32 allowed: the full rate
    assert kwfloor.matmul_rate(FAKE, "bf16") == (0.016, "bf16")


def test_h100_datasheet_fp32_floor_is_the_3xbf16_rate():
    """The cases the rule fixes: a correct 3xTF32 kernel read 112% of an fp32-SIMT floor, then a
    correct 3xBF16 GEMM (level2/63 on the H100) read 169% of the 3xTF32 floor."""
    h100 = datasheet_peaks("NVIDIA H100 80GB HBM3")
    rate, kind = kwfloor.matmul_rate(h100, "fp32")
    assert kind == "bf16x3" and rate == pytest.approx(h100.tflops["bf16"] / 3)
    assert rate > h100.tflops["tf32"] / 3 > h100.tflops["fp32"]


def test_tf32_allowed_uses_the_tf32_peak(linear_problem):
    problem = load_problem(linear_problem)
    strict = kwfloor.compute_floor(problem, "cuda", peaks=FAKE)
    relaxed = kwfloor.compute_floor(problem, "cuda", peaks=FAKE, allow_tf32=True)
    assert relaxed.peak_kind == "tf32" and relaxed.peak_tflops == FAKE.tflops["tf32"]
    assert relaxed.floor_ms < strict.floor_ms


MATMUL = textwrap.dedent("""\
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def forward(self, a, b):
            return a @ b

    M, K, N = 32, 64, 16
    dtype = torch.float32

    def get_inputs():
        return [torch.randn(M, K, dtype=dtype), torch.randn(K, N, dtype=dtype)]

    def get_init_inputs():
        return []
    """)


def test_bf16_problem_uses_the_bf16_peak_and_two_byte_elements(tmp_path):
    path = tmp_path / "tiny_matmul.py"
    path.write_text(MATMUL)
    problem = load_problem(path, {"dtype": torch.bfloat16})
    floor = kwfloor.compute_floor(problem, "cuda", peaks=FAKE, allow_tf32=True)
    m, k, n = 32, 64, 16
    assert floor.peak_kind == "bf16" and floor.peak_tflops == FAKE.tflops["bf16"]
    assert floor.flops == 2 * m * k * n and floor.bytes == 2 * (m * k + k * n + m * n)


def test_peak_kind_rule():
    assert kwfloor.peak_kind(torch.float32) == "fp32"
    assert kwfloor.peak_kind(torch.float32, allow_tf32=True) == "tf32"
    assert kwfloor.peak_kind(torch.float16, allow_tf32=True) == "fp16"
    assert kwfloor.peak_kind(torch.float64) == "fp64"


def test_memory_bound_problem_from_kernelbench(kernelbench):
    """ReLU at its real GPU size, measured on the meta device only: no FLOPs, bytes in + out."""
    problem = load_problem(kernelbench / "level1" / "19_ReLU.py")
    peaks = datasheet_peaks("NVIDIA H100 80GB HBM3")
    floor = kwfloor.compute_floor(problem, "cuda", peaks=peaks)
    elements = problem.module.batch_size * problem.module.dim
    assert floor.flops == 0 and floor.bytes == 2 * 4 * elements
    assert floor.bound == "memory"
    assert floor.floor_ms == pytest.approx(2 * 4 * elements / (peaks.copy_gbps * 1e9) * 1e3)
    assert floor.peak_source.startswith("datasheet")


def test_compute_bound_matmul_from_kernelbench(kernelbench):
    problem = load_problem(kernelbench / "level1" / "1_Square_matrix_multiplication_.py")
    peaks = datasheet_peaks("NVIDIA H100 80GB HBM3")
    floor = kwfloor.compute_floor(problem, "cuda", peaks=peaks)
    n = problem.module.N
    assert floor.flops == 2 * n**3 and floor.bound == "compute"
    assert floor.peak_tflops == peaks.tflops["bf16"] / 3  # an fp32 reference: the fp32-accurate 3xBF16 rate


def test_no_peaks_on_cpu_means_no_floor(linear_problem):
    assert kwfloor.compute_floor(load_problem(linear_problem), "cpu") is None


def test_apply_sets_percent_and_flags():
    floor = kwfloor.floor_from(2e6, 0.0, FP32_ONLY, "fp32")  # 2e6 FLOP at 1e9 FLOP/s: 2 ms
    assert floor.floor_ms == pytest.approx(2.0)
    slower, flags = kwfloor.apply(floor, stats(4.0))
    assert slower.pct_of_floor == pytest.approx(50.0) and flags == []
    assert floor.pct_of_floor is None  # the input is not modified
    _, flags = kwfloor.apply(floor, stats(1.5))
    assert [(f.code, f.severity) for f in flags] == [("faster_than_floor", WARN)]
    _, flags = kwfloor.apply(floor, stats(0.9))
    assert [(f.code, f.severity) for f in flags] == [("faster_than_floor", REJECT)]


def test_floor_needs_something_to_count():
    assert kwfloor.floor_from(0.0, 0.0, FP32_ONLY, "fp32") is None
    assert kwfloor.floor_from(1e9, 0.0, Peaks("x", "0", 0.0, {}), "fp32") is None
