"""A batch run takes, on resume, a verdict judged again after a system error (search/drivers/rejudged.py).

Real sessions (exchange prompts answered by hand, batch verdict files written by hand: no model and
no judge process run); the store, `runs show --json` and `kernelwright report --json` are read back.
"""
from __future__ import annotations

import json

from search_scripts import code_text
from typer.testing import CliRunner

from kernelwright.cli.app import app
from kernelwright.judge.scheduling.batch import REJUDGED, verdict_system_error
from kernelwright.judge.verdict import INFO, Baselines, Flag, TimingStats, TrialResult, Verdict
from kernelwright.search.drivers.modes import run_optimization
from kernelwright.search.drivers.session import RunOptions
from kernelwright.search.settings import Settings
from kernelwright.store import RunStore

PLAN = ('```json\n{"steps": [{"region": "Model.forward", "change": "one relu kernel"}],'
        ' "approach": "one pass relu"}\n```')
OOM = ("internal judge error: Traceback (most recent call last):\n"
       "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 12.00 GiB.")


def oom_verdict(name: str) -> str:
    """Hand-written: out of GPU memory while the GPU was shared (no oom_alone flag): a system error."""
    return Verdict(problem="relu", candidate=name, rules="kernelbench", status="error", stage="check", error=OOM, device="cuda").to_json()


def wrong_verdict(name: str) -> str:
    """Hand-written: the candidate's own failure (a wrong result)."""
    return Verdict(problem="relu", candidate=name, rules="kernelbench", status="fail", stage="check", error="max abs err 3",
                   trials=[TrialResult(0, 42, "given", False, message="max abs err 3")], device="cuda").to_json()


def rejudged_pass(name: str) -> str:
    """Hand-written: judged again by `judge --batch --retry-errors`, correct, 2.0x over eager."""
    timing = TimingStats(median_ms=0.5, iqr_ms=0.01, mean_ms=0.5, min_ms=0.49, max_ms=0.6, n=50, method="cuda_events")
    eager = TimingStats(median_ms=1.0, iqr_ms=0.01, mean_ms=1.0, min_ms=0.99, max_ms=1.1, n=50, method="cuda_events")
    return Verdict(problem="relu", candidate=name, rules="kernelbench", status="pass", stage="done",
                   trials=[TrialResult(0, 42, "given", True), TrialResult(1, 43, "signed", True)],
                   timing=timing, baselines=Baselines(eager=eager), speedup={"eager": 2.0}, device="cuda",
                   environment={"gpu": "hand-written test GPU", "torch": "0.0"},
                   flags=[Flag(REJUDGED, INFO, "judged again after a system error: out of GPU memory")]).to_json()


def answer_exchange(run_dir, text: str) -> None:
    folder = run_dir / "exchange"
    waiting = [json.loads(p.read_text()) for p in folder.glob("*.request.json")]
    waiting = [w for w in waiting if not (folder / w["answer_file"]).exists()]
    assert len(waiting) == 1
    (folder / waiting[0]["answer_file"]).write_text(text)


def judged_once(tmp_path, kernelbench, first_verdict: str):
    """A batch run of one candidate (c1), no repairs: its first verdict stored, the search finished."""
    run_dir = tmp_path / "run"
    options = RunOptions(problem=str(kernelbench / "level1" / "19_ReLU.py"), llm="exchange", eval_mode="batch",
                         settings=Settings(strategy="greedy", drafts=1, iterations=1, parallel=1, skills_k=0,
                                           tune=False, max_repairs=0),
                         overrides={"batch_size": 16, "dim": 64}, run_dir=str(run_dir), target="h100")
    assert run_optimization(options).pending_prompts
    answer_exchange(run_dir, PLAN)
    assert run_optimization(RunOptions(resume=str(run_dir))).pending_prompts
    answer_exchange(run_dir, code_text(256))
    waiting = run_optimization(RunOptions(resume=str(run_dir)))
    assert [p.name for p in waiting.pending_evals] == ["c1.request.json"]
    (run_dir / "evals" / "c1.verdict.json").write_text(first_verdict)
    done = run_optimization(RunOptions(resume=str(run_dir)))
    assert done.status == "done" and done.best_id is None
    return run_dir


