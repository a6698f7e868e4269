"""The code in the skills' `## Example` sections runs and is correct.

Triton examples run under TRITON_INTERPRET=1 on CPU (tests/conftest.py sets it) or natively on a
GPU, and are checked against PyTorch on small hand-picked shapes. CUDA examples are compiled
together with nvcc when it is installed (no GPU needed) and run on a GPU where one exists.
"""
from __future__ import annotations

import importlib.util
import math
import re
import shutil
import subprocess

import pytest
import torch

from kernelwright.memory.skills import BUILTIN_DIR

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
# On a GPU tl.dot without input_precision uses TF32; on the interpreter it is exact.
DOT_TOL = 2e-2 if DEVICE == "cuda" else 1e-3


def code_blocks(skill: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", (BUILTIN_DIR / f"{skill}.md").read_text(), re.S)


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    """Import a skill's Python example as a module (triton.jit needs a real source file)."""
    folder = tmp_path_factory.mktemp("skill_examples")

    def load(skill: str, index: int = 0, extra: str = ""):
        path = folder / f"{skill.replace('-', '_')}_{index}.py"
        header = "import torch, triton\nimport triton.language as tl\n"
        path.write_text(header + code_blocks(skill, "python")[index] + "\n" + extra)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load


def rand(*shape):
    return torch.randn(*shape, device=DEVICE)


def close(actual, expected, tol=1e-4):
    torch.testing.assert_close(actual, expected, atol=tol, rtol=tol)


def test_online_softmax_handles_long_and_masked_rows(example):
    m = example("online-softmax")
    x = rand(3, 50)
    x[1, 10:] = float("-inf")
    y = torch.empty_like(x)
    m.softmax_rows[(3,)](x, y, 50, 50, BLOCK=16)
    close(y, torch.softmax(x, 1))


def test_operator_fusion_gelu_chain(example):
    m = example("operator-fusion")
    x, b, r = rand(5, 37), rand(37), rand(5, 37)
    y = torch.empty_like(x)
    m.fused_affine_gelu_residual[(2, 3)](x, b, r, y, 5, 37, 0.5, BLOCK_R=4, BLOCK_C=16)
    close(y, torch.nn.functional.gelu(x * 0.5 + b) + r)


@pytest.mark.parametrize("skill", ["epilogue-fusion", "tf32-precision-policy", "persistent-kernel", "split-k",
                                   "tf32x3-split-gemm"])
def test_matmul_examples(example, skill):
    m = example(skill)
    a, b, bias = rand(20, 40), rand(40, 24), rand(24)
    strides = (40, 1, 24, 1, 24, 1)
    tiles = dict(BM=16, BN=16, BK=16)
    if skill == "epilogue-fusion":
        c = torch.empty(20, 24, device=DEVICE)
        m.matmul_bias_relu[(2, 2)](a, b, bias, c, 20, 24, 40, *strides, **tiles)
        close(c, torch.relu(a @ b + bias), 1e-3)
        return
    if skill == "tf32-precision-policy":
        c = torch.empty(20, 24, device=DEVICE)
        m.mm[(2, 2)](a, b, c, 20, 24, 40, *strides, PRECISION="tf32x3" if DEVICE == "cuda" else "ieee", **tiles)
    elif skill == "tf32x3-split-gemm":
        c = torch.empty(20, 24, device=DEVICE)
        m.mm_3xtf32[(2, 2)](a, b, c, 20, 24, 40, *strides, **tiles)
        close(c, a @ b, 1e-4)  # fp32 accuracy from TF32 products (exact dots in the interpreter)
        return
    elif skill == "persistent-kernel":
        c = torch.empty(20, 24, device=DEVICE)
        m.persistent_matmul[(3,)](a, b, c, 20, 24, 40, *strides, NUM_SMS=3, **tiles)
        close(c, a @ b, DOT_TOL)
        return
    else:
        c = torch.zeros(20, 24, device=DEVICE)
        m.matmul_splitk[(2, 2, 3)](a, b, c, 20, 24, 40, 16, *strides, **tiles)
    close(c, a @ b, 1e-3)


def test_two_pass_row_reduction(example):
    m = example("two-pass-vs-one-pass-reduction")
    x, groups = rand(3, 1000), 4
    partials, out = torch.empty(3, groups, device=DEVICE), torch.empty(3, device=DEVICE)
    m.row_partials[(3, groups)](x, partials, 1000, 256, groups, BLOCK=64)
    m.finish_rows[(3,)](partials, out, groups, BLOCK_G=4)
    close(out, x.sum(1), 1e-3)


def test_implicit_gemm_conv(example):
    m = example("im2col-implicit-gemm-conv")
    x, w = rand(2, 5, 9, 8), rand(18, 5, 3, 3)
    ref = torch.nn.functional.conv2d(x, w, stride=2, padding=1)
    oh, ow = ref.shape[2:]
    y = torch.empty_like(ref)
    m.conv2d_nchw_igemm[(triton.cdiv(2 * oh * ow, 16), 2)](
        x, w, y, 2, 5, 9, 8, 18, oh, ow, 2, 1, KH=3, KW=3, BM=16, BN=16, BC=16)
    close(y, ref, 1e-3)


def test_elementwise_chain(example):
    m = example("memory-bound-elementwise-fusion")
    x = rand(3000)
    y = torch.empty_like(x)
    m.swish_scale_clamp[(triton.cdiv(3000, 1024),)](x, y, 3000, 2.0, -0.5, 1.5, BLOCK=1024)
    close(y, torch.clamp(x * torch.sigmoid(x) * 2.0, -0.5, 1.5))


def test_judge_rules_model_new(example):
    m = example("judge-rules")
    torch.manual_seed(0)
    model = m.ModelNew(300, 40).to(DEVICE)
    x = rand(4, 300)
    before = x.clone()
    with torch.no_grad():
        close(model(x), torch.relu(model.linear(x)), 1e-3)
    assert torch.equal(x, before), "the example must not mutate its input"


def test_triangular_structure(example):
    m = example("exploit-problem-structure")
    a, b, c = rand(40, 40), rand(40, 40), torch.empty(40, 40, device=DEVICE)
    m.tril_matmul[(3, 3)](a, b, c, 40, BM=16, BK=16)
    close(c, torch.tril(a @ b), 1e-3)


def test_roofline_numbers(example):
    m = example("roofline-speed-of-light")
    assert m.speed_of_light_us(2 * 4096**3, 3 * 4096**2 * 4, 52e12, 3e12) == pytest.approx(
        2.0 * 4096**3 / 52e12 * 1e6 + 3.0)
    assert m.speed_of_light_us(0, 3e9, 52e12, 3e12) == pytest.approx(1000 + 3.0)


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_with_a_head_dim_that_is_not_a_power_of_two(example, causal):
    m = example("flash-attention")
    q, k, v = rand(3, 3, 50, 24).unbind(0)  # D = 24: padded to a 32-wide tile
    o = torch.empty_like(q)
    scale_log2e = 1.4426950408889634 / math.sqrt(24)
    m.attn_fwd[(triton.cdiv(50, 16), 3)](q, k, v, o, 50, scale_log2e, D=24, BLOCK_D=32, BLOCK_M=16, BLOCK_N=16,
                                         CAUSAL=causal, PREC="ieee")
    close(o, torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal), 1e-4)


