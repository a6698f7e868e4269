"""ncu raw-page CSV parsing, on the hand-written samples in fixtures/handwritten (see its README)."""
from pathlib import Path

import pytest

from kernelwright.profile.parse import (
    NcuParseError, aggregate_by_name, function_base, parse_number, parse_raw_csv, to_base,
)

HANDWRITTEN = Path(__file__).parent / "fixtures" / "handwritten"


@pytest.fixture(scope="module")
def stage1():
    return parse_raw_csv((HANDWRITTEN / "stage1_raw.csv").read_text())


def test_every_launch_is_parsed_in_order_around_program_output(stage1):
    assert [p.launch_id for p in stage1] == [0, 1, 2, 3]
    assert [p.name for p in stage1] == [
        "add_kernel", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64", "serial_kernel", "add_kernel",
    ]


def test_units_row_converts_to_base_units(stage1):
    add, gemm = stage1[0], stage1[1]
    assert add.duration_ns == pytest.approx(410_500.0)  # "410.50" usecond
    assert gemm.duration_ns == pytest.approx(1_523_200.0)  # "1,523.20" usecond with a separator
    assert gemm.smem == 213_000  # "213.00" Kbyte/block dynamic + 0 static
    assert gemm.regs == 168


def test_launch_geometry_and_short_keys(stage1):
    add = stage1[0]
    assert add.grid == (65536, 1, 1) and add.block == (128, 1, 1)
    assert add.blocks == 65536 and add.threads_per_block == 128
    assert add.get("grid_size") == 65536.0  # "65,536"
    assert add.get("dram_pct") == pytest.approx(91.32)
    assert add.cc == "9.0"


def test_na_cells_are_absent_not_zero(stage1):
    serial = stage1[2]
    assert "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active" not in serial.metrics
    assert serial.get("tensor_pct") is None


def test_aggregate_merges_launches_of_one_kernel_hottest_first(stage1):
    merged = aggregate_by_name(stage1)
    assert [k.name for k in merged][0] == "serial_kernel"  # 2048 us beats 2 x 413 us and 1523 us
    add = next(k for k in merged if k.name == "add_kernel")
    assert add.launches == 2
    assert add.duration_ns == pytest.approx((410_500 + 415_500) / 2)
    assert add.total_ns == pytest.approx(826_000)
    weights = (410_500, 415_500)
    expected = (91.32 * weights[0] + 90.10 * weights[1]) / sum(weights)
    assert add.get("dram_pct") == pytest.approx(expected)


def test_missing_header_is_a_clear_error_quoting_the_output():
    text = (HANDWRITTEN / "ncu_permission_error.txt").read_text()
    with pytest.raises(NcuParseError, match="ERR_NVGPUCTRPERM"):
        parse_raw_csv(text)
    with pytest.raises(NcuParseError, match="empty output"):
        parse_raw_csv("")


def test_header_without_launches_gives_no_profiles():
    header = (HANDWRITTEN / "stage1_raw.csv").read_text().splitlines()[2:4]
    assert parse_raw_csv("\n".join(header)) == []


@pytest.mark.parametrize("text, expected", [
    ("1,234.5", 1234.5), ("0", 0.0), ("1.5e+06", 1.5e6), ("n/a", None), ("", None), ("CachePreferNone", None),
])
def test_parse_number(text, expected):
    assert parse_number(text) == expected


@pytest.mark.parametrize("value, unit, expected", [
    (2.0, "usecond", (2000.0, "nsecond")), (3.0, "msecond", (3e6, "nsecond")), (1.0, "second", (1e9, "nsecond")),
    (5.0, "nsecond", (5.0, "nsecond")), (260384.0, "ns", (260384.0, "nsecond")), (2.0, "us", (2000.0, "nsecond")),
    (3.0, "ms", (3e6, "nsecond")), (4.0, "sector", (4.0, "sector")), (132.0, "SM", (132.0, "SM")),
    (2.0, "Mbyte", (2e6, "byte")), (1.0, "Kibyte", (1024.0, "byte")),
    (1.5, "Gbyte/second", (1.5e9, "byte/second")), (1.98, "Ghz", (1.98e9, "hz")), (42.0, "%", (42.0, "%")),
    (16.0, "register/thread", (16.0, "register/thread")), (7.0, "inst", (7.0, "inst")),
])
def test_to_base(value, unit, expected):
    got = to_base(value, unit)
    assert got[1] == expected[1] and got[0] == pytest.approx(expected[0])


@pytest.mark.parametrize("name, base", [
    ("add_kernel", "add_kernel"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int, T2)",
     "vectorized_elementwise_kernel"),
    ("void k<(bool)1, (int)32>(float *, int)", "k"),
])
def test_function_base(name, base):
    assert function_base(name) == base
