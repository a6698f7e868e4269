"""The reference's profile is collected once per problem, target and software versions, kept in the
judge's cache folder and reused by every candidate of the problem (judge/refprofile.py). The profiler
is a stand-in that counts its calls and returns the recorded H100 compute report (tests/profile/
fixtures/h100/compute, a matmul at 79% of its tensor pipe) as the reference's."""
from __future__ import annotations

import json
import threading
from pathlib import Path

from kernelwright.judge import refprofile
from kernelwright.profile import ProfileConfig, ProfileReport
from kernelwright.profile.report import FAILED, KernelReport

RECORDED = Path(__file__).parents[1] / "profile" / "fixtures" / "h100" / "compute" / "report.json"
PROBLEM = "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, a, b):\n        return a @ b\n"
DEVICE = "NVIDIA H100 80GB HBM3"


class Profiler:
    """Stands in for `profile_candidate`: records what it was asked to profile."""

    def __init__(self, status: str = "ok"):
        self.calls, self.status = [], status

    def __call__(self, problem, candidate, settings, executor=None, kernel_shares=None):
        self.calls.append({"candidate": Path(candidate).read_text(), "settings": settings, "shares": kernel_shares})
        report = ProfileReport.from_dict(json.loads(RECORDED.read_text()))
        report.status = self.status
        return report


def candidate_report() -> ProfileReport:
    slow = KernelReport("fp32_gemm", 1, 300.0, 0.95, "compute", "hand-written", numbers={"sm_pct": 64.0,
                                                                                          "tensor_pct": 0.0})
    return ProfileReport("p.py", "c.py", status="ok", device=DEVICE, kernels=[slow], overhead_s={"total": 12.0})


def settings(tmp_path: Path, **changes) -> ProfileConfig:
    return ProfileConfig(cache_dir=str(tmp_path / "cache" / "profile"), budget_s=270.0, **changes)


def problem(tmp_path: Path, name: str = "1_Matmul.py", source: str = PROBLEM) -> Path:
    path = tmp_path / name
    path.write_text(source)
    return path


def test_the_reference_is_profiled_once_and_every_candidate_of_the_problem_reuses_it(tmp_path):
    profiler, path = Profiler(), problem(tmp_path)
    first, second = candidate_report(), candidate_report()
    refprofile.add_reference(first, path, {"N": 64}, 42, settings(tmp_path), profiler)
    refprofile.add_reference(second, path, {"N": 64}, 42, settings(tmp_path), profiler)
    assert len(profiler.calls) == 1  # the second candidate read the kept report
    asked = profiler.calls[0]
    assert asked["candidate"].startswith(PROBLEM) and "ModelNew = Model" in asked["candidate"]
    assert asked["shares"] is None and asked["settings"].budget_s == 270.0 - 12.0  # what the candidate left
    assert first.reference["origin"].startswith("collected now") and second.reference["origin"].startswith("cached")
    assert first.reference["kernels"] == second.reference["kernels"]
    assert second.findings[0].tags == ["tensor-cores", "roofline-speed-of-light"] and "matmul_kernel" in \
        second.findings[0].text
    (kept,) = (tmp_path / "cache" / "profile" / "reference").glob("1_Matmul__*.json")
    assert json.loads(kept.read_text())["key"]["device"] == DEVICE
    assert "reference" in second.overhead_s


def test_another_problem_sizes_or_device_is_another_reference(tmp_path):
    profiler, path = Profiler(), problem(tmp_path)
    refprofile.add_reference(candidate_report(), path, {"N": 64}, 42, settings(tmp_path), profiler)
    refprofile.add_reference(candidate_report(), path, {"N": 128}, 42, settings(tmp_path), profiler)
    other_device = candidate_report()
    other_device.device = "NVIDIA A100-SXM4-80GB"
    refprofile.add_reference(other_device, path, {"N": 64}, 42, settings(tmp_path), profiler)
    changed = problem(tmp_path, source=PROBLEM + "# another revision\n")
    refprofile.add_reference(candidate_report(), changed, {"N": 64}, 42, settings(tmp_path), profiler)
    refprofile.add_reference(candidate_report(), path, {"N": 64}, 42, settings(tmp_path, hot_kernels=1), profiler)
    assert len(profiler.calls) == 5
    refprofile.add_reference(candidate_report(), path, {"N": 64}, 42, settings(tmp_path), profiler)
    assert len(profiler.calls) == 5  # each of them is kept


def test_a_failed_reference_profile_is_not_kept_and_leaves_the_candidates_report_as_it_was(tmp_path):
    failing, path = Profiler(FAILED), problem(tmp_path)
    report = candidate_report()
    refprofile.add_reference(report, path, {}, 42, settings(tmp_path), failing)
    assert report.reference is None and report.findings == []
    assert report.notes[-1].startswith("the reference could not be profiled")
    working = Profiler()
    refprofile.add_reference(candidate_report(), path, {}, 42, settings(tmp_path), working)
    assert len(working.calls) == 1  # tried again, not read from a kept failure


def test_no_reference_without_budget_or_a_cache_folder(tmp_path):
    profiler, path = Profiler(), problem(tmp_path)
    late = candidate_report()
    late.overhead_s["total"] = 260.0
    refprofile.add_reference(late, path, {}, 42, settings(tmp_path), profiler)
    nowhere = candidate_report()
    refprofile.add_reference(nowhere, path, {}, 42, ProfileConfig(cache_dir=None), profiler)
    assert profiler.calls == [] and late.reference is None and nowhere.reference is None
    assert "budget" in late.notes[-1] and "cache folder" in nowhere.notes[-1]


def test_candidates_of_one_problem_at_once_wait_for_one_collection(tmp_path):
    path, started, release = problem(tmp_path), threading.Event(), threading.Event()

    class Slow(Profiler):
        def __call__(self, *args, **kwargs):
            started.set()
            release.wait(10)
            return super().__call__(*args, **kwargs)

    profiler = Slow()
    reports = [candidate_report() for _ in range(3)]
    threads = [threading.Thread(target=refprofile.add_reference, args=(r, path, {}, 42, settings(tmp_path), profiler))
               for r in reports]
    for thread in threads:
        thread.start()
    assert started.wait(10)
    release.set()
    for thread in threads:
        thread.join(20)
    assert len(profiler.calls) == 1 and all(r.reference for r in reports)
