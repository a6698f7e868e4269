"""The results report from run stores: the best candidate per rule set, the search tree's best
path, per-level tables, rule sets some runs were never re-judged under, published numbers with
their source, and a page that needs no network.

Verdicts here are written by hand for the tests (no judge ran); they only feed the report.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kernelwright.report.collect import collect_problem, not_started
from kernelwright.report.leaderboard import ALL, build_report, write_report
from kernelwright.report.published import QUOTED, load_baselines
from kernelwright.store import RunStore

PROBLEM = "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"


def verdict(cid: str, status: str, eager: float | None = None, compiled: float | None = None, rules: str = "kernelbench",
            ms: float = 1.0, floor_pct: float | None = None, wall_s: float = 12.0) -> dict:
    return {"problem": "p", "candidate": cid, "status": status, "stage": "done" if status == "pass" else "check",
            "rules": rules, "speedup": {k: v for k, v in (("eager", eager), ("compile_default", compiled)) if v},
            "timing": {"median_ms": ms, "method": "cuda_events"} if status == "pass" else None,
            "floor": {"pct_of_floor": floor_pct} if floor_pct else None, "device": "cuda",
            "baselines": {"eager": {"median_ms": 2.0}, "compile_default": {"median_ms": 1.5}},
            "environment": {"gpu": "NVIDIA H100 80GB HBM3", "capability": "9.0", "torch": "2.11.0", "triton": "3.6.0"},
            "process": {"wall_s": wall_s}, "trials": [{"ok": status == "pass"}]}


def make_run(folder: Path, name: str, rows: list[tuple], level: str = "level1", spend: dict | None = None) -> Path:
    """rows: (candidate id, parent id, status, verdict dict or None, plan)."""
    run_dir = folder / name
    problem = folder / level / f"{name}.py"
    problem.parent.mkdir(parents=True, exist_ok=True)
    problem.write_text(PROBLEM)
    with RunStore.in_dir(run_dir) as store:
        store.create_run(name, problem_path=str(problem), problem_name=name, problem_hash="0" * 64,
                         problem_source=PROBLEM, settings={"judge": {"rules": "kernelbench"},
                                                           "search": {"objective": "eager"}})
        store.upsert_candidates(name, [{"id": "c0", "action": "reference", "status": "reference", "code": PROBLEM,
                                        "speedup": 1.0}])
        for cid, parent, status, data, plan in rows:
            store.upsert_candidates(name, [{"id": cid, "parent_id": parent, "search_parent": "c0", "action": "draft",
                                            "status": status, "code": f"# {cid}\n", "plan": plan,
                                            "approach_key": f"approach {cid}",
                                            "speedup": (data or {}).get("speedup", {}).get("eager")}])
            if data:
                store.save_verdict(name, cid, data)
        store.update_run(name, status="done", spend=spend or {"calls": 6, "tokens": 9000, "usd": 0.3})
    return run_dir


def collect(run_dir: Path, level: str = "level1"):
    with RunStore.in_dir(run_dir, create=False) as store:
        return collect_problem(store, store.run()["id"], run_dir.name, level, str(run_dir))


@pytest.fixture
def problems(tmp_path):
    fast = make_run(tmp_path, "fast", [
        ("c1", "c0", "pass", verdict("c1", "pass", 1.5, 1.2, floor_pct=30.0), "plan one"),
        ("c2", "c1", "pass", verdict("c2", "pass", 3.0, 2.0, floor_pct=60.0), "plan two"),
        ("c3", "c0", "fail", verdict("c3", "fail"), "plan three")])
    with RunStore.in_dir(fast, create=False) as store:  # re-judged under strict: only c1 holds there
        store.save_verdict("fast", "c1", verdict("c1", "pass", 1.4, 1.1, rules="strict"))
        store.save_verdict("fast", "c2", verdict("c2", "fail", rules="strict"))
    broken = make_run(tmp_path, "broken", [("c1", "c0", "fail", verdict("c1", "fail"), "")], level="level2")
    slow = make_run(tmp_path, "slow", [("c1", "c0", "pass", verdict("c1", "pass", 0.5, 0.4), "")], level="level2")
    return [collect(fast), collect(broken, "level2"), collect(slow, "level2"),
            not_started("bad", "level2", str(tmp_path / "bad.py"), str(tmp_path / "bad"), "broken problem file")]


def test_collect_takes_the_fastest_correct_candidate_and_marks_its_path(problems):
    fast = problems[0]
    assert fast.result().best_id == "c2" and fast.result().speedup == {"eager": 3.0, "compile_default": 2.0}
    assert fast.result("strict").best_id == "c1" and fast.result("strict").speedup["eager"] == 1.4
    assert {n.id for n in fast.tree if n.on_best_path} == {"c0", "c1", "c2"}
    assert fast.curve == [1.5, 3.0, 3.0]  # best so far after each evaluation (search rules)
    assert fast.spend["judge_s"] == pytest.approx(5 * 12.0)  # every judge worker, re-judged ones included
    assert fast.baselines_ms == {"eager": 2.0, "compile_default": 1.5}
    assert fast.best_code == "# c2\n" and any("3.00x vs eager" in line for line in fast.best_evidence)
    # never re-judged under strict, with a correct candidate: unknown there; a failed problem fails everywhere
    assert not problems[2].result("strict").known and problems[1].result("strict").known


def test_the_report_per_level_and_per_rule_set(problems, tmp_path):
    report = build_report(problems, title="t", target=str(tmp_path))
    assert report.rule_sets == ["kernelbench", "strict"] and report.levels == ["level1", "level2"]
    overall = report.summaries["kernelbench"][ALL]
    assert (overall.n, overall.correct) == (4, 2)  # the problem that never started counts, as failed
    eager = overall.by_baseline["eager"]
    assert eager.geomean_all == pytest.approx((3.0 * 0.5 * 1.0 * 1.0) ** 0.25)
    assert eager.geomean_correct == pytest.approx((3.0 * 0.5) ** 0.5)
    assert eager.fast["1"] == pytest.approx(1 / 4)
    level2 = report.summaries["kernelbench"]["level2"]
    assert (level2.n, level2.correct) == (3, 1)
    strict = report.summaries["strict"][ALL]
    assert report.unknown["strict"] == 1 and strict.n == 3  # "slow" was never re-judged: left out, said so
    assert strict.by_baseline["eager"].geomean_all == pytest.approx((1.4 * 1.0 * 1.0) ** (1 / 3))
    assert any("never re-judged" in note for note in report.notes)
    assert report.summaries["kernelbench"]["level1"].median_pct_of_floor == pytest.approx(60.0)


def test_written_report_is_json_markdown_and_a_self_contained_page(problems, tmp_path):
    report = build_report(problems, title="t", target=str(tmp_path), pending={"fast": 0, "slow": 2})
    paths = write_report(report, tmp_path / "out")
    data = json.loads(paths["json"].read_text())
    assert data["summaries"]["kernelbench"]["all"]["correct"] == 2
    assert data["definitions"]["geomean_all"].startswith("geometric mean over all judged problems")
    markdown = paths["markdown"].read_text()
    assert "| fast_1.5 vs eager |" in markdown and "## Results under `strict`" in markdown
    assert "partial: 2 evaluation(s) still wait" in markdown
    page = paths["html"].read_text()
    assert page.count("<svg") >= 4  # distribution, speedup vs floor, curves, sparklines
    assert 'class="onpath best"' in page and "plan two" in page
    assert not re.search(r"<script|<link|@import|url\(|src=", page)  # nothing to fetch
    assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", page)
    for quoted in QUOTED:  # published numbers carry their source and rules
        assert quoted.system in page and quoted.source in markdown
    assert "not stated in the quoted source" in page


def test_published_baselines_sit_beside_ours_with_their_source(problems, tmp_path):
    folder = tmp_path / "baseline_times" / "H100_Modal"
    folder.mkdir(parents=True)
    row = {"mean": 2.1, "hardware": "NVIDIA H100 80GB HBM3"}
    (folder / "baseline_time_torch.json").write_text(json.dumps({"level1": {"fast.py": row}}))
    (folder / "baseline_time_torch_compile_inductor_default.json").write_text(
        json.dumps({"level1": {"fast.py": {**row, "mean": 1.9}}}))
    published = load_baselines(tmp_path / "baseline_times")
    report = build_report(problems, title="t", target=str(tmp_path), published=published)
    (row,) = report.published_rows()
    assert row["ours"] == {"eager": 2.0, "compile_default": 1.5} and row["theirs"] == {"eager": 2.1,
                                                                                         "compile_default": 1.9}
    page = write_report(report, tmp_path / "out")["html"].read_text()
    assert "baselines, not results" in page and "H100_Modal" in page
    assert load_baselines(tmp_path / "nowhere") is None


def system_error(cid: str, error: str, stage: str = "check") -> dict:
    """An error verdict of the judge's own making (the H100 suite run's OOM, trimmed)."""
    return {**verdict(cid, "error"), "stage": stage, "error": error}


OOM = ("internal judge error: Traceback (most recent call last):\n  File \"guards.py\", line 227\n"
       "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 12.00 GiB.")


@pytest.fixture
def mixed(tmp_path):
    """correct, incorrect (a wrong result; a compile error beside a system error), not judged (OOM on a
    shared GPU; the reference's OOM), and one waiting for its only verdict."""
    runs = {
        "good": make_run(tmp_path, "good", [("c1", "c0", "pass", verdict("c1", "pass", 2.0, 1.0), "")]),
        "wrong": make_run(tmp_path, "wrong", [("c1", "c0", "fail", verdict("c1", "fail"), "")]),
        "broken": make_run(tmp_path, "broken", [
            ("c1", "c0", "fail", system_error("c1", OOM), ""),
            ("c2", "c0", "fail", system_error("c2", "the candidate does not load: SyntaxError", "compile"), "")]),
        "oom": make_run(tmp_path, "oom", [("c1", "c0", "fail", system_error("c1", OOM), "")], level="level2"),
        "ref": make_run(tmp_path, "ref", [("c1", "c0", "fail", system_error(
            "c1", "the reference Model (problem file) raised RuntimeError: no kernel image", "load"), "")],
            level="level2"),
        "waiting": make_run(tmp_path, "waiting", [("c1", "c0", "pending", None, "")], level="level2"),
    }
    return [collect(run, "level2" if name in ("oom", "ref", "waiting") else "level1") for name, run in runs.items()]


def test_problems_are_correct_incorrect_or_not_judged(mixed):
    by_name = {p.name: p.result() for p in mixed}
    assert [by_name[n].outcome for n in ("good", "wrong", "broken", "oom", "ref")] == [
        "correct", "incorrect", "incorrect", "not judged", "not judged"]
    assert by_name["broken"].system_errors == 1  # the compile error is the candidate's: incorrect
    assert "out of GPU memory" in by_name["oom"].error and "12.00 GiB" in by_name["oom"].error
    assert "load stage" in by_name["ref"].error


def test_rates_and_geomeans_are_over_judged_problems(mixed, tmp_path):
    report = build_report(mixed, title="t", target=str(tmp_path), pending={"waiting": 1})
    overall = report.summaries["kernelbench"][ALL]
    assert (overall.n, overall.judged, overall.not_judged, overall.correct) == (6, 3, 3, 1)
    assert overall.correct_rate == pytest.approx(1 / 3)
    eager = overall.by_baseline["eager"]
    assert eager.fast["1"] == pytest.approx(1 / 3)
    assert eager.geomean_all == pytest.approx((2.0 * 1.0 * 1.0) ** (1 / 3))  # incorrect at 1.0x, not judged out
    level2 = report.summaries["kernelbench"]["level2"]
    assert (level2.n, level2.judged, level2.correct_rate, eager.geomean_correct) == (3, 0, None, 2.0)
    assert [(p.name, why.split(":")[0]) for p, why in report.not_judged()] == [
        ("oom", "out of GPU memory on a GPU that may have been shared"), ("ref", "judge error in the load stage"),
        ("waiting", "1 evaluation(s) wait for a verdict")]
    assert any(note.startswith("3 of 6 problems judged") for note in report.notes)


def test_written_report_lists_the_problems_not_judged(mixed, tmp_path):
    report = build_report(mixed, title="t", target=str(tmp_path), pending={"waiting": 1})
    paths = write_report(report, tmp_path / "out")
    data = json.loads(paths["json"].read_text())
    assert data["summaries"]["kernelbench"]["all"]["judged"] == 3
    assert data["summaries"]["kernelbench"]["all"]["not_judged"] == 3
    assert [row["problem"] for row in data["not_judged"]["kernelbench"]] == ["oom", "ref", "waiting"]
    assert data["definitions"]["not judged"].startswith("no verdict says anything about a candidate")
    markdown = paths["markdown"].read_text()
    assert "| judged | 3 of 3 | 0 of 3 | 3 of 6 |" in markdown and "| not judged | 0 | 3 | 3 |" in markdown
    assert "## Not judged (3 of 6 problems)" in markdown and "--retry-errors" in markdown
    rows: dict[str, str] = {}  # the problems table's row of each (the first table naming it)
    for line in markdown.splitlines():
        if line.startswith("| "):
            rows.setdefault(line.split(" | ")[0].lstrip("| "), line)
    assert "| incorrect |" in rows["wrong"] and "| not judged |" in rows["oom"] and "| correct |" in rows["good"]
    page = paths["html"].read_text()
    assert '<h2 id="not-judged">Not judged (3 of 6 problems)</h2>' in page and "12.00 GiB" in page
    assert "not judged: out of GPU memory" in page  # the problem's own section says why
