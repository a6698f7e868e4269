"""Findings rules: evidence from the hand-written ncu samples and the real toolchain outputs."""
import gzip
from dataclasses import replace
from pathlib import Path

import pytest

from kernelwright.memory.skills import BUILTIN_DIR
from kernelwright.profile.classify import Bottleneck, Classification, classify_kernel, classify_timeline
from kernelwright.profile.findings import (
    ACTION, NOTICE, SKILL_TAGS, Finding, KernelEvidence, kernel_findings, notice, rank_findings, render,
    timeline_findings,
)
from kernelwright.profile.parse import KernelProfile, aggregate_by_name, parse_raw_csv
from kernelwright.profile.resources import parse_ptxas_verbose
from kernelwright.profile.hotspots import parse_source_page
from kernelwright.profile.sass import parse_sass
from kernelwright.profile.torchprof import TimelineSummary

FIXTURES = Path(__file__).parent / "fixtures"
HANDWRITTEN = FIXTURES / "handwritten"
TOOLCHAIN = FIXTURES / "toolchain"


@pytest.fixture(scope="module")
def kernels():
    merged = {k.name: k for k in aggregate_by_name(parse_raw_csv((HANDWRITTEN / "stage1_raw.csv").read_text()))}
    stage2 = parse_raw_csv((HANDWRITTEN / "stage2_memory_raw.csv").read_text())[0]
    merged["add_kernel"].metrics = {**stage2.metrics, **merged["add_kernel"].metrics}
    return merged


def evidence(profile: KernelProfile, share: float = 0.5, **extra) -> KernelEvidence:
    return KernelEvidence(profile, classify_kernel(profile), share, **extra)


def test_memory_bound_add_with_4_byte_loads_gets_vectorise_finding(kernels):
    found = kernel_findings(evidence(kernels["add_kernel"], 0.4))
    vector = next(f for f in found if f.tags == ["vectorized-access"])
    assert "DRAM throughput 91% of peak with 4-byte global loads" in vector.text
    assert vector.numbers["load_bytes_per_thread"] == pytest.approx(4.0, rel=1e-3)
    assert vector.kernel == "add_kernel" and "(40% of GPU time)" in vector.text
    roof = next(f for f in found if "memory-bound-elementwise-fusion" in f.tags)
    assert "moving 100.7 MB per launch" in roof.text  # 67.11 + 33.55 Mbyte read + written


def test_sass_load_width_backs_the_finding_without_stage2_counters():
    sass = {s.function: s for s in parse_sass(gzip.open(TOOLCHAIN / "triton_add_sass.txt.gz", "rt").read())}
    profile = KernelProfile("add_kernel", metrics={"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": 88.0,
                                                   "dram__throughput.avg.pct_of_peak_sustained_elapsed": 88.0,
                                                   "sm__throughput.avg.pct_of_peak_sustained_elapsed": 15.0})
    found = kernel_findings(evidence(profile, 1.0, sass=sass["add_kernel"]))
    vector = next(f for f in found if f.tags == ["vectorized-access"])
    assert "4-byte global loads" in vector.text and "(0 of 16 load instructions in the SASS are 128-bit)" in vector.text


def test_wide_loads_give_no_vectorise_finding():
    sass = {s.function: s for s in parse_sass(gzip.open(TOOLCHAIN / "cuobjdump_sass.txt.gz", "rt").read())}
    profile = KernelProfile("copy_vec4", metrics={"dram__throughput.avg.pct_of_peak_sustained_elapsed": 70.0})
    found = kernel_findings(evidence(profile, 1.0, sass=sass["_Z9copy_vec4PK6float4PS_i"]))
    assert not any("vectorized-access" in f.tags for f in found)


def test_compute_bound_gemm_near_roof_points_to_epilogue_fusion(kernels):
    gemm = next(k for name, k in kernels.items() if name.startswith("sm90_xmma"))
    found = kernel_findings(evidence(gemm, 0.3))
    assert [f.tags for f in found] == [["epilogue-fusion", "roofline-speed-of-light"]]
    assert "tensor pipes 89% busy" in found[0].text


FP32_BUSY = {  # hand-written: a kernel whose CUDA cores are busy with FP32 FMAs, tensor pipes idle
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": 85.0,
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": 40.0,
    "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active": 78.0,
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": 0.0,
    "dram__bytes_read.sum": 200e6, "dram__bytes_write.sum": 67e6,
}


