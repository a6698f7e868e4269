"""The wrapper rewrite on a wrapper written the way inductor writes one for a GPU: every construct
it uses becomes plain torch or a seed helper, and a name it does not know is an error naming it."""
from __future__ import annotations

import pytest

from kernelwright.seed.types import SeedError
from kernelwright.seed.wrapper import kernel_sources, rewrite_call

WRAPPER = '''
import torch
from torch._inductor.select_algorithm import extern_kernels
async_compile = AsyncCompile()
triton_poi_fused_relu_0 = async_compile.triton('triton_poi_fused_relu_0', \'\'\'
@triton.jit
def triton_poi_fused_relu_0(in_out_ptr0, xnumel, XBLOCK : tl.constexpr):
    pass
\'\'\', device_str='cuda')
async_compile.wait(globals())

class Runner:
    def call(self, args):
        arg0_1, arg1_1, arg2_1 = args
        args.clear()
        assert_size_stride(arg2_1, (64, 256), (256, 1), 'input')
        with torch.cuda._DeviceGuard(0):
            torch.cuda.set_device(0)
            buf0 = empty_strided_cuda((64, 128), (128, 1), torch.float32)
            extern_kernels.mm(arg2_1, reinterpret_tensor(arg0_1, (256, 128), (1, 256), 0), out=buf0)
            buf1 = buf0; del buf0  # reuse
            stream0 = get_raw_stream(0)
            triton_poi_fused_relu_0.run(buf1, arg1_1, 8192, stream=stream0)
        return (buf1, )
'''


def test_the_call_becomes_plain_torch_and_seed_helpers():
    kernels = kernel_sources(WRAPPER)
    assert list(kernels) == ["triton_poi_fused_relu_0"] and "def triton_poi_fused_relu_0" in kernels[
        "triton_poi_fused_relu_0"]
    code = rewrite_call(WRAPPER, set(kernels))
    text = code.text
    assert text.startswith("def seed_call(args):") and code.outputs == 1 and code.inputs == 3
    assert "buf0 = alloc((64, 128), (128, 1), torch.float32, seed_device)" in text
    assert "torch.mm(arg2_1, reinterpret_tensor(arg0_1" in text
    assert "launch_triton_poi_fused_relu_0(buf1, arg1_1, 8192)" in text
    for gone in ("_DeviceGuard", "set_device", "get_raw_stream", "stream0", "args.clear", "extern_kernels",
                 "empty_strided_cuda"):
        assert gone not in text, gone
    assert code.torch_calls == ["torch.mm"]


def test_a_name_the_rewrite_does_not_know_is_named():
    broken = WRAPPER.replace("buf1 = buf0; del buf0", "buf1 = alloc_from_pool(buf0, 0)")
    with pytest.raises(SeedError, match="alloc_from_pool"):
        rewrite_call(broken, {"triton_poi_fused_relu_0"})


def test_a_cpp_kernel_is_refused_with_its_name():
    cpp = WRAPPER.replace("async_compile.triton('triton_poi_fused_relu_0'", "async_compile.cpp_pybinding(['float*']")
    with pytest.raises(SeedError, match="triton_poi_fused_relu_0 as a 'cpp_pybinding' kernel"):
        kernel_sources(cpp)
