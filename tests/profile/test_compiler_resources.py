"""Compiler resource parsers on real ptxas / cuobjdump output (fixtures/toolchain, made on CPU)."""
import json
from pathlib import Path

from kernelwright.profile.resources import (
    binary_resources, find_tool, from_triton_metadata, parse_ptxas_verbose, parse_res_usage,
)

TOOLCHAIN = Path(__file__).parent / "fixtures" / "toolchain"


def by_name(reports):
    return {r.function: r for r in reports}


def test_ptxas_verbose_reports_registers_smem_barriers_and_spills():
    reports = by_name(parse_ptxas_verbose((TOOLCHAIN / "ptxas_v.txt").read_text()))
    assert set(reports) == {"_Z9wmma_tilePK6__halfS1_Pf", "_Z14transpose_tilePKfPf", "_Z5spillPKfPfi",
                            "_Z9copy_vec4PK6float4PS_i", "_Z11copy_scalarPKfPfi"}
    tile = reports["_Z14transpose_tilePKfPf"]
    assert (tile.registers, tile.shared_bytes, tile.barriers) == (12, 4224, 1)  # 32 x 33 floats + ...
    spill = reports["_Z5spillPKfPfi"]
    assert spill.registers == 32 and spill.spills
    assert (spill.stack_bytes, spill.spill_store_bytes, spill.spill_load_bytes) == (272, 180, 184)
    assert not reports["_Z11copy_scalarPKfPfi"].spills


def test_ptxas_from_tritons_bundled_assembler_is_parsed_too():
    (report,) = parse_ptxas_verbose((TOOLCHAIN / "triton_matmul_ptxas_v.txt").read_text())
    assert report.function == "matmul_kernel" and report.registers == 96 and report.barriers == 1


def test_res_usage_of_a_cubin():
    reports = by_name(parse_res_usage((TOOLCHAIN / "cuobjdump_res_usage.txt").read_text()))
    assert reports["_Z5spillPKfPfi"].stack_bytes == 272
    assert reports["_Z14transpose_tilePKfPf"].shared_bytes == 5248  # includes the 1 KB the driver reserves
    assert reports["_Z9wmma_tilePK6__halfS1_Pf"].registers == 22


def test_triton_metadata_becomes_a_report():
    meta = json.loads((TOOLCHAIN / "triton_metadata.json").read_text())["matmul_kernel"]
    report = from_triton_metadata("matmul_kernel", {**meta, "n_regs": 96, "n_spills": 3})
    assert report.shared_bytes == 8192 and report.num_warps == 4 and report.num_stages == 3
    assert report.spill_store_bytes == 12 and report.local_bytes == 12 and report.spills
    assert not from_triton_metadata("k", {"n_regs": 40, "n_spills": 0}).spills


def test_triton_kernel_metadata_reads_a_real_compiled_kernel(compiled_triton):
    meta = json.loads((compiled_triton / "kw_metadata.json").read_text())
    assert meta["add_kernel"] == {"name": "add_kernel", "shared": 0, "num_warps": 4, "num_stages": 3}
    assert meta["matmul_kernel"]["shared"] == 8192  # n_regs/n_spills appear only once loaded on a GPU
    report = from_triton_metadata("matmul_kernel", meta["matmul_kernel"])
    assert report.registers is None and report.shared_bytes == 8192


def test_binary_resources_on_a_missing_file_is_a_note_not_a_crash(tmp_path):
    if find_tool("cuobjdump") is None:
        assert binary_resources(tmp_path / "missing.so") == ([], "cuobjdump not found")
        return
    reports, note = binary_resources(tmp_path / "missing.so")
    assert reports == [] and note