def stored(run_dir):
    with RunStore.in_dir(run_dir, create=False) as store:
        run = store.run()
        rows = store.verdict_rows(run["id"])
        nodes = {c["id"]: {k: v for k, v in c.items() if k != "updated"} for c in store.candidates(run["id"])}
        return (run, nodes, rows,
                [e.kind for e in store.journal(run["id"])], store.verdict(run["id"], "c1"))


def test_a_rejudged_verdict_replaces_a_stored_system_error_on_resume(tmp_path, kernelbench):
    run_dir = judged_once(tmp_path, kernelbench, oom_verdict("c1"))
    run, nodes, first_rows, journal, verdict = stored(run_dir)
    assert nodes["c1"]["status"] == "fail" and run["best_candidate"] is None and "amend" not in journal
    assert verdict_system_error(verdict).startswith("out of GPU memory on a GPU that may have been shared")

    (run_dir / "evals" / "c1.verdict.json").write_text(rejudged_pass("c1"))  # judge --batch --retry-errors
    again = run_optimization(RunOptions(resume=str(run_dir)))
    assert again.status == "done" and again.best_id == "c1" and again.best_speedup == 2.0
    run, nodes, rows, journal, verdict = stored(run_dir)
    assert verdict["status"] == "pass" and any(f["code"] == REJUDGED for f in verdict["flags"])
    assert [(r["candidate_id"], r["status"], r["speedup_eager"]) for r in rows] == [("c1", "pass", 2.0)]
    assert rows[0]["created"] == first_rows[0]["created"]  # replaced in place: the order of evaluations stays
    assert nodes["c1"]["status"] == "pass" and nodes["c1"]["speedup"] == 2.0
    assert run["best_candidate"] == "c1" and run["best_speedup"] == 2.0 and journal.count("amend") == 1
    assert "2.00x vs eager PyTorch" in again.best_path.read_text()

    shown = CliRunner().invoke(app, ["runs", "show", str(run_dir), "--json"])
    assert shown.exit_code == 0, shown.output
    record = json.loads(shown.stdout)
    assert record["best_candidate"] == "c1" and record["best_speedup"] == 2.0
    assert {c["id"]: (c["status"], c["speedup"]) for c in record["candidates"]}["c1"] == ("pass", 2.0)
    report = CliRunner().invoke(app, ["report", str(run_dir), "--out", str(tmp_path / "report"), "--json"])
    assert report.exit_code == 0, report.output
    problem = json.loads(report.stdout)["problems"][0]
    result = problem["results"][problem["rules"]]
    assert (result["outcome"], result["best_id"], result["speedup"]["eager"]) == ("correct", "c1", 2.0)

    later = run_optimization(RunOptions(resume=str(run_dir)))  # a second resume changes nothing
    assert later.best_id == "c1" and stored(run_dir)[1:4] == (nodes, rows, journal)
    (run_dir / "evals" / "c1.verdict.json").unlink()  # a replay tells the journaled amendment, not the folder
    last = run_optimization(RunOptions(resume=str(run_dir)))
    assert last.best_id == "c1" and last.best_speedup == 2.0 and stored(run_dir)[1:4] == (nodes, rows, journal)


def test_a_rejudged_verdict_never_replaces_the_candidates_own_verdict(tmp_path, kernelbench):
    run_dir = judged_once(tmp_path, kernelbench, wrong_verdict("c1"))
    before = stored(run_dir)
    assert verdict_system_error(before[4]) is None
    (run_dir / "evals" / "c1.verdict.json").write_text(rejudged_pass("c1"))
    again = run_optimization(RunOptions(resume=str(run_dir)))
    assert again.best_id is None
    after = stored(run_dir)
    assert after[4] == before[4] and after[1] == before[1] and "amend" not in after[3]
    assert after[1]["c1"]["status"] == "fail"


def test_a_passing_verdict_with_a_baseline_out_of_memory_is_a_system_error():
    passed = json.loads(rejudged_pass("c1"))
    assert verdict_system_error(passed) is None
    passed["baselines"]["errors"] = {"compile_default": "torch.OutOfMemoryError: CUDA out of memory."}
    assert "compile_default baseline(s) ran out of GPU memory" in verdict_system_error(passed)
    passed["baselines"]["errors"] = {"compile_default": "inductor failed: no C compiler"}
    assert verdict_system_error(passed) is None
