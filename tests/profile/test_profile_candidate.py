"""profile_candidate end to end on CPU, and the ncu collection driven by a stand-in ncu.

Candidates are small ModelNew files written by hand in each test. The stand-in ncu (a Python
script) does not profile anything: on `--import` it prints the hand-written CSV samples of
fixtures/handwritten, filtered by the collection's kernel names and launch count, so the
orchestration (kernel selection, the plan, parsing, findings) runs for real without a GPU.
"""
import json
import sys
from pathlib import Path

import pytest

from kernelwright.profile import ProfileConfig, ProfileReport, hotspots, profile_candidate, stages
from kernelwright.profile.hot import select_hot
from kernelwright.profile.context import ProfileRun
from kernelwright.profile.findings import NOTICE
from kernelwright.profile.report import FAILED, PARTIAL

HANDWRITTEN = Path(__file__).parent / "fixtures" / "handwritten"
H100 = Path(__file__).parent / "fixtures" / "h100"
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


# ---------------------------------------------------------------- the ncu collection with a stand-in ncu

# Behaves like ncu on the points under test: it logs its arguments, lists the recorded H100 metric
# names on --query-metrics, and on --import serves the hand-written pages, keeping only the launches
# the collection's --kernel-name regex selected, at most --launch-count of them.
FAKE_NCU = r"""#!{python}
import csv, gzip, io, re, sys
args = sys.argv[1:]
open({log!r}, "a").write(" ".join(args) + "\n")
if args == ["--query-metrics"]:
    print(gzip.open({query!r}, "rt").read(), end="")
    sys.exit(0)
if args[0] == "--import":
    page = args[args.index("--page") + 1]
    if page == "source":
        print(open({hand!r} + "/source_page.csv").read(), end="")
        sys.exit(0)
    collect = [line.split() for line in open({log!r}) if "--export" in line][-1]
    count = int(collect[collect.index("--launch-count") + 1])
    pattern = collect[collect.index("--kernel-name") + 1][len("regex:"):] if "--kernel-name" in collect else ""
    lines = open({hand!r} + "/stage1_raw.csv").read().splitlines()
    rows = [line for line in lines if line.startswith('"')]
    column = next(csv.reader([rows[0]])).index("Kernel Name")
    kept = [r for r in rows[2:] if re.search(pattern, next(csv.reader([r]))[column])][:count]
    print("\n".join(rows[:2] + kept))
    sys.exit(0)
open(args[args.index("--export") + 1] + ".ncu-rep", "w").write("report")
"""


@pytest.fixture
def fake_ncu(tmp_path):
    log = tmp_path / "ncu_calls.log"
    script = tmp_path / "ncu"
    script.write_text(FAKE_NCU.format(python=sys.executable, log=str(log), hand=str(HANDWRITTEN),
                                      query=str(H100 / "ncu_query_metrics.txt.gz")))
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
# the timing stage's split of the same forward (verdict.kernels), as kernel_times writes it
VERDICT_KERNELS = {"available": True, "kernels": [
    {"name": "serial_kernel", "us_per_call": 2048.0, "launches_per_call": 1.0, "share": 0.47},
    {"name": GEMM, "us_per_call": 1523.2, "launches_per_call": 1.0, "share": 0.35},
    {"name": "add_kernel", "us_per_call": 826.0, "launches_per_call": 2.0, "share": 0.16},
    {"name": "at::native::vectorized_elementwise_kernel<FillFunctor …>", "us_per_call": 9.0,
     "launches_per_call": 1.0, "share": 0.02}]}


def collections(log: Path) -> list[str]:
    return [c for c in log.read_text().splitlines() if "--export" in c]


def test_one_collection_of_the_verdicts_hot_kernels(tmp_path, fake_ncu):
    script, log = fake_ncu
    run = ncu_run(tmp_path, script)
    selection = select_hot(VERDICT_KERNELS, None, run.config.limits())
    kernels = stages.ncu_passes(run, selection)
    stages.attach_kernels(run, kernels, None, selection)
    (collect,) = collections(log)  # the program ran once under ncu
    assert f"--kernel-name-base function --kernel-name regex:^(serial_kernel|{GEMM})$" in collect
    assert "--launch-skip 0 --launch-count 2" in collect and "--apply-rules no" in collect
    assert "--section LaunchStats --section Occupancy --metrics" in collect
    assert "SpeedOfLight" not in collect and "MemoryWorkloadAnalysis" not in collect
    metrics = collect.split("--metrics ")[1].split()[0].split(",")
    assert metrics[-len(hotspots.SOURCE_METRICS):] == list(hotspots.SOURCE_METRICS)
    assert not run.report.dropped_metrics  # every derived counter is listed on the recorded H100
    report = run.report
    assert [(k.name, k.bottleneck, k.share) for k in report.kernels] == [
        ("serial_kernel", "latency", 0.47), (GEMM, "compute", 0.35)]  # shares of the forward, not of ncu's launches
    assert report.kernels[0].hotspots[0]["source"] == "LDG.E R5, desc[UR4][R2.64]"  # the same report's source page
    assert [c for c in log.read_text().splitlines() if "--page source" in c][0].split()[1].endswith("stage1.ncu-rep")
    assert report.bottleneck == "latency" and "epilogue-fusion" in {t for f in report.findings for t in f.tags}
    assert [k.name for k in selection.left_out] == ["add_kernel", VERDICT_KERNELS["kernels"][3]["name"]]
    assert "cover 82%" in selection.left_out[0].why and not selection.missed


