"""An autotune run (no LLM) takes, on resume, a verdict judged again after a system error
(search/drivers/autotune.py `take_rejudged`, by the rule of search/drivers/rejudged.py), alone and in
a suite of two.

Real sessions of the template tuner writing real batch requests; the verdict files are hand-written
(the cases of a GPU shared by several judges: a baseline or the check out of GPU memory, then
`judge --batch --retry-errors`), no judge process runs. The store, `runs show --json` and `kernelwright
report --json` are read back.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelwright.cli.app import app
from kernelwright.judge.scheduling import batch, batch_folder
from kernelwright.judge.verdict import INFO, Baselines, Flag, TimingStats, TrialResult, Verdict
from kernelwright.search.budget import Limits
from kernelwright.search.drivers.autotune import run_autotune
from kernelwright.search.drivers.session import RunOptions
from kernelwright.search.drivers.suite import resume_suite, run_suite
from kernelwright.store import RunStore
from kernelwright.store.suite import read_manifest
from tiny_problem import FAST, write_problems

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 6.00 GiB."
TRIALS = [TrialResult(0, 42, "given", True), TrialResult(1, 43, "signed", True)]


def timing(ms: float) -> TimingStats:
    return TimingStats(median_ms=ms, iqr_ms=0.01, mean_ms=ms, min_ms=ms, max_ms=ms, n=50, method="cuda_events")


def baseline_oom(name: str) -> str:
    """Hand-written: correct and timed, but its eager baseline ran out of GPU memory on a shared
    GPU (the case of 19_ReLU in the H100 suite kb-l12): no speedup, a system error."""
    return Verdict(problem="relu", candidate=name, rules="kernelbench", status="pass", stage="done",
                   trials=TRIALS, timing=timing(0.52), baselines=Baselines(errors={"eager": f"eager baseline "
                                                                                   f"failed: {OOM}"}),
                   device="cuda").to_json()


def check_oom(name: str) -> str:
    """Hand-written: out of GPU memory in the check while the GPU was shared: not judged."""
    return Verdict(problem="relu", candidate=name, rules="kernelbench", status="error", stage="check",
                   error=f"internal judge error: {OOM}", device="cuda").to_json()


def wrong(name: str) -> str:
    """Hand-written: the candidate's own failure (a wrong result)."""
    return Verdict(problem="relu", candidate=name, rules="kernelbench", status="fail", stage="check",
                   error="max abs err 3", trials=[TrialResult(0, 42, "given", False, message="max abs err 3")],
                   device="cuda").to_json()


def rejudged_pass(name: str, ms: float, speedup: float) -> str:
    """Hand-written: judged again by `judge --batch --retry-errors`: correct, `speedup` over eager."""
    return Verdict(problem="relu", candidate=name, rules="kernelbench", status="pass", stage="done",
                   trials=TRIALS, timing=timing(ms), baselines=Baselines(eager=timing(ms * speedup)),
                   speedup={"eager": speedup}, device="cuda", environment={"gpu": "hand-written test GPU"},
                   flags=[Flag(batch.REJUDGED, INFO, "judged again after a system error: out of GPU memory")]).to_json()


@pytest.fixture
def problems(tmp_path) -> list[Path]:
    return write_problems(tmp_path / "problems")


def answer(folder: Path, text_of) -> list[str]:
    """Write a verdict for every request in `folder` that has none: `text_of(request name)`."""
    names = sorted(p.name[:-len(batch_folder.REQUEST_SUFFIX)] for p in folder.glob(f"*{batch_folder.REQUEST_SUFFIX}")
                   if not batch_folder.verdict_path(p).exists())
    for name in names:
        (folder / f"{name}{batch_folder.VERDICT_SUFFIX}").write_text(text_of(name))
    return names


def stored(run_dir: Path):
    with RunStore.in_dir(run_dir, create=False) as store:
        run = store.run()
        rows = [(r["candidate_id"], r["status"], r["speedup_eager"], r["created"]) for r in store.verdict_rows(run["id"])]
        nodes = {c["id"]: {k: v for k, v in c.items() if k != "updated"} for c in store.candidates(run["id"])}
        return run, nodes, rows, [e.kind for e in store.journal(run["id"])], store.verdict(run["id"], "t0")