@pytest.mark.parametrize("reverse", [False, True])
def test_scan(example, reverse):
    m = example("parallel-scan")
    x = rand(3, 100)
    y = torch.empty_like(x)
    m.cumsum_rows[(3,)](x, y, 100, REVERSE=reverse, BLOCK=32)
    expected = x.flip(1).cumsum(1).flip(1) if reverse else x.cumsum(1)
    close(y, expected)


def test_lstm_pointwise(example):
    m = example("rnn-fused-cell")
    batch, hidden = 3, 10
    gates, c0 = rand(batch, 4 * hidden), rand(batch, hidden)
    h1, c1 = torch.empty_like(c0), torch.empty_like(c0)
    m.lstm_cell_pointwise[(1,)](gates, c0, h1, c1, batch, hidden, BLOCK=32)
    i, f, g, o = gates.chunk(4, 1)
    c_ref = torch.sigmoid(f) * c0 + torch.sigmoid(i) * torch.tanh(g)
    close(c1, c_ref, 1e-5)
    close(h1, torch.sigmoid(o) * torch.tanh(c_ref), 1e-5)


def test_gemv(example):
    m = example("skinny-matmul-gemv")
    a, x, y = rand(10, 300), rand(300), torch.empty(10, device=DEVICE)
    m.gemv_rows[(3,)](a, x, y, 10, 300, 300, BLOCK_K=64, ROWS=4)
    close(y, a @ x)


def test_int64_offsets(example):
    m = example("int64-indexing")
    x, y, out = rand(100), rand(100), torch.empty(100, device=DEVICE)
    m.add_kernel[(4,)](x, y, out, 100, BLOCK=32)
    close(out, x + y)


