"""What a reference is made of: PyTorch ops, Triton kernels or a CUDA extension; declared backward."""
from __future__ import annotations

import torch

from kernelwright.problem import load_problem
from kernelwright.problem.reference import (
    ReferenceInfo,
    TritonLaunchRecorder,
    describe_reference,
    reference_kind,
    scan_source,
)

TRITON_SOURCE = '''
import torch
import triton
import triton.language as tl
from triton import jit as tjit

@triton.jit
def add_kernel(x, y, n, BLOCK: tl.constexpr):
    pass

@tjit
def other_kernel(x):
    pass

@triton.autotune(configs=[], key=["n"])
@triton.jit
def tuned_kernel(x, n):
    pass

def helper():  # mentions triton.jit in a comment only
    return "triton.jit"
'''

CUDA_SOURCE = '''
import torch.utils.cpp_extension as cpp
source = """
__global__ void scale_kernel(const float* x, float* y, int n) { }
template <int N> __global__ void __launch_bounds__(256) tiled_kernel(float* y) { }
"""
ext = cpp.load_inline(name="my_ext", cpp_sources="", cuda_sources=source, functions=["f"])
'''

TORCH_SOURCE = '''
import torch
KW_BACKWARD = True
KW_GRAD_INPUTS = (0,)
class Model(torch.nn.Module):
    def forward(self, x, y):
        return torch.relu(x) * y
def get_inputs():
    return [torch.randn(4), torch.randn(4)]
def get_init_inputs():
    return []
'''


def test_kinds_and_kernels_are_read_from_the_syntax_tree():
    info = scan_source(TRITON_SOURCE)
    assert info.kind == "triton" and info.is_kernel
    assert info.triton_kernels == ["add_kernel", "other_kernel", "tuned_kernel"]
    assert info.baseline_label() == "reference kernel (Triton)"
    cuda = scan_source(CUDA_SOURCE)
    assert cuda.kind == "cuda" and cuda.extensions == ["my_ext"]
    assert cuda.cuda_kernels == ["scale_kernel", "tiled_kernel"]
    assert reference_kind(TORCH_SOURCE) == "torch" and not scan_source(TORCH_SOURCE).is_kernel
    assert reference_kind("def broken(:") == "torch"
    assert reference_kind("x = 'import triton; @triton.jit'") == "torch"  # a string is not a kernel


def test_backward_declarations(tmp_path):
    info = scan_source(TORCH_SOURCE)
    assert info.backward and not info.custom_grad_outputs
    path = tmp_path / "p.py"
    path.write_text(TORCH_SOURCE)
    described = describe_reference(load_problem(path))
    assert described.backward and described.grad_inputs == [0]
    custom = TORCH_SOURCE.replace("KW_BACKWARD = True", "def get_grad_outputs():\n    return [torch.ones(4)]")
    assert scan_source(custom).backward and scan_source(custom).custom_grad_outputs
    off = TORCH_SOURCE.replace("KW_BACKWARD = True", "KW_BACKWARD = False")
    assert not scan_source(off).backward
    assert ReferenceInfo.from_dict(described.to_dict()) == described


def test_triton_launches_are_counted_and_the_patch_is_undone(tmp_path):
    import triton
    import triton.language as tl

    @triton.jit
    def twice_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, 2 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

    x = torch.arange(10, dtype=torch.float32)
    y = torch.empty_like(x)
    run_before = type(twice_kernel).run
    with TritonLaunchRecorder() as launches:
        twice_kernel[(2,)](x, y, 10, BLOCK=8)
        twice_kernel[(2,)](x, y, 10, BLOCK=8)
    assert launches.counts == {"twice_kernel": 2}
    assert type(twice_kernel).run is run_before
    assert torch.equal(y, 2 * x)


def test_device_code_is_what_needs_a_gpu():
    assert scan_source(CUDA_SOURCE).device_code
    cpp_only = 'from torch.utils.cpp_extension import load_inline\next = load_inline(name="e", cpp_sources=src)\n'
    info = scan_source(cpp_only)
    assert info.kind == "cuda" and info.extensions == ["e"] and not info.device_code
    assert scan_source(cpp_only.replace("cpp_sources=src", "sources=['k.cu']")).device_code
