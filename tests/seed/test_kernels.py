"""Inductor's kernel modules as plain @triton.jit source: decorators and imports gone, the helpers they
call copied with what those call, one launcher with the fixed grid and configuration; what the seed
cannot provide is an error naming it."""
from __future__ import annotations

import pytest

from kernelwright.seed.kernels import (helpers_source, interpreted_libdevice_source, kernel_code, launcher_source,
                                       libdevice_names)
from kernelwright.seed.types import Kernel, LaunchConfig, SeedError

SOURCE = '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
triton_helpers.set_driver_to_gpu()

@triton_heuristics.persistent_reduction(size_hints={'x': 64, 'r0_': 128}, filename=__file__)
@triton.jit
def triton_per_fused_0(in_ptr0, out_ptr0, xnumel, r0_numel, XBLOCK : tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    tmp0 = tl.load(in_ptr0 + xindex)
    tmp1 = triton_helpers.max2(libdevice.erf(tmp0), 1)[:, None]
    tl.store(out_ptr0 + xindex, tl_math.exp(tmp1))
'''


def kernel(source: str = SOURCE, grid_args: tuple[str, ...] = ()) -> Kernel:
    return Kernel("triton_per_fused_0", source, LaunchConfig({"XBLOCK": 8}, 2, 1, tuned=False), (),
                  ("-((xnumel) // -(8))", "1", "1"), "persistent_reduction", grid_args)


def test_the_kernel_loses_its_decorator_and_calls_renamed_helpers():
    code = kernel_code(kernel())
    assert code.text.startswith("@triton.jit\ndef triton_per_fused_0(")
    assert "triton_heuristics" not in code.text and "triton_helpers_max2(" in code.text
    assert code.helpers == {"max2"} and code.params == ("in_ptr0", "out_ptr0", "xnumel", "r0_numel")


def test_helpers_come_with_what_they_call():
    text = helpers_source({"max2"})
    for name in ("triton_helpers_max2", "triton_helpers_maximum", "triton_helpers_is_floating",
                 "triton_helpers_promote_to_tensor"):
        assert f"def {name}(" in text, name
    assert "triton_helpers." not in text


def test_the_launcher_fixes_grid_and_configuration():
    text = launcher_source(kernel(grid_args=("_grid_0",)), kernel_code(kernel()))
    assert text.startswith("def launch_triton_per_fused_0(in_ptr0, out_ptr0, xnumel, r0_numel, _grid_0):")
    assert "triton_per_fused_0[(-((xnumel) // -(8)), 1, 1)](in_ptr0, out_ptr0, xnumel, r0_numel, XBLOCK=8, " \
           "num_warps=2, num_stages=1)" in text


def test_libdevice_has_interpreter_stand_ins_or_a_clear_error():
    assert libdevice_names(SOURCE) == {"erf"}
    assert "libdevice = types.SimpleNamespace(erf=interpreted_libdevice_erf)" in interpreted_libdevice_source({"erf"})
    with pytest.raises(SeedError, match="libdevice.pow.*write the seed on a GPU"):
        interpreted_libdevice_source({"pow"})


def test_a_name_the_seed_cannot_provide_is_named():
    with pytest.raises(SeedError, match="uses some_global"):
        kernel_code(kernel(SOURCE.replace("tl_math.exp(tmp1)", "tmp1 * some_global")))
