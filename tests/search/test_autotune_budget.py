"""An autotune run's `--max-evals` counts the instances of the whole run (search/drivers/autotune.py):
a resume judges only what the budget leaves, a budget below what the run holds judges nothing,
and the best a resumed run reports (outcome, run row, best file, `runs show`, `report`) is the
best it holds, whatever the tuner's replay proposes.

The tuner is a stand-in (tests/fake_tuner.py) that replays through the run's cache and proposes
other instances under another budget, as the real one does; no judge runs.
"""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kernelwright.cli.app import app
from kernelwright.search.budget import Limits
from kernelwright.search.drivers.autotune import run_autotune
from kernelwright.search.drivers.session import RunOptions
from kernelwright.store import RunStore
from kernelwright.tune import autopilot
from fake_tuner import BASELINE_MS, TIME_MS, FakeTuner
from tiny_problem import FAST, write_problems


@pytest.fixture
def tuner(monkeypatch) -> FakeTuner:
    fake = FakeTuner()
    monkeypatch.setattr(autopilot, "optimize_without_llm", fake)
    return fake


@pytest.fixture
def problem(tmp_path):
    return write_problems(tmp_path / "problems", scales=(2,))[0]


def stored(run_dir) -> dict[str, int]:
    """candidate id -> BLOCK of every stored instance."""
    with RunStore.in_dir(run_dir, create=False) as store:
        return {row["id"]: json.loads(row["plan"])["BLOCK"] for row in store.candidates(store.run()["id"])
                if row["action"] == "tune"}


def best_of(run_dir) -> str:
    with RunStore.in_dir(run_dir, create=False) as store:
        return store.run()["best_candidate"]


def test_a_resume_with_a_lower_budget_judges_nothing_and_keeps_the_best(tuner, problem, tmp_path):
    run_dir = tmp_path / "run"
    first = run_autotune(RunOptions(problem=str(problem), run_dir=str(run_dir), judge=FAST, limits=Limits(max_evals=6)))
    blocks = stored(run_dir)
    assert first.status == "done" and len(blocks) == 6 == len(tuner.judged)
    fastest = min(blocks, key=lambda cid: TIME_MS[blocks[cid]])
    assert first.best_id == fastest == best_of(run_dir)

    assert blocks[fastest] == 64  # the replay with a budget of 3 would not propose it again

    tuner.judged.clear()
    again = run_autotune(RunOptions(resume=str(run_dir), limits=Limits(max_evals=3)))
    assert again.best_id == fastest == best_of(run_dir)  # the best never gets worse
    assert tuner.judged == [] and stored(run_dir) == blocks  # nothing judged, nothing replaced
    assert again.status == "done" and "already holds 6 judged instance(s) (--max-evals 3)" in again.detail
    assert f"candidate: {fastest} " in (run_dir / "best_model_new.py").read_text()
    assert again.best_speedup == pytest.approx(BASELINE_MS / TIME_MS[blocks[fastest]])
    assert again.snapshot["spend"]["evals"] == 6 and again.snapshot["limits"]["max_evals"] == 6  # "6 / 6 judged"
    assert again.snapshot["candidates"] == 6 and again.snapshot["passing"] == 6

    runner = CliRunner()
    shown = json.loads(runner.invoke(app, ["runs", "show", str(run_dir), "--json"]).stdout)
    report = runner.invoke(app, ["report", str(run_dir), "--json"])
    assert report.exit_code == 0, report.output
    [row] = json.loads(report.stdout[report.stdout.index("{"):])["problems"]
    assert shown["best_candidate"] == row["results"]["kernelbench"]["best_id"] == fastest


def test_a_resume_never_judges_past_the_budget_when_the_replay_proposes_other_instances(tuner, problem, tmp_path):
    run_dir = tmp_path / "run"
    run_autotune(RunOptions(problem=str(problem), run_dir=str(run_dir), judge=FAST, limits=Limits(max_evals=2)))
    before = stored(run_dir)
    tuner.judged.clear()
    resumed = run_autotune(RunOptions(resume=str(run_dir), limits=Limits(max_evals=4)))
    after = stored(run_dir)
    assert len(after) == 4 and len(tuner.judged) == 2  # two more, whatever the replay proposed
    assert {k: after[k] for k in before} == before
    assert resumed.snapshot["spend"]["evals"] == 4
    assert resumed.best_id == min(after, key=lambda cid: TIME_MS[after[cid]]) == best_of(run_dir)
