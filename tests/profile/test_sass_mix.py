"""SASS instruction mix, on real cuobjdump listings (fixtures/toolchain)."""
import gzip
from pathlib import Path

import pytest

from kernelwright.profile.resources import find_tool
from kernelwright.profile.sass import SassSummary, access_bits, disassemble, parse_sass

FIXTURES = Path(__file__).parent / "fixtures"
TOOLCHAIN = FIXTURES / "toolchain"


def listing(name: str) -> dict[str, SassSummary]:
    return {s.function: s for s in parse_sass(gzip.open(TOOLCHAIN / name, "rt").read())}


def test_load_widths_distinguish_scalar_and_vector_copies():
    sass = listing("cuobjdump_sass.txt.gz")
    assert sass["_Z11copy_scalarPKfPfi"].global_loads == {32: 1}
    assert sass["_Z9copy_vec4PK6float4PS_i"].global_loads == {128: 1}
    assert sass["_Z9copy_vec4PK6float4PS_i"].global_stores == {128: 1}
    assert sass["_Z9copy_vec4PK6float4PS_i"].dominant_load_bits == 128


def test_spills_shared_memory_and_tensor_cores_are_counted():
    sass = listing("cuobjdump_sass.txt.gz")
    assert sass["_Z5spillPKfPfi"].local_ops > 50
    assert sass["_Z11copy_scalarPKfPfi"].local_ops == 0
    tile = sass["_Z14transpose_tilePKfPf"]
    assert tile.shared_ops == 2 and tile.barriers == 1
    assert sass["_Z9wmma_tilePK6__halfS1_Pf"].tensor_ops == 2  # HMMA.16816


def test_triton_kernels_hopper_mma_and_predicated_loads():
    matmul = listing("triton_matmul_sass.txt.gz")["matmul_kernel"]
    assert matmul.tensor_ops == 2 and matmul.opcodes["HGMMA"] == 2
    assert matmul.global_loads == {16: 32}  # unaligned bf16 pointers: 2-byte loads
    add = listing("triton_add_sass.txt.gz")["add_kernel"]
    assert add.global_loads == {32: 16}  # `@!P0 LDG.E` predicated loads are counted
    assert add.fp32_ops == 8 and "NOP" not in add.opcodes


def test_summary_round_trips_through_a_dict():
    add = listing("triton_add_sass.txt.gz")["add_kernel"]
    back = SassSummary.from_dict(add.to_dict())
    assert back.global_loads == add.global_loads and back.fp32_ops == add.fp32_ops


@pytest.mark.parametrize("opcode, bits", [
    ("LDG.E", 32), ("LDG.E.128.CONSTANT", 128), ("LDG.E.64", 64), ("LDG.E.U16", 16), ("STG.E.U8", 8),
    ("LDG.E.ENL2.256", 256),
])
def test_access_bits(opcode, bits):
    assert access_bits(opcode) == bits


def test_disassemble_a_fresh_triton_cubin_matches_the_recorded_listing(compiled_triton):
    if find_tool("cuobjdump") is None and find_tool("nvdisasm") is None:
        summaries, _, note = disassemble(compiled_triton / "add_kernel.cubin")
        assert summaries == [] and "found" in note
        return
    summaries, text, note = disassemble(compiled_triton / "add_kernel.cubin")
    assert note == "" and "Function : add_kernel" in text
    recorded = listing("triton_add_sass.txt.gz")["add_kernel"]
    assert summaries[0].to_dict() == recorded.to_dict()


def test_disassemble_garbage_is_a_note(tmp_path):
    bogus = tmp_path / "bogus.cubin"
    bogus.write_bytes(b"not an ELF")
    summaries, text, note = disassemble(bogus)
    assert summaries == [] and text == "" and note
