"""profile_candidate end to end on CPU, and the ncu stages driven by a stand-in ncu.

Candidates are small ModelNew files written by hand in each test. The stand-in ncu (a shell
script) does not profile anything: on `--import` it prints the hand-written CSV samples of
fixtures/handwritten, so the orchestration (plans, retries, parsing, stage-2 selection, findings)
runs for real on a machine without a GPU.
"""
import json
from pathlib import Path

import pytest

from kernelwright.profile import ProfileConfig, ProfileReport, profile_candidate
from kernelwright.profile import stages
from kernelwright.profile.context import ProfileRun
from kernelwright.profile.findings import NOTICE
from kernelwright.profile.report import FAILED, PARTIAL

HANDWRITTEN = Path(__file__).parent / "fixtures" / "handwritten"
RELU = "level1/19_ReLU.py"
SMALL = {"batch_size": 8, "dim": 256}

GOOD = '''import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.clamp_min(x, 0.0)
'''


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "candidate.py"
    path.write_text(body)
    return path


def config(tmp_path: Path, **kw) -> ProfileConfig:
    base = dict(overrides=SMALL, warmup=1, calls=2, energy_seconds=0.05, timeout_s=120, artifacts_dir=str(tmp_path / "art"))
    base.update(kw)
    return ProfileConfig(**base)


def test_cpu_profile_records_the_timeline_and_says_why_ncu_did_not_run(kernelbench, tmp_path):
    report = profile_candidate(kernelbench / RELU, write(tmp_path, GOOD), config(tmp_path))
    assert report.status == PARTIAL and report.device == "cpu"
    assert report.plain_ms_per_call is not None and report.plain_ms_per_call > 0
    assert report.timeline["calls"] == 2 and report.timeline["wall_us_per_call"] > 0
    assert report.energy is None  # no GPU, no power meter
    (only,) = report.findings
    assert only.kind == NOTICE and "No CUDA device" in only.text
    assert report.overhead_s["timeline"] > 0 and report.overhead_s["total"] >= report.overhead_s["timeline"]
    back = ProfileReport.from_json(report.to_json())
    assert back == report


def test_a_candidate_that_raises_gives_a_failed_report_with_the_error(kernelbench, tmp_path):
    broken = GOOD.replace("return torch.clamp_min(x, 0.0)", "raise RuntimeError('illegal memory access (on purpose)')")
    report = profile_candidate(kernelbench / RELU, write(tmp_path, broken), config(tmp_path))
    assert report.status == FAILED
    (only,) = report.findings
    assert "failed at warmup" in only.text and "illegal memory access (on purpose)" in only.text


def test_a_hanging_candidate_is_stopped_by_the_timeout(kernelbench, tmp_path):
    hang = GOOD.replace("return torch.clamp_min(x, 0.0)", "import time; time.sleep(600)")
    report = profile_candidate(kernelbench / RELU, write(tmp_path, hang), config(tmp_path, timeout_s=8))
    assert report.status == FAILED
    assert "did not finish within 8 s" in report.findings[0].text
    assert report.overhead_s["total"] < 60


def test_a_broken_candidate_file_is_reported_not_raised(kernelbench, tmp_path):
    report = profile_candidate(kernelbench / RELU, write(tmp_path, "class ModelNew(:\n"), config(tmp_path))
    assert report.status == FAILED and "failed at load" in report.findings[0].text


# ---------------------------------------------------------------- ncu stages with a stand-in ncu

FAKE_NCU = """#!/bin/sh
echo "$@" >> {log}
case "$*" in
  *--query-metrics*) exit 1 ;;
  *--import*/stage1.ncu-rep*) cat {hand}/stage1_raw.csv ;;
  *--import*/stage2.ncu-rep*--page\\ source*) cat {hand}/source_page.csv ;;
  *--import*/stage2.ncu-rep*) cat {hand}/stage2_memory_raw.csv ;;
esac
exit 0
"""


@pytest.fixture
def fake_ncu(tmp_path):
    log = tmp_path / "ncu_calls.log"
    script = tmp_path / "ncu"
    script.write_text(FAKE_NCU.format(log=log, hand=HANDWRITTEN))
    script.chmod(0o755)
    return script, log