RECORD_TILES = """
@triton.jit
def record(out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    pid_m, pid_n = grouped_tile(pid, M, N, BM, BN, GROUP_M)
    tl.store(out_ptr + pid * 2, pid_m)
    tl.store(out_ptr + pid * 2 + 1, pid_n)
"""


def test_grouped_tile_order_is_a_bijection(example):
    record = example("swizzled-program-order-l2", extra=RECORD_TILES).record
    tiles = triton.cdiv(100, 16) * triton.cdiv(70, 16)
    out = torch.empty(tiles * 2, dtype=torch.int32, device=DEVICE)
    record[(tiles,)](out, 100, 70, BM=16, BN=16, GROUP_M=3)
    assert {tuple(p) for p in out.view(-1, 2).tolist()} == {(i, j) for i in range(7) for j in range(5)}


# CUDA examples are fragments: these helpers and wrappers make them one translation unit.
CUDA_PRELUDE = r"""
#include <cstdint>
#include <cmath>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <mma.h>
#include <cuda_pipeline.h>
namespace helpers {
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
  return v;
}
__device__ float block_sum(float v) {
  __shared__ float p[32];
  int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  v = warp_sum(v);
  if (lane == 0) p[w] = v;
  __syncthreads();
  v = threadIdx.x < (blockDim.x >> 5) ? p[lane] : 0.f;
  if (w == 0) v = warp_sum(v);
  if (threadIdx.x == 0) p[0] = v;
  __syncthreads();
  float t = p[0];
  __syncthreads();
  return t;
}
__device__ void consume(float4* tile, float* out, int t) { out[t * blockDim.x + threadIdx.x] = tile[threadIdx.x].x; }
}
"""
CUDA_WRAP = {
    "smem-tiling": ("", "template __global__ void sgemm_tiled<32>(const float*, const float*, float*, int, int, int);"),
    "output-stationary-tiling": (
        "__global__ void k(float* out) { __shared__ float As[8][128], Bs[8][128];"
        " int tx = threadIdx.x % 16, ty = threadIdx.x / 16;",
        "out[threadIdx.x] = acc[0][0] + acc[7][7]; }"),
    "int64-indexing": ("__global__ void k(const float* x, float* y, int r, int cols) {", "y[i] = row[0]; }"),
}


def cuda_translation_unit() -> str:
    parts = [CUDA_PRELUDE]
    for path in sorted(BUILTIN_DIR.glob("*.md")):
        for index, block in enumerate(code_blocks(path.stem, "cuda")):
            block = re.sub(r"^#include.*$", "", block, flags=re.M)
            block = block.replace("using namespace nvcuda;", "using namespace ::nvcuda;")
            before, after = CUDA_WRAP.get(path.stem, ("", ""))
            space = re.sub(r"\W", "_", path.stem) + f"_{index}"
            parts.append(f"namespace {space} {{ using namespace helpers;\n{before}\n{block}\n{after}\n}}\n")
    return "\n".join(parts)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_cuda_examples_compile_for_sm90(tmp_path):
    source = tmp_path / "skills.cu"
    source.write_text(cuda_translation_unit())
    assert source.read_text().count("namespace ") >= 15
    result = subprocess.run(["nvcc", "-arch=sm_90", "-std=c++17", "-c", str(source), "-o", str(tmp_path / "skills.o")],
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-4000:]


@pytest.mark.gpu
def test_load_inline_example_builds_and_runs(example):
    m = example("load-inline-hygiene")
    x = torch.randn(1000, device="cuda")
    close(m._ext.relu_forward(x), torch.relu(x))


@pytest.mark.gpu
def test_tensor_descriptor_example_on_hopper(example):
    if torch.cuda.get_device_capability() < (9, 0) or not hasattr(tl, "make_tensor_descriptor"):
        pytest.skip("needs sm_90 and a Triton with tensor descriptors")
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    m = example("triton-block-pointers")
    a, b = torch.randn(128, 96, device="cuda", dtype=torch.float16), torch.randn(96, 64, device="cuda", dtype=torch.float16)
    c = torch.empty(128, 64, device="cuda", dtype=torch.float16)
    m.mm_desc[(2, 1)](a, b, c, 128, 64, 96, BM=64, BN=64, BK=32)
    close(c.float(), (a.float() @ b.float()), 5e-2)


