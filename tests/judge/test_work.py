"""Whose code did the work (judge/work.py): the rule sets' checks on recorded ops, launches and the
candidate's built libraries. Op counts here are hand-written, as the dispatcher names them."""
from __future__ import annotations

import shutil
import subprocess
from collections import Counter

import pytest

from kernelwright.judge import work
from kernelwright.problem.ops import work_counts, work_kind
from kernelwright.rules import get

TRITON = {"triton": {"epilogue": 1}, "extension": {}, "custom_ops": {}}
NOTHING = {"triton": {}, "extension": {}, "custom_ops": {}}
LINEAR_RELU = {"t": 1, "addmm": 1, "relu": 1}


def judge(rules: str, ref, python=None, extension=None, launches=TRITON, libraries=(), source=""):
    buckets = {"python": Counter(python or {}), "extension": Counter(extension or {})}
    return work.evaluate(get(rules), Counter(ref), buckets, launches, list(libraries), source)


def codes(flags) -> set[str]:
    return {f.check for f in flags}


def test_work_kinds_count_compute_and_leave_glue_free():
    assert work_kind("addmm") == work_kind("mm") == "matmul" and work_kind("relu_") == "elementwise"
    for free in ("empty", "empty_like", "t", "view", "contiguous", "clone", "copy_", "_to_copy", "zero_", "fill_",
                 "cat", "constant_pad_nd", "as_strided", "lift_fresh"):
        assert work_kind(free) is None, free
    assert work_kind("flip") == "flip" and work_kind("kw::mine") == "kw::mine"  # unknown: its own kind
    # the profiler's ranges (the runner opens them around forward and each extension call) mark time
    assert work_kind("profiler::_record_function_enter_new") is None
    assert work_kind("profiler::_record_function_exit") is None
    assert work_counts({"t": 1, "addmm": 1, "mm": 2, "relu": 1, "empty": 3}) == {"matmul": 3, "elementwise": 1}


def test_kernelbench_accepts_cublas_gemm_with_an_own_fused_epilogue():
    record, flags = judge("kernelbench", LINEAR_RELU, python={"t": 1, "mm": 1, "empty_like": 1})
    assert flags == [] and record.replaced == {"elementwise": 1}


def test_splitting_addmm_into_mm_and_an_own_bias_kernel_replaces_nothing():
    _, flags = judge("kernelbench", {"t": 1, "addmm": 1}, python={"t": 1, "mm": 1})
    assert codes(flags) == {"torch_work"} and "still runs all" in flags[0].message and "mm" in flags[0].message


def test_all_torch_plus_an_identity_kernel_is_rejected_by_every_rule_set():
    for rules, expected in (("kernelbench", {"torch_work"}), ("library", {"torch_work", "python_torch_ops"}),
                            ("strict", {"python_torch_ops"})):
        _, flags = judge(rules, LINEAR_RELU, python={"t": 1, "addmm": 1, "relu": 1, "empty_like": 1})
        assert codes(flags) == expected, rules


def test_softmax_rebuilt_from_torch_reductions_is_still_torch_work():
    _, flags = judge("kernelbench", {"_softmax": 1}, python={"amax": 1, "sub": 1, "exp": 1, "sum": 1, "div": 1})
    assert codes(flags) == {"torch_work"} and "more than the reference" in flags[0].message


def test_an_unknown_torch_op_cannot_stand_in_for_the_replaced_one():
    _, flags = judge("kernelbench", LINEAR_RELU, python={"mm": 1, "heaviside": 1})
    assert codes(flags) == {"torch_work"}


def test_aten_calls_from_the_extension_count_as_torch_work():
    _, flags = judge("kernelbench", {"addmm": 1}, extension={"mm": 1}, launches={**NOTHING, "extension": {"e.f": 1}})
    assert codes(flags) == {"torch_work"}
    _, flags = judge("library", LINEAR_RELU, extension={"mm": 1, "empty": 1},
                     launches={**NOTHING, "extension": {"e.f": 1}})
    assert flags == []  # a library-side matmul and an own epilogue kernel
    _, flags = judge("strict", LINEAR_RELU, extension={"mm": 1}, launches={**NOTHING, "extension": {"e.f": 1}})
    assert codes(flags) == {"extension_torch_ops"} and "matmul 1" in flags[0].message


def test_no_own_launch_is_rejected_whatever_else_happened():
    for rules in ("kernelbench", "library", "strict"):
        _, flags = judge(rules, LINEAR_RELU, launches=NOTHING)
        assert "own_kernel_launch" in codes(flags), rules


def test_a_reference_without_counted_work_leaves_none_to_torch():
    assert judge("kernelbench", {"t": 1, "clone": 1})[1] == []
    assert codes(judge("kernelbench", {"t": 1, "clone": 1}, python={"add": 1})[1]) == {"torch_work"}


def test_symbols_name_the_aten_op_a_cpp_call_reaches():
    assert work.aten_op_of_symbol("_ZN2at4_ops6matmul4callERKNS_6TensorES4_") == "matmul"
    assert work.aten_op_of_symbol("_ZN2at4_ops10add_Tensor4callERKNS_6TensorES4_RKN3c106ScalarE") == "add"
    assert work.aten_op_of_symbol("_ZN2at4_ops11add__Tensor4callERNS_6TensorERKS2_RKN3c106ScalarE") == "add_"
    assert work.aten_op_of_symbol("_ZN2at4_ops19empty_memory_format4callEv") == "empty"
    assert work.aten_op_of_symbol("_ZN2at4_ops12some_unknown4callEv") is None
    assert work.aten_op_of_symbol("cublasSgemm_v2") is None


def test_vendor_headers_in_the_sources_are_found():
    source = '#include <cutlass/gemm/device/gemm.h>\n#include "cublas_v2.h"\n#include <cuda_runtime.h>\n'
    found = work.scan_source(source)
    assert any("cutlass" in f for f in found) and any("cublas" in f for f in found) and len(found) == 2


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build a test library")
def test_strict_finds_cublas_and_aten_compute_in_a_built_library(tmp_path):
    # a hand-written stand-in for a built extension: it calls cuBLAS and at::_ops::matmul::call
    (tmp_path / "ext.c").write_text(
        "extern int cublasSgemm_v2(void);\n"
        "extern int _ZN2at4_ops6matmul4callERKNS_6TensorES4_(void);\n"
        "extern int _ZN2at4_ops19empty_memory_format4callEv(void);\n"
        "int f(void) { return cublasSgemm_v2() + _ZN2at4_ops6matmul4callERKNS_6TensorES4_()"
        " + _ZN2at4_ops19empty_memory_format4callEv(); }\n")
    library = tmp_path / "ext.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(library), str(tmp_path / "ext.c")], check=True)
    launches = {**NOTHING, "extension": {"ext.f": 1}}
    record, flags = judge("strict", LINEAR_RELU, launches=launches, libraries=[library])
    assert codes(flags) == {"extension_torch_ops", "extension_libraries"}
    assert any("cublasSgemm_v2" in v for v in record.vendor) and "at::matmul" in " ".join(f.message for f in flags)
    assert judge("library", LINEAR_RELU, launches=launches, libraries=[library])[1] == []
    not_elf = tmp_path / "fake.so"
    not_elf.write_text("not a library")
    record, flags = judge("strict", LINEAR_RELU, launches=launches, libraries=[not_elf])
    assert flags == [] and "not inspected" in record.libraries[0]
