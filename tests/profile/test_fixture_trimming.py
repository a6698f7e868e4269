"""Recordings stay small: bench/profile_fixtures.py trims source pages before archiving them.

The repository travels to GPU machines under a 64 MiB limit; an untrimmed source page of one bench
case was 21 MB. Trimming is checked on the real (already trimmed) H100 pages.
"""
import gzip
import importlib.util
from pathlib import Path

import pytest

from kernelwright.profile.hotspots import parse_source_page

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures"
CHASE_PAGE = FIXTURES / "h100" / "latency_chase" / "stage2_source.csv.gz"
FIXTURES_LIMIT_BYTES = 3 * 2**20


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("profile_fixtures", REPO / "bench" / "profile_fixtures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def chase_page() -> str:
    if not CHASE_PAGE.exists():
        pytest.skip(f"H100 recording {CHASE_PAGE.name} is absent")
    return gzip.open(CHASE_PAGE, "rt").read()


def test_trimming_a_trimmed_page_changes_nothing(bench, chase_page):
    assert bench.trim_source_page(chase_page) == chase_page


def test_trimming_keeps_the_hottest_rows_and_the_loads_verbatim(bench, chase_page):
    trimmed = bench.trim_source_page(chase_page, rows=3)
    assert len(trimmed) < len(chase_page) and set(trimmed.splitlines()) <= set(chase_page.splitlines())
    full, cut = parse_source_page(chase_page, top=3)["chase_kernel"], parse_source_page(trimmed, top=3)["chase_kernel"]
    assert [(s.source, s.samples, s.stall, s.waits_on) for s in cut] == [
        (s.source, s.samples, s.stall, s.waits_on) for s in full]
    assert sum("LDG" in line for line in trimmed.splitlines()) == sum("LDG" in line for line in chase_page.splitlines())


def test_text_without_blocks_is_returned_as_is(bench):
    assert bench.trim_source_page("==PROF== no source page\n") == "==PROF== no source page\n"


def test_shrink_recording_gzips_trimmed_pages_in_place(bench, chase_page, tmp_path):
    case = tmp_path / "h100" / "latency_chase"
    case.mkdir(parents=True)
    (case / "stage2_source.csv").write_text(chase_page)
    (case / "stage1.csv").write_text("kept as is")
    (written,) = bench.shrink_recording(tmp_path / "h100")
    assert written == case / "stage2_source.csv.gz" and not (case / "stage2_source.csv").exists()
    assert gzip.open(written, "rt").read() == bench.trim_source_page(chase_page)
    assert (case / "stage1.csv").read_text() == "kept as is"
    first = written.read_bytes()
    (case / "stage2_source.csv").write_text(chase_page)
    bench.shrink_recording(tmp_path / "h100")
    assert written.read_bytes() == first  # reproducible bytes: a re-recording diffs only where data changed


def test_profile_fixtures_stay_small():
    total = sum(p.stat().st_size for p in FIXTURES.rglob("*") if p.is_file())
    assert total < FIXTURES_LIMIT_BYTES, f"tests/profile/fixtures holds {total / 2**20:.1f} MiB"