def ncu_run(tmp_path, ncu_path, **kw) -> ProfileRun:
    cfg = ProfileConfig(ncu_path=str(ncu_path), **kw)
    work = tmp_path / "work"
    work.mkdir()
    report = ProfileReport("problem.py", "candidate.py")
    stages._QUERY_CACHE.clear()
    return ProfileRun(cfg, work, report, Path("problem.py"), Path("candidate.py"))


GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64"


def test_stage1_classifies_and_stage2_deepens_the_hot_kernels(tmp_path, fake_ncu):
    script, log = fake_ncu
    run = ncu_run(tmp_path, script, hot_kernels=3)
    kernels = stages.ncu_passes(run)
    stages.attach_kernels(run, kernels, None)
    collect = [c for c in log.read_text().splitlines() if "--export" in c]
    assert len(collect) == 2  # stage 1 and stage 2, nothing retried
    assert "--launch-count 32" in collect[0] and "--section SpeedOfLight" in collect[0]
    # hottest first by total time: serial 2048 us, GEMM 1523 us, add 2 x 413 us (4 launches in all)
    assert f"regex:^(serial_kernel|{GEMM}|add_kernel)$" in collect[1] and "--launch-count 4" in collect[1]
    for section in ("WarpStateStats", "SourceCounters", "MemoryWorkloadAnalysis", "InstructionStats"):
        assert f"--section {section}" in collect[1]
    report = run.report
    assert [(k.name, k.bottleneck) for k in report.kernels] == [
        ("serial_kernel", "latency"), (GEMM, "compute"), ("add_kernel", "memory")]
    assert report.bottleneck == "latency"
    add = report.kernels[2]
    assert add.launches == 2 and add.numbers["gld_requests"] == 524288  # stage-2 counters merged in
    assert add.share == pytest.approx(826 / (2048 + 1523.2 + 826), rel=1e-3)
    assert report.kernels[0].hotspots[0]["source"] == "LDG.E R5, desc[UR4][R2.64]"
    tags = {t for f in report.findings for t in f.tags}
    assert {"vectorized-access", "epilogue-fusion"} <= tags and "split-k" not in tags  # the serial loop is no product
    assert (run.work / "stage1.csv").read_text().startswith("==PROF==")


def test_stage2_skips_cold_kernels(tmp_path, fake_ncu):
    script, log = fake_ncu
    run = ncu_run(tmp_path, script, hot_kernels=3, min_share=0.3)
    stages.ncu_passes(run)
    collect = [c for c in log.read_text().splitlines() if "--export" in c]
    assert "regex:^(serial_kernel|" + GEMM + ")$" in collect[1]  # add_kernel has 19% < 30%
    assert "--section MemoryWorkloadAnalysis" not in collect[1]


def test_ncu_permission_failure_becomes_a_notice(tmp_path):
    script = tmp_path / "ncu"
    script.write_text(f"#!/bin/sh\ncat {HANDWRITTEN}/ncu_permission_error.txt\nexit 1\n")
    script.chmod(0o755)
    run = ncu_run(tmp_path, script)
    assert stages.ncu_passes(run) is None
    (finding,) = run.report.findings
    assert finding.kind == NOTICE and "ERR_NVGPUCTRPERM" in finding.text and "stage1 failed" in finding.text


def test_missing_or_disabled_ncu_becomes_a_notice(tmp_path, monkeypatch):
    monkeypatch.delenv("KW_NCU", raising=False)
    run = ncu_run(tmp_path, tmp_path / "nowhere" / "ncu")
    assert stages.ncu_passes(run) is None and "not installed" in run.report.findings[0].text
    (tmp_path / "second").mkdir()
    run = ncu_run(tmp_path / "second", "ncu", use_ncu=False)
    assert stages.ncu_passes(run) is None and "disabled by configuration" in run.report.findings[0].text


def test_config_round_trips():
    cfg = ProfileConfig(hot_kernels=5, overrides={"n": 3})
    assert ProfileConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