def report_of(target: Path, out: Path) -> dict[str, dict]:
    """`kernelwright report --json`: per problem, its result under the rules it was searched with."""
    result = CliRunner().invoke(app, ["report", str(target), "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    return {p["name"]: p["results"][p["rules"]] for p in json.loads(result.stdout)["problems"]}


def test_an_autotune_run_takes_a_rejudged_verdict_on_resume(problems, tmp_path):
    run_dir = tmp_path / "run"
    options = RunOptions(problem=str(problems[0]), judge=FAST, limits=Limits(max_evals=1), eval_mode="batch",
                         run_dir=str(run_dir))
    assert run_autotune(options).status == "paused"
    [name] = answer(run_dir / "evals", baseline_oom)
    first = run_autotune(RunOptions(resume=str(run_dir)))
    assert first.status == "done" and first.best_id == "t0" and first.best_speedup is None
    run, nodes, first_rows, journal, verdict = stored(run_dir)
    assert batch.verdict_system_error(verdict).startswith("correct, but its eager baseline(s) ran out of GPU memory")
    assert nodes["t0"]["speedup"] is None and nodes["t0"]["node"]["measurement"]["time_ms"] == 0.52
    assert "amend" not in journal and run["best_speedup"] is None

    (run_dir / "evals" / f"{name}.verdict.json").write_text(rejudged_pass(name, 0.5, 2.0))  # --retry-errors
    again = run_autotune(RunOptions(resume=str(run_dir)))
    assert again.status == "done" and again.best_id == "t0" and again.best_speedup == 2.0
    run, nodes, rows, journal, verdict = stored(run_dir)
    assert verdict["status"] == "pass" and any(f["code"] == batch.REJUDGED for f in verdict["flags"])
    assert rows == [("t0", "pass", 2.0, first_rows[0][3])]  # replaced in place
    assert nodes["t0"]["status"] == "pass" and nodes["t0"]["speedup"] == 2.0
    assert nodes["t0"]["node"]["measurement"]["time_ms"] == 0.5  # the tuner's record follows
    assert run["best_candidate"] == "t0" and run["best_speedup"] == 2.0 and journal == ["amend"]
    assert "2.00x vs eager PyTorch" in again.best_path.read_text()
    assert len(list((run_dir / "evals").glob("*.request.json"))) == 1  # nothing asked again

    shown = CliRunner().invoke(app, ["runs", "show", str(run_dir), "--json"])
    assert shown.exit_code == 0, shown.output
    record = json.loads(shown.stdout)
    assert (record["best_candidate"], record["best_speedup"]) == ("t0", 2.0)
    [result] = report_of(run_dir, tmp_path / "report").values()
    assert (result["outcome"], result["best_id"], result["speedup"]["eager"]) == ("correct", "t0", 2.0)

    later = run_autotune(RunOptions(resume=str(run_dir)))  # a second resume changes nothing
    assert later.best_speedup == 2.0 and stored(run_dir)[1:4] == (nodes, rows, journal)
    (run_dir / "evals" / f"{name}.verdict.json").unlink()  # the store holds the amendment, not the folder
    last = run_autotune(RunOptions(resume=str(run_dir)))
    assert last.status == "done" and last.best_speedup == 2.0 and stored(run_dir)[1:4] == (nodes, rows, journal)


def test_a_suite_of_two_autotune_runs_takes_its_rejudged_verdicts(problems, tmp_path):
    suite = tmp_path / "suite"
    first = run_suite(problems, RunOptions(judge=FAST, limits=Limits(max_evals=1), eval_mode="batch",
                                           run_dir=str(suite)), no_model=True)
    assert first.exit_code == 75
    folder = suite / "evals"
    names = answer(folder, lambda n: baseline_oom(n) if n.startswith("relu_x2--") else check_oom(n))
    judged = resume_suite(suite, RunOptions())
    outcomes = {e.name: o for e, o in judged.results}
    assert outcomes["relu_x2"].status == "done" and outcomes["relu_x2"].best_speedup is None
    assert outcomes["relu_x3"].status == "failed" and outcomes["relu_x3"].best_id is None  # nothing passed
    before = report_of(suite, tmp_path / "before")
    assert before["relu_x2"]["outcome"] == "correct" and before["relu_x2"]["speedup"].get("eager") is None
    assert before["relu_x3"]["outcome"] == "not judged"

    for name in names:  # `judge --batch DIR --retry-errors` judged both again
        scale = 2.0 if name.startswith("relu_x2--") else 3.0
        (folder / f"{name}.verdict.json").write_text(rejudged_pass(name, 0.5, scale))
    again = resume_suite(suite, RunOptions())
    assert again.exit_code == 0
    outcomes = {e.name: o for e, o in again.results}
    assert {n: (o.status, o.best_id, o.best_speedup) for n, o in outcomes.items()} == {
        "relu_x2": ("done", "t0", 2.0), "relu_x3": ("done", "t0", 3.0)}  # the failed run is done now
    after = report_of(suite, tmp_path / "after")
    assert {n: (r["outcome"], r["speedup"]["eager"]) for n, r in after.items()} == {
        "relu_x2": ("correct", 2.0), "relu_x3": ("correct", 3.0)}
    states = {e.name: stored(suite / e.name) for e in read_manifest(suite).entries}
    assert all(s[3] == ["amend"] for s in states.values())
    assert states["relu_x3"][1]["t0"]["node"]["measurement"]["status"] == "pass"

    resume_suite(suite, RunOptions())  # a second resume changes nothing
    assert {e.name: stored(suite / e.name)[1:4] for e in read_manifest(suite).entries} == \
        {n: s[1:4] for n, s in states.items()}
    assert report_of(suite, tmp_path / "later") == after


def test_a_rejudged_file_never_replaces_an_instances_own_verdict(problems, tmp_path):
    run_dir = tmp_path / "run"
    options = RunOptions(problem=str(problems[0]), judge=FAST, limits=Limits(max_evals=1), eval_mode="batch",
                         run_dir=str(run_dir))
    run_autotune(options)
    [name] = answer(run_dir / "evals", wrong)
    assert run_autotune(RunOptions(resume=str(run_dir))).status == "failed"
    before = stored(run_dir)
    (run_dir / "evals" / f"{name}.verdict.json").write_text(rejudged_pass(name, 0.5, 2.0))
    again = run_autotune(RunOptions(resume=str(run_dir)))
    after = stored(run_dir)
    assert again.status == "failed" and again.best_id is None
    assert after[4] == before[4] and after[1] == before[1] and after[3] == []


def test_a_paused_autotune_run_follows_a_rejudged_verdict(problems, tmp_path):
    """The round is judged in part (a GPU call ran out of time): the run pauses again, and its best
    instance, answered by the store this session, still follows the amendment."""
    run_dir = tmp_path / "run"
    options = RunOptions(problem=str(problems[0]), judge=FAST, limits=Limits(max_evals=2), eval_mode="batch",
                         run_dir=str(run_dir))
    assert len(run_autotune(options).pending_evals) == 2
    folder = run_dir / "evals"
    first = min(folder.glob("*.request.json"), key=batch_folder.request_priority).name[:-len(batch_folder.REQUEST_SUFFIX)]
    (folder / f"{first}.verdict.json").write_text(baseline_oom(first))
    paused = run_autotune(RunOptions(resume=str(run_dir)))
    assert paused.status == "paused" and len(paused.pending_evals) == 1 and paused.best_speedup is None
    (folder / f"{first}.verdict.json").write_text(rejudged_pass(first, 0.5, 2.0))
    again = run_autotune(RunOptions(resume=str(run_dir)))
    assert again.status == "paused" and (again.best_id, again.best_speedup) == ("t0", 2.0)
    run, nodes, _, journal, _ = stored(run_dir)
    assert (run["best_candidate"], run["best_speedup"], journal) == ("t0", 2.0, ["amend"])
    assert "2.00x vs eager PyTorch" in (run_dir / "best_model_new.py").read_text()
