"""Parsers and rules against real ncu output recorded on an H100 by bench/profile_fixtures.py.

The recordings live in tests/profile/fixtures/h100/ (the `h100/` folder of the script's archive).
Each test skips, naming the missing file, only while that recording is absent; once committed,
every test here runs on CPU. Expected classes are the design of each bench case (see the script).
"""
import gzip
from pathlib import Path

import pytest

from kernelwright.profile import metrics as catalog
from kernelwright.profile.classify import Bottleneck, classify_kernel, classify_timeline
from kernelwright.profile.findings import KernelEvidence, kernel_findings
from kernelwright.profile.ncu import explain_failure, parse_query_metrics, unknown_metric
from kernelwright.profile.parse import aggregate_by_name, parse_raw_csv
from kernelwright.profile.report import ProfileReport
from kernelwright.profile.sass import parse_sass, parse_source_page
from kernelwright.profile.torchprof import TimelineSummary

H100 = Path(__file__).parent / "fixtures" / "h100"
KERNEL_CASES = {"memory": "memory", "memory_scalar": "memory", "compute": "compute", "latency": "latency",
                "latency_chase": "latency"}
TIMELINE_CASES = {"launch": "launch", "host": "host"}


def recorded(*parts: str) -> Path:
    path = H100.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"H100 recording {path.relative_to(H100.parent)} is absent: run bench/profile_fixtures.py "
                    f"on an H100 and commit its h100/ folder")
    return path


def kernels(case: str, stage: str = "stage1"):
    return aggregate_by_name(parse_raw_csv(recorded(case, f"{stage}.csv").read_text()))


@pytest.mark.parametrize("case, expected", KERNEL_CASES.items())
def test_hottest_kernel_is_classified_as_designed(case, expected):
    hottest = kernels(case)[0]
    result = classify_kernel(hottest)
    assert result.bottleneck == Bottleneck(expected), (hottest.name, result.reason)


@pytest.mark.parametrize("case, expected", TIMELINE_CASES.items())
def test_forward_is_launch_or_host_bound_as_designed(case, expected):
    import json

    data = json.loads(recorded(case, "timeline.json").read_text())["timeline"]
    summary = TimelineSummary(**{k: v for k, v in data.items() if k in TimelineSummary.__dataclass_fields__})
    result = classify_timeline(summary)
    assert result is not None and result.bottleneck == Bottleneck(expected), summary


def test_every_metric_key_has_a_name_the_h100_knows():
    with gzip.open(recorded("ncu_query_metrics.txt.gz"), "rt") as f:
        available = parse_query_metrics(f.read())
    keys = set(catalog.STAGE1_KEYS) | {k for keys in catalog.STAGE2_KEYS.values() for k in keys}
    missing = sorted(k for k in keys if not any(n.split(".")[0] in available for n in catalog.ALIASES[k]))
    assert not missing, missing


def test_every_section_exists():
    listed = recorded("ncu_list_sections.txt").read_text()
    sections = set(catalog.STAGE1_SECTIONS) | {s for group in catalog.STAGE2_SECTIONS.values() for s in group}
    assert not [s for s in sections if s not in listed]


def test_unknown_metric_message_names_the_metric():
    text = recorded("ncu_unknown_metric.txt").read_text()
    assert unknown_metric(text) == "sm__bogus_metric.sum", text[-500:]
    assert explain_failure(1, text, False, 60)[0] == "unknown_metric"


@pytest.mark.parametrize("case, keys", [
    ("memory", ("dram_read_bytes", "gld_requests", "gld_bytes", "l2_hit_pct")),
    ("compute", ("inst_executed",)),
    ("latency_chase", ("warp_cycles_per_issue", "stall_long_scoreboard")),
])
def test_stage2_counters_are_collected(case, keys):
    hottest = kernels(case, "stage2")[0]
    assert not [k for k in keys if hottest.get(k) is None], sorted(hottest.metrics)[:40]


def _merged(case: str):
    first = kernels(case)[0]
    second = {k.name: k for k in kernels(case, "stage2")} if (H100 / case / "stage2.csv").exists() else {}
    if first.name in second:
        first.metrics = {**second[first.name].metrics, **first.metrics}
    return first


def test_scalar_add_gets_the_vectorise_finding():
    add = _merged("memory_scalar")
    found = kernel_findings(KernelEvidence(add, classify_kernel(add), 1.0))
    assert any(f.tags == ["vectorized-access"] for f in found), [f.line() for f in found]


def test_one_program_serial_loop_gets_the_small_grid_finding():
    serial = _merged("latency")
    found = kernel_findings(KernelEvidence(serial, classify_kernel(serial), 1.0))
    assert any("split-k" in f.tags for f in found), [f.line() for f in found]


def test_pointer_chase_waits_on_memory_and_its_hot_spot_is_a_load():
    chase = _merged("latency_chase")
    pages = parse_source_page(recorded("latency_chase", "stage2_source.csv").read_text())
    spots = next(iter(pages.values()))
    assert spots and "LDG" in spots[0].source, spots
    found = kernel_findings(KernelEvidence(chase, classify_kernel(chase), 1.0, hotspots=spots))
    assert any("async-copy-pipelining" in f.tags for f in found), [f.line() for f in found]


@pytest.mark.parametrize("case, check", [
    ("compute", lambda s: s.tensor_ops > 0),
    ("memory", lambda s: s.dominant_load_bits == 128),
    ("memory_scalar", lambda s: s.dominant_load_bits == 32),
])
def test_sass_of_the_candidates(case, check):
    listings = sorted(recorded(case, "sass").glob("*.sass.txt"))
    summaries = [s for path in listings for s in parse_sass(path.read_text())]
    assert summaries and all(check(s) for s in summaries), [s.to_dict() for s in summaries]


@pytest.mark.parametrize("case", list(KERNEL_CASES) + list(TIMELINE_CASES))
def test_reports_round_trip_and_carry_overhead_and_energy(case):
    text = recorded(case, "report.json").read_text()
    report = ProfileReport.from_json(text)
    assert report.to_json() == ProfileReport.from_json(report.to_json()).to_json()
    assert report.overhead_s["total"] > 0 and report.findings
    assert report.energy and report.energy["method"] != "unavailable", report.energy


@pytest.mark.parametrize("case", ["memory", "compute", "latency"])
def test_triton_kernels_of_the_candidate_were_found_and_disassembled(case):
    report = ProfileReport.from_json(recorded(case, "report.json").read_text())
    hottest = report.kernels[0]
    assert hottest.resources and hottest.resources["source"] == "triton", hottest
    assert hottest.resources["registers"] and hottest.resources["registers"] > 0
    assert hottest.sass and hottest.sass["instructions"] > 0
