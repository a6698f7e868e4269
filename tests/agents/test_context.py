"""The budgeter: sections kept, cut or dropped by priority, and the budget respected."""
from __future__ import annotations

import pytest

from kernelwright.agents.context import MARKER, REQUIRED, Section, estimate_tokens, fit_sections, trim_text

LINES = "\n".join(f"line {i:04d} " + "x" * 40 for i in range(200))


def framed(title):
    return lambda body: f"## {title}\n{body}\n"


def test_trim_modes_keep_the_promised_end_and_the_limit():
    head = trim_text(LINES, 1000, "head")
    tail = trim_text(LINES, 1000, "tail")
    middle = trim_text(LINES, 1000, "middle")
    for cut in (head, tail, middle):
        assert len(cut) <= 1000 and "characters trimmed" in cut
    assert head.startswith("line 0000") and "line 0199" not in head
    assert tail.rstrip().endswith("x" * 40) and "line 0199" in tail and "line 0000" not in tail
    assert middle.startswith("line 0000") and "line 0199" in middle
    assert trim_text("short", 1000, "head") == "short"
    with pytest.raises(ValueError):
        trim_text(LINES, 10, "sideways")


def test_trim_reports_how_much_was_cut():
    cut = trim_text(LINES, 1000, "head")
    kept = cut.split("\n…")[0]
    reported = int(cut.split("[")[1].split(" ")[0])
    assert reported == len(LINES) - len(kept)


def test_everything_fits_when_the_budget_allows():
    sections = [Section("task", REQUIRED, "reference", framed("task")),
                Section("skill:a", 50, "skill a", framed("a"), group="skills"),
                Section("skill:b", 51, "skill b", framed("b"), group="skills")]
    fitted = fit_sections(sections, budget=1000)
    assert fitted.report.included == ["task", "skill:a", "skill:b"]
    assert not fitted.report.dropped and not fitted.report.truncated
    assert fitted.texts["skills"].index("## a") < fitted.texts["skills"].index("## b")  # joined in order


def test_tiny_budget_keeps_required_and_failure_drops_skills():
    sections = [Section("task", REQUIRED, "x" * 400, framed("task"), trim="none"),
                Section("failure", 20, LINES, framed("failure"), trim="middle", min_chars=300),
                Section("skill:a", 50, LINES, framed("a"), group="skills"),
                Section("skill:b", 51, LINES, framed("b"), group="skills")]
    fitted = fit_sections(sections, budget=600, fixed_tokens=100)
    report = fitted.report
    assert report.included == ["task", "failure"]
    assert report.truncated == ["failure"]
    assert report.dropped == ["skill:a", "skill:b"]
    assert report.used_tokens <= 600 and not report.over_budget
    used = 100 + sum(estimate_tokens(t) for t in fitted.texts.values())
    assert used == report.used_tokens


def test_lower_priority_is_dropped_before_higher_even_when_listed_first():
    sections = [Section("old", 70, "y" * 2000, framed("old"), trim="none"),
                Section("recent", 10, "z" * 2000, framed("recent"), trim="none")]
    report = fit_sections(sections, budget=700).report
    assert report.included == ["recent"] and report.dropped == ["old"]


def test_a_small_section_still_fits_after_a_big_one_is_dropped():
    sections = [Section("code", 10, "c" * 8000, framed("code"), trim="none"),
                Section("digest", 40, "- tried this\n", framed("digest"))]
    report = fit_sections(sections, budget=500).report
    assert report.dropped == ["code"] and report.included == ["digest"]


def test_a_cut_too_small_to_read_is_dropped_rather_than_kept():
    sections = [Section("task", REQUIRED, "t" * 1800, framed("task"), trim="none"),
                Section("analysis", 30, LINES, framed("analysis"), min_chars=2000)]
    report = fit_sections(sections, budget=800).report
    assert report.dropped == ["analysis"]


def test_required_sections_over_budget_are_kept_and_flagged():
    sections = [Section("task", REQUIRED, "t" * 4000, framed("task"), trim="none")]
    fitted = fit_sections(sections, budget=100)
    assert fitted.report.included == ["task"] and fitted.report.over_budget


def test_required_trimmable_section_is_cut_to_fit():
    sections = [Section("failure", REQUIRED, LINES, framed("failure"), trim="middle")]
    fitted = fit_sections(sections, budget=300)
    assert fitted.report.truncated == ["failure"] and not fitted.report.over_budget
    assert estimate_tokens(fitted.texts["failure"]) <= 300
    assert fitted.texts["failure"].startswith("## failure")  # the frame survives the cut


def test_report_is_json_ready():
    import json

    report = fit_sections([Section("a", 10, "text", note="pre-cut")], budget=100).report
    data = json.loads(json.dumps(report.to_dict()))
    assert data["included"] == ["a"] and data["notes"] == {"a": "pre-cut"} and data["budget"] == 100


def test_a_cut_inside_a_code_block_closes_and_reopens_the_fence():
    code = "\n".join(f"    x{i} = load(ptr + {i})" for i in range(100))
    skill = f"## Steps\n\nDo it.\n\n## Example\n\n```python\n{code}\n```\n\n## Pitfalls\n\n- tails\n"
    for mode in ("head", "middle", "tail"):
        cut = trim_text(skill, 600, mode)
        assert len(cut) <= 600, mode
        assert cut.count("```") % 2 == 0, mode  # the rest of the prompt is not swallowed by a block
    tail = trim_text(skill, 600, "tail")
    assert tail.split("…\n", 1)[1].startswith("```\n")  # reopened before the kept code


def test_a_cut_right_after_an_opening_fence_drops_the_empty_block():
    text = "## Example\n\n```python\n" + "x = 1\n" * 200 + "```\n"
    cut = trim_text(text, len("## Example\n\n```python\n") + len(MARKER) + 12, "head")
    assert "```" not in cut and cut.startswith("## Example")