def test_nan_propagates_like_torch(example):
    """The examples promise torch's NaN semantics for relu and clamp."""
    x = torch.tensor([float("nan"), -1.0, 2.0, float("nan")], device=DEVICE)
    relu = x.clone()  # the epilogue of the judge-rules example: bias (zero here) + ReLU, in place
    example("judge-rules")._bias_relu_inplace[(1,)](relu, torch.zeros(4, device=DEVICE), 4, 4, BLOCK=1024)
    assert torch.isnan(relu[0]) and torch.isnan(relu[3]) and relu[1] == 0 and relu[2] == 2
    m = example("memory-bound-elementwise-fusion")
    y = torch.empty_like(x)
    m.swish_scale_clamp[(1,)](x, y, 4, 2.0, -0.5, 1.5, BLOCK=1024)
    assert torch.isnan(y[0]) and torch.isnan(y[3])


# ----------------------------------------------------------------------------- Triton examples beside CUDA ones
# Triton prompts show a skill's Triton example only (issue 31: no CUDA-only examples in Triton prompts);
# these skills teach with a CUDA example too, so their Triton example is checked here.


def matmul_operands(dtype=torch.float32):
    a, b = rand(20, 40).to(dtype), rand(40, 24).to(dtype)
    return a, b, (40, 1, 24, 1, 24, 1)


def test_pipelined_matmul(example):
    m = example("async-copy-pipelining")
    a, b, strides = matmul_operands(torch.float16)
    c = torch.empty(20, 24, device=DEVICE)
    m.mm_pipelined[(2, 2)](a, b, c, 20, 24, 40, *strides, BM=16, BN=16, BK=16, STAGES=3)
    close(c, a.float() @ b.float(), 1e-2)


def test_column_sums_with_atomics(example):
    m = example("atomic-reduction")
    x = rand(37, 50)
    out = torch.zeros(50, device=DEVICE)
    m.col_sum[(triton.cdiv(50, 16), triton.cdiv(37, 8))](x, out, 37, 50, ROWS_PER_PROG=8, BLOCK_C=16)
    close(out, x.sum(0), 1e-4)


def test_lengths_stay_on_the_device(example):
    m = example("avoid-host-sync")
    x, lengths = rand(4, 10), torch.tensor([0, 3, 10, 7], device=DEVICE)
    out = torch.empty_like(x)
    m.keep_prefix[(4,)](x, lengths, out, 10, BLOCK=16)
    keep = torch.arange(10, device=DEVICE)[None, :] < lengths[:, None]
    close(out, torch.where(keep, x, torch.zeros_like(x)))


def test_reduction_over_a_strided_axis_reads_along_the_contiguous_one(example):
    m = example("coalescing")
    x = rand(3, 7, 45)
    out = torch.empty(3, 45, device=DEVICE)
    m.sum_over_c[(3, triton.cdiv(45, 16))](x, out, 7, 45, BLOCK_N=16)
    close(out, x.sum(1))


@pytest.mark.parametrize("stride, pad", [(1, 0), (2, 1), (3, 2)])
def test_conv_transpose_gather(example, stride, pad):
    m = example("conv-transpose-as-gather")
    x, w = rand(2, 3, 5, 6), rand(3, 4, 3, 3)
    ref = torch.nn.functional.conv_transpose2d(x, w, stride=stride, padding=pad)
    y = torch.empty_like(ref)
    oh, ow = ref.shape[2:]
    m.conv_t2d_gather[(triton.cdiv(y.numel(), 64),)](x, w, y, 2, 3, 5, 6, 4, oh, ow, stride, pad, K=3, BLOCK=64)
    close(y, ref, 1e-4)


def test_fast_math_matches_torch_forms(example):
    m = example("fast-math-intrinsics")
    x = torch.linspace(-30, 30, 301, device=DEVICE)
    y = torch.empty_like(x)
    m.silu_plus_gelu[(triton.cdiv(301, 128),)](x, y, 301, BLOCK=128)
    close(y, torch.nn.functional.silu(x) + torch.nn.functional.gelu(x), 1e-5)


def test_16bit_row_sum_accumulates_in_fp32(example):
    m = example("fp16-bf16-accumulation")
    x = (torch.rand(3, 4000, device=DEVICE) * 0.01 + 1.0).to(torch.float16)
    out = torch.empty(3, device=DEVICE, dtype=torch.float16)
    m.row_sum_16bit[(3,)](x, out, 4000, BLOCK=256)
    close(out.float(), x.float().sum(1).half().float(), 1e-3)  # an fp16 accumulator would drift by far more