def test_without_shares_the_first_launches_are_profiled(tmp_path, fake_ncu):
    script, log = fake_ncu
    run = ncu_run(tmp_path, script, max_kernels=3)
    selection = select_hot(None, None, run.config.limits())
    kernels = stages.ncu_passes(run, selection)
    (collect,) = collections(log)
    assert "--kernel-name" not in collect and "--launch-count 3" in collect
    assert {k.name for k in kernels} == {"add_kernel", GEMM, "serial_kernel"}
    assert [k.name for k in selection.picked] == ["serial_kernel", GEMM, "add_kernel"]  # by ncu's time
    assert "the first 3 launches" in selection.summary()


def test_what_ncu_lists_is_asked_once_per_binary_and_device(tmp_path, fake_ncu):
    script, log = fake_ncu
    for attempt in ("one", "two"):
        (tmp_path / attempt).mkdir()
        run = ncu_run(tmp_path / attempt, script, cache_dir=str(tmp_path / "cache"))
        run.report.device = "NVIDIA H100 80GB HBM3"
        stages.ncu_passes(run, select_hot(VERDICT_KERNELS, None, run.config.limits()))
    calls = log.read_text().splitlines()
    assert calls.count("--query-metrics") == 1 and sum("--export" in c for c in calls) == 2
    (tmp_path / "three").mkdir()
    other = ncu_run(tmp_path / "three", script, cache_dir=str(tmp_path / "cache"))
    other.report.device = "NVIDIA H200"
    stages.ncu_passes(other, select_hot(VERDICT_KERNELS, None, other.config.limits()))
    assert log.read_text().splitlines().count("--query-metrics") == 2


def test_a_picked_kernel_ncu_did_not_reach_is_reported(tmp_path, fake_ncu):
    script, _ = fake_ncu
    run = ncu_run(tmp_path, script, max_kernels=1)
    hot = {"available": True, "kernels": [{"name": "add_kernel", "share": 0.5, "launches_per_call": 2.0},
                                          {"name": "serial_kernel", "share": 0.5, "launches_per_call": 1.0}]}
    selection = select_hot(hot, None, run.config.limits())
    stages.ncu_passes(run, selection)  # one launch allowed: the first matching one is add_kernel's
    assert [k.name for k in selection.picked] == ["add_kernel"]
    assert selection.missed[0].name == "serial_kernel" and "bound of 1 launches" in selection.missed[0].why


def test_an_ncu_that_times_out_leaves_a_notice_and_the_rest_of_the_report(tmp_path):
    script = tmp_path / "ncu"
    script.write_text("#!/bin/sh\ncase \"$*\" in *--export*) sleep 30 ;; esac\nexit 1\n")
    script.chmod(0o755)
    run = ncu_run(tmp_path, script, timeout_s=1.5)
    assert stages.ncu_passes(run, select_hot(VERDICT_KERNELS, None, run.config.limits())) is None
    (finding,) = run.report.findings
    assert finding.kind == NOTICE and "ncu stage1 failed: ncu did not finish within" in finding.text


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
    cfg = ProfileConfig(hot_kernels=5, overrides={"n": 3}, cover=0.9, cache_dir="/tmp/x")
    assert ProfileConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg


def test_profile_candidate_picks_ncus_kernels_from_the_verdict_and_says_so(tmp_path, fake_ncu, monkeypatch):
    """The wiring of profile_candidate on a GPU, its timeline pass replaced by the recorded one of the
    serial-loop case (no GPU here); the collection is the stand-in ncu's."""
    from kernelwright.profile import api
    from kernelwright.profile.torchprof import timeline_from_runner

    script, log = fake_ncu

    def timeline_pass(run):
        run.report.device = "NVIDIA H100 80GB HBM3"
        return timeline_from_runner(json.loads((H100 / "latency" / "timeline.json").read_text()))

    monkeypatch.setattr(api, "_timeline_pass", timeline_pass)
    stages._QUERY_CACHE.clear()
    cfg = ProfileConfig(ncu_path=str(script), sass=False, artifacts_dir=str(tmp_path / "art"))
    report = profile_candidate("problem.py", "candidate.py", cfg, kernel_shares=VERDICT_KERNELS)
    assert report.status == "ok" and report.selection["source"] == "verdict"
    assert report.selection["functions"] == ["serial_kernel", GEMM] and report.selection["covered"] == 0.82
    assert any(n.startswith("ncu profiled `serial_kernel` (47%)") and "Left out: `add_kernel` (16%)" in n
               for n in report.notes)
    assert "not profiled: `add_kernel` 16%" in report.summary_text()
    assert ProfileReport.from_json(report.to_json()).selection == report.selection
    timeline_only = profile_candidate("problem.py", "candidate.py", cfg, kernel_shares={"available": False,
                                                                                         "reason": "a CPU verdict"})
    assert timeline_only.selection["source"] == "timeline" and timeline_only.selection["note"] == "a CPU verdict"
    assert timeline_only.selection["functions"] == ["serial_kernel"]
