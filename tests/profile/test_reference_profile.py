"""The reference's kernels beside the candidate's (profile/reference.py): what a report keeps of the
reference's profile and the findings that compare them. The reference side is a recorded H100 report
(tests/profile/fixtures/h100/*/report.json, a profiled candidate standing in for a reference's profile);
the candidate kernels are hand-written KernelReports (illustrative numbers)."""
from __future__ import annotations

import json
from pathlib import Path

from kernelwright.profile import ProfileReport, reference
from kernelwright.profile.report import KernelReport

H100 = Path(__file__).parent / "fixtures" / "h100"


def recorded(case: str) -> ProfileReport:
    return ProfileReport.from_dict(json.loads((H100 / case / "report.json").read_text()))


def candidate(*kernels: KernelReport) -> ProfileReport:
    return ProfileReport("p.py", "c.py", status="ok", device="NVIDIA H100 80GB HBM3", bottleneck="compute",
                         kernels=list(kernels))


def kernel(name: str, share: float, bottleneck: str, **numbers: float) -> KernelReport:
    return KernelReport(name, 1, 100.0, share, bottleneck, "hand-written", numbers=numbers)


def test_a_compute_kernel_far_from_the_references_tensor_roof_is_told_so():
    mine = candidate(kernel("fp32_gemm", 0.9, "compute", sm_pct=62.0, tensor_pct=0.0, dram_pct=10.0))
    (finding,) = reference.compare(mine, recorded("compute"))
    assert finding.kernel == "fp32_gemm" and finding.tags == ["tensor-cores", "roofline-speed-of-light"]
    assert finding.numbers == {"candidate_pct": 0.0, "reference_pct": 79.4}  # the recorded tensor pipe 79.43%
    assert "`matmul_kernel`" in finding.text and "0% of peak (SM 62%)" in finding.text and "79%" in finding.text
    assert abs(finding.impact - 0.9 * 79.43 / 100) < 1e-6
    busy = candidate(kernel("tf32_gemm", 0.9, "compute", sm_pct=70.0, tensor_pct=66.0))  # uses them: 13 points
    assert reference.compare(busy, recorded("compute")) == []


def test_no_comparison_below_the_gap_across_classes_or_for_a_minor_kernel():
    ref = recorded("memory")  # add_kernel at 90% of DRAM peak
    assert reference.compare(candidate(kernel("add", 1.0, "memory", dram_pct=75.0)), ref) == []  # 15 points
    assert reference.compare(candidate(kernel("add", 1.0, "compute", sm_pct=20.0)), ref) == []  # no compute peer
    assert reference.compare(candidate(kernel("add", 0.2, "memory", dram_pct=30.0)), ref) == []  # 20% of the time
    assert reference.compare(candidate(kernel("add", 1.0, "latency", dram_pct=5.0)), ref) == []  # not a roof class
    (slow,) = reference.compare(candidate(kernel("add", 1.0, "memory", dram_pct=40.0, mem_pct=45.0)), ref)
    assert slow.tags == ["vectorized-access", "roofline-speed-of-light"] and slow.numbers["candidate_pct"] == 45.0


def test_the_report_keeps_the_references_summary_and_shows_it():
    mine = candidate(kernel("fp32_gemm", 0.9, "compute", sm_pct=62.0, tensor_pct=0.0))
    reference.apply(mine, recorded("compute"), "cached (compute__x.json)")
    assert mine.reference["origin"] == "cached (compute__x.json)" and mine.reference["bottleneck"] == "compute"
    (ref_kernel,) = mine.reference["kernels"]
    assert ref_kernel["name"] == "matmul_kernel" and ref_kernel["tensor_pct"] == 79.43
    assert mine.findings[0].rank == 1 and "reference" in mine.findings[0].text
    text = mine.summary_text()
    assert "the reference (the problem's Model) on this GPU: `matmul_kernel` 100% compute" in text
    assert ProfileReport.from_json(mine.to_json()) == mine
    older = {k: v for k, v in mine.to_dict().items() if k != "reference"}  # a report stored before the field
    assert ProfileReport.from_dict(older).reference is None


def test_the_reference_runs_as_a_candidate_whose_model_is_the_problems():
    source = reference.reference_source("import torch\nclass Model(torch.nn.Module):\n    pass\n")
    namespace: dict = {}
    exec(compile(source.replace("import torch\n", "").replace("torch.nn.Module", "object"), "p", "exec"), namespace)
    assert namespace["ModelNew"] is namespace["Model"]
