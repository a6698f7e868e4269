"""kernel_kinds: the work kind of a kernel the candidate did not write, from its name."""
from __future__ import annotations

from kernelwright.judge.kernel_kinds import extension_kernels, function_name, is_own, kernel_kind

# names as the profiler (CUPTI, demangled) gives them, seen on the H100/H200 machines
COPY = ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda("
        "at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}> >"
        "(int, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)>)")
RELU = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar("
        "at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() "
        "const::{lambda()#7}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >(int, float)")
FILL = ("void at::native::unrolled_elementwise_kernel<at::native::FillFunctor<float>, std::array<char*, 1ul>, 4, "
        "TrivialOffsetCalculator<0, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, "
        "at::native::memory::LoadWithCast<0>, at::native::memory::StoreWithCast<1> >(int, at::native::FillFunctor<float>)")
SUM = ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
       "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
       "unsigned int, float, 4, 4> >(at::native::ReduceOp<float, float>)")


def test_torch_and_vendor_kernels_get_their_work_kind():
    assert kernel_kind(RELU) == "elementwise"
    assert kernel_kind(SUM) == "reduction"
    assert kernel_kind("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT") == "matmul"
    assert kernel_kind("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1") == "matmul"
    assert kernel_kind("sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x32") == "conv"
    assert kernel_kind("void cunn_SoftMaxForward<4, float, float, float, SoftMaxForwardEpilogue>(float*, float const*, int)") \
        == "softmax"
    assert kernel_kind("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float)") == "norm"
    assert kernel_kind("some_unknown_kernel") == "other"  # unknown counts as work, never as free


def test_copies_fills_and_memsets_are_free():
    assert kernel_kind(COPY) is None and kernel_kind(FILL) is None
    assert kernel_kind("Memset (Device)") is None and kernel_kind("Memcpy DtoD (Device -> Device)") is None
    assert kernel_kind("void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 2, 64, 64>(x)") is None


def test_the_candidates_own_kernels_are_known_by_name():
    source = "__global__ void scale_kernel(const float* x, float* y, int n) {}\n" \
             "template <typename T>\n__global__ void fused(T* a) {}\n"
    assert extension_kernels(source) == {"scale_kernel", "fused"}
    assert function_name("void ns::fused<float>(float*)") == "fused"
    assert is_own("void fused<float>(float*)", set(), {"fused"})
    assert is_own("softmax_kernel", {"softmax_kernel"}, set())
    assert not is_own(RELU, {"softmax_kernel"}, {"fused"})
