"""The judge's per-kernel split: names, shares, and honesty on the CPU."""
from __future__ import annotations

import pytest

from kernelwright.judge import kernel_times
from kernelwright.profile.torchprof import TimelineEvent, summarize_timeline


def test_kernel_names_keep_the_operation_and_lose_the_rest_of_the_template_and_signature():
    fill = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
            "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)")
    assert kernel_times.short_kernel_name(fill) == "at::native::vectorized_elementwise_kernel<FillFunctor …>"
    mul = ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::"
           "BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> > >("
           "at::TensorIteratorBase&, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::"
           "MulFunctor<float> > const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast)")
    assert kernel_times.short_kernel_name(mul) == "at::native::elementwise_kernel<MulFunctor …>"
    silu = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::silu_kernel("
            "at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >"
            "(int, float, std::array<char*, 2ul>)")
    assert kernel_times.short_kernel_name(silu) == "at::native::vectorized_elementwise_kernel<silu_kernel …>"
    plain = "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4>(Params)"
    assert kernel_times.short_kernel_name("void k<4, float>(float*)") == "k<…>"
    assert kernel_times.short_kernel_name(plain) == ("cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4 …>")
    softmax = ("void at::native::(anonymous namespace)::softmax_warp_forward<float, float, float, 10, false, false>"
               "(float*, float const*, int, int, int, bool const*, int, bool)")
    assert kernel_times.short_kernel_name(softmax) == "at::native::softmax_warp_forward<…>"
    assert kernel_times.short_kernel_name("relu_kernel") == "relu_kernel"


def test_shares_per_call_from_a_recorded_timeline():
    # hand-written events: two forwards (the first is the profiler warm-up) of two kernels
    events = []
    for start in (0.0, 1000.0):
        events += [TimelineEvent("kw_forward", "range", start, start + 100),
                   TimelineEvent("gemm_kernel", "kernel", start + 5, start + 80),
                   TimelineEvent("bias_relu_kernel", "kernel", start + 82, start + 97)]
    record = kernel_times.from_summary(summarize_timeline(events, skip=1, top=10))
    assert record["available"] and record["kernels_per_call"] == 2.0
    assert [(k["name"], k["share"], k["us_per_call"]) for k in record["kernels"]] == [
        ("gemm_kernel", 0.8333, 75.0), ("bias_relu_kernel", 0.1667, 15.0)]


def test_on_the_cpu_there_are_no_kernel_times():
    record = kernel_times.read(kernel_times.record(lambda: None, "cpu"))
    assert record == {"available": False, "reason": record["reason"]} and "CPU" in record["reason"]


@pytest.mark.gpu
def test_a_real_forward_on_the_gpu():
    import torch

    x = torch.randn(1 << 20, device="cuda")
    record = kernel_times.read(kernel_times.record(lambda: torch.relu(x * 2.0), "cuda"))
    assert record["available"] and len(record["kernels"]) == 2 and abs(sum(k["share"] for k in record["kernels"]) - 1) < 1e-3