def test_unrolled_dot(example):
    m = example("loop-unrolling-ilp")
    a, b = rand(1000), rand(1000)
    out = torch.zeros(1, device=DEVICE)
    m.dot_partials[(triton.cdiv(1000, 4 * 64),)](a, b, out, 1000, BLOCK=64, UNROLL=4)
    close(out[0], a @ b, 1e-3)


@pytest.mark.parametrize("stride, pad", [(2, 0), (1, 1), (2, 1)])
def test_max_pool_semantics(example, stride, pad):
    m = example("pooling-windows")
    x = rand(2, 3, 9, 11)
    x[0, 1, 4, 5] = float("nan")
    ref = torch.nn.functional.max_pool2d(x, 3, stride=stride, padding=pad)
    y = torch.empty_like(ref)
    oh, ow = ref.shape[2:]
    m.maxpool2d[(6 * oh, triton.cdiv(ow, 8))](x, y, 9, 11, oh, ow, stride, pad, K=3, BLOCK_W=8)
    assert torch.equal(torch.isnan(y), torch.isnan(ref))
    close(torch.nan_to_num(y), torch.nan_to_num(ref))


def test_16bit_tensor_core_matmul(example):
    m = example("tensor-cores")
    a, b, strides = matmul_operands(torch.float16)
    c = torch.empty(20, 24, device=DEVICE, dtype=torch.float16)
    m.mm_16bit[(2, 2)](a, b, c, 20, 24, 40, *strides, BM=16, BN=16, BK=16)
    close(c.float(), a.float() @ b.float(), 1e-2)


def test_vectorized_axpy(example):
    m = example("vectorized-access")
    x, y = rand(3000), rand(3000)
    out = torch.empty_like(x)
    m.axpy[(triton.cdiv(3000, 1024),)](x, y, out, 0.5, 3000, BLOCK=1024)
    close(out, 0.5 * x + y)


def test_layer_norm_rows(example):
    m = example("welford-norm")
    x, w, b = rand(5, 70) * 3 + 1, rand(70), rand(70)
    y = torch.empty_like(x)
    m.layer_norm_rows[(5,)](x, w, b, y, 70, 1e-5, BLOCK=128)
    close(y, torch.nn.functional.layer_norm(x, (70,), w, b, 1e-5), 1e-4)


def test_gemm_with_batch_statistics_then_one_normalising_pass(example):
    m = example("gemm-norm-fusion")
    x, linear, bn = rand(37, 40), torch.nn.Linear(40, 24).to(DEVICE), torch.nn.BatchNorm1d(24).to(DEVICE)
    with torch.no_grad():
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.5, 0.5)
        expected = torch.relu(bn(linear(x)))  # training mode: the batch's own statistics
    y, out = torch.empty(37, 24, device=DEVICE), torch.empty(37, 24, device=DEVICE)
    sums, squares = torch.zeros(24, device=DEVICE), torch.zeros(24, device=DEVICE)
    m.linear_colstats[(3, 2)](x, linear.weight, linear.bias, y, sums, squares, 37, 24, 40, BM=16, BN=16, BK=16)
    m.batchnorm_train_relu[(triton.cdiv(37 * 24, 128),)](y, sums, squares, bn.weight, bn.bias, out, 37, 24,
                                                          bn.eps, BLOCK=128)
    close(out, expected, 1e-3 if DEVICE == "cuda" else 1e-4)


def test_split_products_accumulate_tile_by_tile_in_both_splits(example):
    """The split GEMM adds each tile's three products to the running sum with a plain add (issue 31:
    feeding every product into one running accumulator failed over K = 8192 on the H100)."""
    source = code_blocks("tf32x3-split-gemm", "python")[0]
    assert "acc = tl.dot" not in source and "acc += _tile3(" in source
    m = example("tf32x3-split-gemm")
    a, b = rand(20, 300), rand(300, 24)
    # the interpreter's bf16 casts and dots are not bf16's: the 3xBF16 path runs on a GPU only
    for bf16, bound in ((False, 1e-6),) + (((True, 1e-4),) if DEVICE == "cuda" else ()):
        c = torch.empty(20, 24, device=DEVICE)
        m.mm_3xtf32[(2, 2)](a, b, c, 20, 24, 300, 300, 1, 24, 1, 24, 1, BM=16, BN=16, BK=16, BF16=bf16)
        expected = (a.double() @ b.double()).float()
        assert ((c - expected).norm() / expected.norm()).item() < bound, bf16
