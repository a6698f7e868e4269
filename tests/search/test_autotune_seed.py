"""The seed in a run without an LLM (search/drivers/autotune_seed.py, issue 34 point 3): written on
this CPU, judged by the real judge before the templates, stored as `s1` (action seed), and counted
for the best; the template tuner is the stand-in of tests/fake_tuner.py (its instances carry
hand-written times), so what is checked is the bookkeeping: the run's best is the fastest of the
seed and the instances, a problem no template covers ends `done` with the seed, a resume counts the
stored seed again without judging it."""
from __future__ import annotations

import pytest

from fake_tuner import TIME_MS, FakeTuner
from tiny_problem import FAST, write_problems

from kernelwright.search.budget import Limits
from kernelwright.search.drivers.autotune import run_autotune
from kernelwright.search.drivers.session import RunOptions
from kernelwright.store import RunStore
from kernelwright.tune import autopilot


@pytest.fixture
def tuner(monkeypatch) -> FakeTuner:
    monkeypatch.setenv("KW_SEED_START", "1")
    fake = FakeTuner()
    monkeypatch.setattr(autopilot, "optimize_without_llm", fake)
    return fake


def _rows(run_dir):
    with RunStore.in_dir(run_dir, create=False) as store:
        run = store.run()
        return run, {r["id"]: r for r in store.candidates(run["id"])}, store.events(run["id"])


def test_the_best_is_the_fastest_of_the_seed_and_the_tuned_instances(tuner, tmp_path):
    problem = write_problems(tmp_path / "problems", scales=(2,))[0]
    outcome = run_autotune(RunOptions(problem=str(problem), run_dir=str(tmp_path / "run"), judge=FAST,
                                      limits=Limits(max_evals=3)))
    run, rows, events = _rows(outcome.run_dir)
    seed = rows["s1"]
    assert seed["action"] == "seed" and seed["status"] == "pass" and "# origin: inductor seed" in seed["code"]
    assert (outcome.run_dir / "seed_model_new.py").read_text() == seed["code"]
    assert [e["payload"]["written"] for e in events if e["kind"] == "start"] == [True]
    times = {cid: r["node"]["measurement"]["time_ms"] for cid, r in rows.items() if r["action"] in ("seed", "tune")}
    assert len(times) == 4 and len(tuner.judged) == 3  # the seed is one evaluation besides --max-evals
    assert outcome.status == "done" and outcome.best_id == min(times, key=times.get) == run["best_candidate"]

    again = run_autotune(RunOptions(resume=str(outcome.run_dir), limits=Limits(max_evals=3)))
    assert again.best_id == outcome.best_id and not [e for e in _rows(outcome.run_dir)[2] if e["kind"] == "start"][1:]


def test_a_problem_no_template_covers_is_done_with_the_seed(tuner, monkeypatch, tmp_path):
    def no_template(problem_path, **kwargs):
        return autopilot.AutopilotResult("relu_x2", False, "no template in the library matches relu_x2")

    monkeypatch.setattr(autopilot, "optimize_without_llm", no_template)
    problem = write_problems(tmp_path / "problems", scales=(2,))[0]
    outcome = run_autotune(RunOptions(problem=str(problem), run_dir=str(tmp_path / "run"), judge=FAST))
    assert outcome.status == "done" and outcome.best_id == "s1"
    assert "no template" in outcome.detail and "origin: inductor seed" in outcome.best_path.read_text()


def test_without_the_seed_nothing_changes(tuner, monkeypatch, tmp_path):
    monkeypatch.setenv("KW_SEED_START", "0")
    problem = write_problems(tmp_path / "problems", scales=(2,))[0]
    outcome = run_autotune(RunOptions(problem=str(problem), run_dir=str(tmp_path / "run"), judge=FAST,
                                      limits=Limits(max_evals=2)))
    run, rows, events = _rows(outcome.run_dir)
    assert "s1" not in rows and "start" not in run["settings"] and not [e for e in events if e["kind"] == "start"]
    assert outcome.best_id == min((c for c in rows if c.startswith("t")),
                                  key=lambda c: TIME_MS[int(rows[c]["code"].split("=")[1])])
