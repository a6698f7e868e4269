"""Stall hot spots from ncu's source page: ranking, per-reason stalls, the load waited for, launches summed.

The small pages written inline below are **hand-written** in the layout of ncu 2025.3's
`--page source --csv --print-source sass` export (columns as in the H100 recordings, fewer of
them); the real pages are exercised in test_h100_fixtures.py.
"""
from pathlib import Path

import pytest

from kernelwright.profile.hotspots import parse_source_page

HANDWRITTEN = Path(__file__).parent / "fixtures" / "handwritten"
HEADER = ('"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed",'
          '"stall_long_sb","stall_wait","stall_long_sb (Not Issued)"')


def page(name: str, rows: list[str]) -> str:
    return "\n".join([f'"Kernel Name","{name}",', HEADER] + rows) + "\n"


CHASE_ROWS = [  # a loop: the LEA needs the index the LDG of the previous iteration loaded
    '"0x0100","LEA R4, P1, R2, UR6, 0x2","900","64","890","10","880"',
    '"0x0110","LDG.E R2, desc[UR4][R4.64]","50","64","0","50","0"',
    '"0x0120","FADD R9, |R8|, -RZ","300","64","300","0","290"',
    '"0x0130","@!P0  LDG.E.128 R4, desc[UR4][R6.64]","0","64","0","0","0"',
    '"0x0140","FMUL R10, R7, R7","30","64","0","30","0"',
]


def test_source_page_hotspots_rank_stall_samples():
    pages = parse_source_page((HANDWRITTEN / "source_page.csv").read_text(), top=2)
    (spots,) = pages.values()
    assert [s.source for s in spots] == ["LDG.E R5, desc[UR4][R2.64]", "FFMA R7, R5, R6, R7"]
    assert spots[0].samples == 1204 and spots[0].executed == 4096
    assert spots[0].share == pytest.approx(1204 / 1537)
    assert spots[0].stall == "" and spots[0].waits_on == ""  # no per-reason columns in this page


def test_source_page_without_table_is_empty():
    assert parse_source_page("==PROF== nothing here\n") == {}


def test_each_hot_spot_has_its_dominant_stall_and_the_load_it_waits_for():
    spots = parse_source_page(page("chase", CHASE_ROWS))["chase"]
    lea, fadd, load, fmul = spots[:4]
    assert lea.source.startswith("LEA") and lea.stall == "long_scoreboard"
    assert lea.waits_on == "LDG.E R2, desc[UR4][R4.64]"  # loop-carried: found by wrapping around
    assert fadd.stall == "long_scoreboard" and fadd.waits_on == ""  # R8 comes from no load
    assert load.stall == "wait" and load.waits_on == ""  # only scoreboard waits name a producer
    assert fmul.stall == "wait"
    assert lea.share == pytest.approx(900 / 1280)


def test_a_wide_load_feeds_every_register_it_writes():
    rows = CHASE_ROWS[3:] + ['"0x0150","FFMA R11, R7, R7, R11","40","64","40","0","40"']
    (spot,) = parse_source_page(page("k", rows), top=1)["k"]
    assert spot.source.startswith("FFMA") and spot.waits_on == "@!P0  LDG.E.128 R4, desc[UR4][R6.64]"  # R4..R7


def test_launches_of_one_kernel_are_summed():
    again = [r.replace('"900"', '"100"').replace('"300"', '"1300"') for r in CHASE_ROWS]
    spots = parse_source_page(page("chase", CHASE_ROWS) + page("chase", again))["chase"]
    assert spots[0].source.startswith("FADD") and spots[0].samples == 1600
    assert spots[1].samples == 1000 and spots[1].executed == 128


def test_ties_keep_address_order_whatever_launch_lists_an_instruction_first():
    first = page("k", ['"0x0200","IADD3 R1, R1, 0x1, RZ","5","1","0","5","0"'])
    second = page("k", ['"0x0100","IMAD R2, R2, 0x2, RZ","5","1","0","5","0"'])
    assert [s.address for s in parse_source_page(first + second)["k"]] == ["0x0100", "0x0200"]
    assert [s.address for s in parse_source_page(second + first)["k"]] == ["0x0100", "0x0200"]


def test_a_page_of_pc_sampling_alone_is_read_whichever_way_its_columns_are_labelled():
    """Collected with the PC-sampling metrics only (hotspots.SOURCE_METRICS, no SourceCounters section),
    the page may label its columns by metric name and carry no executed-instruction counts."""
    header = ('"Address","Source","smsp__pcsamp_sample_count","smsp__pcsamp_warps_issue_stalled_long_scoreboard",'
              '"smsp__pcsamp_warps_issue_stalled_wait","smsp__pcsamp_warps_issue_stalled_long_scoreboard_not_issued"')
    rows = ['"0x0100","LEA R4, P1, R2, UR6, 0x2","900","890","10","880"',
            '"0x0110","LDG.E R2, desc[UR4][R4.64]","50","0","50","0"']
    (top, second) = parse_source_page("\n".join(['"Kernel Name","chase_kernel",', header] + rows))["chase_kernel"]
    assert top.stall == "long_scoreboard" and top.waits_on.startswith("LDG.E R2") and top.executed is None
    assert second.stall == "wait"
    labelled = parse_source_page(page("k", ['"0x0100","LEA R4, P1, R2, UR6, 0x2","900","64","890","10","880"']))
    assert labelled["k"][0].stall == "long_scoreboard"
