"""What ncu collects is what the readers read: the static scan of needs.py against the keys the
classification, the findings and the parser actually ask for while they run over recorded and
hand-written evidence, with a recording `KernelProfile.get`."""
import gzip
from itertools import product
from pathlib import Path

import pytest

from kernelwright.profile import needs
from kernelwright.profile.classify import Bottleneck, Classification, classify_kernel
from kernelwright.profile.findings import KernelEvidence, kernel_findings
from kernelwright.profile.hotspots import parse_source_page
from kernelwright.profile.metrics import ALIASES, SECTION_ONLY_KEYS, counters_for
from kernelwright.profile.parse import KernelProfile, aggregate_by_name, parse_raw_csv
from kernelwright.profile.resources import ResourceReport
from kernelwright.profile.sass import parse_sass

FIXTURES = Path(__file__).parent / "fixtures"
CASES = ("memory", "memory_scalar", "compute", "latency", "latency_chase", "launch", "host")


def _merged(stage1: str, stage2: str) -> list[KernelProfile]:
    first = aggregate_by_name(parse_raw_csv(stage1))
    second = {k.name: k for k in aggregate_by_name(parse_raw_csv(stage2))}
    for kernel in first:
        if kernel.name in second:
            kernel.metrics = {**second[kernel.name].metrics, **kernel.metrics}
    return first


def _evidence_kernels() -> list[KernelProfile]:
    found = []
    for case in CASES:
        folder = FIXTURES / "h100" / case
        found += _merged((folder / "stage1.csv").read_text(), (folder / "stage2.csv").read_text())
    hand = FIXTURES / "handwritten"
    found += _merged((hand / "stage1_raw.csv").read_text(), (hand / "stage2_memory_raw.csv").read_text())
    # every name present, in two sizes: no rule returns early for want of a number
    for value in (5.0, 95.0):
        found.append(KernelProfile("all_names", duration_ns=1e5, grid=(4, 1, 1), block=(128, 1, 1), regs=64,
                                   smem=1024, metrics={n: value for names in ALIASES.values() for n in names}))
    return found


@pytest.fixture
def recorded_reads(monkeypatch) -> set[str]:
    reads: set[str] = set()
    original = KernelProfile.get

    def get(self, key):
        reads.add(key)
        return original(self, key)

    monkeypatch.setattr(KernelProfile, "get", get)
    return reads


def test_every_key_read_at_run_time_is_in_the_derived_collection(recorded_reads):
    kernels = _evidence_kernels()  # parsing reads too (duration, registers, shared memory)
    sass = parse_sass(gzip.open(FIXTURES / "toolchain" / "triton_add_sass.txt.gz", "rt").read())[0]
    spots = parse_source_page((FIXTURES / "handwritten" / "source_page.csv").read_text())["serial_kernel"]
    resources = ResourceReport("k", registers=64, spill_store_bytes=8, spill_load_bytes=8, source="ptxas")
    for kernel, cls, share in product(kernels, ("memory", "compute", "latency"), (0.4, 1.0)):
        classify_kernel(kernel)
        forced = Classification(Bottleneck(cls), "forced", {})
        kernel_findings(KernelEvidence(kernel, forced, share, resources, sass, spots))
    assert recorded_reads and recorded_reads <= set(ALIASES)  # rules ask by short key, never by raw name
    assert not recorded_reads - set(needs.keys_read()), recorded_reads - set(needs.keys_read())


def test_the_scan_finds_literals_and_fstring_prefixes():
    source = 'def rule(p):\n    return p.get("gst_bytes"), [p.get(f"occ_limit_{k}") for k in ("a",)], "not_a_key"\n'
    keys = needs.keys_in_source(source)
    assert "gst_bytes" in keys and {"occ_limit_registers", "occ_limit_smem", "occ_limit_warps"} <= keys
    assert "not_a_key" not in keys


def test_a_key_no_reader_reads_is_not_collected():
    keys = set(needs.keys_read())
    assert {"gst_requests", "fadd_thread_inst", "issue_active_pct"}.isdisjoint(keys)
    collected = needs.collection()
    assert "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum" not in collected.counters
    assert collected.counters == tuple(counters_for(needs.keys_read()))
    assert not set(collected.counters) & {n for k in SECTION_ONLY_KEYS for n in ALIASES[k]}


def test_the_numbers_prompts_quote_are_collected():
    from kernelwright.search.verdict_facts import NUMBER_KEYS

    assert set(NUMBER_KEYS) <= set(needs.keys_read())


def test_an_unreadable_reader_makes_the_whole_catalog_count(monkeypatch, tmp_path):
    class Gone:
        __file__ = str(tmp_path / "missing.py")

    needs.keys_read.cache_clear()
    monkeypatch.setattr(needs, "READERS", (Gone,))
    try:
        assert needs.keys_read() == tuple(ALIASES)
    finally:
        needs.keys_read.cache_clear()