def test_fp32_gemm_without_tensor_cores():
    """2 x 1.1e10 FMA FLOPs on 267 MB of DRAM traffic: operands reused like a matrix product."""
    profile = KernelProfile("sgemm", metrics={**FP32_BUSY, "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 1.1e10})
    (finding,) = kernel_findings(evidence(profile, 0.9))
    assert finding.tags == ["tensor-cores", "tf32-precision-policy", "tf32x3-split-gemm"]
    assert "FMA pipe 78%" in finding.text and finding.impact == pytest.approx(0.9 * 0.8)


def test_a_busy_streaming_kernel_is_not_told_to_use_tensor_cores():
    """The same busy FMA pipe on a kernel that reads each byte for a few FLOPs (an erf-based GELU):
    there is no matrix product to move to tensor cores (issue 31, point 4)."""
    profile = KernelProfile("gelu_kernel", metrics={**FP32_BUSY, "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 4e8})
    assert not [f for f in kernel_findings(evidence(profile, 0.9)) if "tensor-cores" in f.tags]
    unmeasured = KernelProfile("gelu_kernel", metrics=dict(FP32_BUSY))  # no FMA count, no SASS: no evidence either
    assert not [f for f in kernel_findings(evidence(unmeasured, 0.9)) if "tensor-cores" in f.tags]


def test_sector_use_of_tma_and_library_kernels_is_labelled_an_artifact():
    """Hand-written counters in the shape ncu gives a TMA-fed GEMM: its few LSU loads (bias) read 0% or a
    share of DRAM bytes the LSU never saw: a notice, not 'make consecutive threads read consecutive addresses'."""
    base = {"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": 80.0,
            "dram__throughput.avg.pct_of_peak_sustained_elapsed": 78.0,
            "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": 1200.0, "dram__bytes_read.sum": 400e6}
    for efficiency, lsu_bytes in ((0.0, 150e3), (12.5, 150e3)):
        profile = KernelProfile("sm90_xmma_gemm_tma", metrics={
            **base, "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct": efficiency,
            "l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum": lsu_bytes})
        found = kernel_findings(evidence(profile, 0.7))
        assert not [f for f in found if "coalescing" in f.tags]
        (artifact,) = [f for f in found if f.kind == NOTICE]
        assert "A metric artifact, not uncoalesced access" in artifact.text


def test_a_wgmma_wait_is_not_advised_as_a_block_barrier():
    """Hand-written: a Hopper GEMM whose warps stall on `WARPGROUP.DEPBAR` (reported as a barrier stall)."""
    from kernelwright.profile.hotspots import HotSpot

    profile = KernelProfile("linear_kernel", grid=(264, 1, 1), metrics={
        "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": 35.0,
        "sm__throughput.avg.pct_of_peak_sustained_elapsed": 30.0,
        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": 35.0,
        "sm__warps_active.avg.pct_of_peak_sustained_active": 12.0, "launch__waves_per_multiprocessor": 2.0,
        "smsp__average_warps_active_per_issue_active.ratio": 4.0,
        "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio": 1.4})
    spot = HotSpot("0x100", "WARPGROUP.DEPBAR.LE gsb0, 0x0", 90.0, 0.3, stall="barrier")
    stall = next(f for f in kernel_findings(evidence(profile, 1.0, hotspots=[spot])) if "cycles between" in f.text)
    assert "asynchronous tensor-core MMAs" in stall.text and "shuffles" not in stall.text
    assert stall.tags == ["async-copy-pipelining"]


def test_latency_bound_serial_kernel_small_grid_and_stall_hotspot(kernels):
    serial = replace(kernels["serial_kernel"], metrics=dict(kernels["serial_kernel"].metrics))
    serial.metrics.update({
        "smsp__average_warps_active_per_issue_active.ratio": 20.0,
        "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": 14.0,
        "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio": 3.0,
    })
    spots = parse_source_page((HANDWRITTEN / "source_page.csv").read_text())["serial_kernel"]
    found = kernel_findings(evidence(serial, 0.6, hotspots=spots))
    grid = next(f for f in found if "of one wave" in f.text)
    assert "grid of 1 block on 132 SMs fills 1% of one wave" in grid.text
    assert grid.tags == []  # no matrix product: split-K and persistent grids do not apply
    stall = next(f for f in found if "async-copy-pipelining" in f.tags)
    assert "70% of their 20.0 cycles" in stall.text and "long scoreboard" in stall.text
    assert "`LDG.E R5, desc[UR4][R2.64]` with 78% of the stall samples" in stall.text


def test_real_ptxas_spills_and_sass_local_ops_give_register_pressure_finding():
    resources = {r.function: r for r in parse_ptxas_verbose((TOOLCHAIN / "ptxas_v.txt").read_text())}
    sass = {s.function: s for s in parse_sass(gzip.open(TOOLCHAIN / "cuobjdump_sass.txt.gz", "rt").read())}
    name = "_Z5spillPKfPfi"
    ev = KernelEvidence(KernelProfile("spill"), Classification(Bottleneck.unknown, ""), 0.0, resources[name], sass[name])
    (finding,) = kernel_findings(ev)
    assert finding.tags == ["occupancy-register-pressure"]
    assert "364 bytes of register spills per thread (32 registers, ptxas)" in finding.text
    assert f"{sass[name].local_ops} local-memory instructions" in finding.text
    clean = KernelEvidence(KernelProfile("copy"), ev.classification, 0.0, resources["_Z11copy_scalarPKfPfi"],
                           sass["_Z11copy_scalarPKfPfi"])
    assert kernel_findings(clean) == []


def test_bank_conflicts_and_uncoalesced_loads():
    profile = KernelProfile("t", metrics={
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": 3.0e6,
        "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": 4.0e6,
        "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct": 25.0,
        "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": 1000.0,
    })
    tags = {tuple(f.tags) for f in kernel_findings(evidence(profile))}
    assert ("bank-conflict-padding",) in tags and ("coalescing",) in tags


def test_timeline_findings_for_launch_and_host():
    launch = classify_timeline(TimelineSummary(calls=2, kernels_per_call=30, busy_us_per_call=60, wall_us_per_call=300,
                                               idle_fraction=0.8, median_kernel_us=2.0, max_gap_us=10))
    (finding,) = timeline_findings(launch)
    assert finding.tags == ["operator-fusion", "launch-overhead-cuda-graphs"]
    assert "30 kernel launches per call" in finding.text and finding.impact == pytest.approx(0.8)
    host = classify_timeline(TimelineSummary(calls=2, kernels_per_call=3, busy_us_per_call=60, wall_us_per_call=900,
                                             idle_fraction=0.93, median_kernel_us=20.0, max_gap_us=700,
                                             long_gap_us_per_call=800, syncs_per_call=1))
    (finding,) = timeline_findings(host)
    assert finding.tags == ["avoid-host-sync"] and "the largest 700 us" in finding.text
    assert finding.text.startswith("Whole forward: GPU idle 93% of the 900 us forward")
    gaps = classify_timeline(TimelineSummary(calls=2, kernels_per_call=3, busy_us_per_call=60, wall_us_per_call=900,
                                             max_gap_us=700, long_gap_us_per_call=800))
    (finding,) = timeline_findings(gaps)
    assert finding.tags == ["launch-overhead-cuda-graphs"] and "remove host work between kernels" in finding.text
    assert timeline_findings(None) == []


def test_ranking_orders_by_impact_dedupes_and_keeps_notices():
    findings = [Finding("a", ["x"], impact=0.1, kernel="k"), Finding("b", ["y"], impact=0.7, kernel="k"),
                Finding("a again", ["x"], impact=0.05, kernel="k"), notice("no ncu"),
                Finding("c", ["z"], impact=0.3, kernel="k")]
    ranked = rank_findings(findings, limit=2)
    assert [f.text for f in ranked] == ["b", "c", "no ncu"]
    assert [f.rank for f in ranked] == [1, 2, 3]
    assert ranked[-1].kind == NOTICE and ranked[0].kind == ACTION
    assert render(ranked).splitlines()[0] == "1. b [y]"


def test_every_tag_is_a_skill_of_the_library():
    skills = {p.stem for p in BUILTIN_DIR.glob("*.md")}
    assert set(SKILL_TAGS) <= skills, sorted(set(SKILL_TAGS) - skills)


def test_rules_only_use_known_tags(kernels):
    found = []
    for k in kernels.values():
        found += kernel_findings(evidence(k))
    assert found and all(set(f.tags) <= set(SKILL_TAGS) for f in found)
