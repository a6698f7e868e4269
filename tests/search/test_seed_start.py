"""A new run with `seed_start` (search/drivers/seed_start.py): torch.compile's kernels are written as
a seed on this machine (here the CPU: inductor's Triton, run by the interpreter), judged by the real
judge before round 1, and the first planner prompt (an exchange prompt: no model answers here)
shows it as the candidate to beat. A problem the seed cannot export starts from the reference, the
run log and the run's events saying why."""
from __future__ import annotations

import logging

from kernelwright.search.drivers.seed_start import _device
from kernelwright.search.drivers.session import RunOptions, run_search
from kernelwright.search.settings import Settings, seed_start_default
from kernelwright.store import RunStore
from tests.tiny_problem import BARE_MATMUL, FAST, TINY



def _options(tmp_path, problem_text: str, **settings) -> RunOptions:
    problem = tmp_path / "problem.py"
    problem.write_text(problem_text)
    values = {"strategy": "greedy", "drafts": 1, "iterations": 1, "parallel": 1, "skills_k": 0, "tune": False,
              "seed_start": True, **settings}
    return RunOptions(problem=str(problem), llm="exchange", judge=FAST, settings=Settings(**values),
                      run_dir=str(tmp_path / "run"))


def _stored(run_dir):
    with RunStore.in_dir(run_dir, create=False) as store:
        run = store.run()
        return run, store.candidates(run["id"]), store.events(run["id"])


def test_a_new_run_judges_the_seed_first_and_round_one_plans_to_beat_it(tmp_path):
    outcome = run_search(_options(tmp_path, TINY.format(scale=3)))
    assert outcome.status == "paused" and len(outcome.pending_prompts) == 1  # the planner waits for a model
    run, candidates, events = _stored(outcome.run_dir)
    seed = next(c for c in candidates if c["id"] == "c1")
    assert seed["action"] == "seed" and seed["status"] == "pass" and seed["search_parent"] == "c0"
    assert seed["code"].startswith("# origin: inductor seed") or "\n# origin: inductor seed\n" in seed["code"]
    assert run["settings"]["start"]["code"] == seed["code"]
    assert [e["payload"]["written"] for e in events if e["kind"] == "start"] == [True]
    assert outcome.best_id == "c1" and "origin: inductor seed" in outcome.best_path.read_text()
    prompt = outcome.pending_prompts[0].read_text()
    assert "# origin: inductor seed" in prompt and "`c1`" in prompt


def test_a_problem_the_seed_cannot_export_starts_from_the_reference_and_says_why(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="kernelwright.search"):
        outcome = run_search(_options(tmp_path, BARE_MATMUL))
    assert outcome.status == "paused" and len(outcome.pending_prompts) == 1
    run, candidates, events = _stored(outcome.run_dir)
    assert [c["id"] for c in candidates] == ["c0"]  # no seed node: the search starts from the reference
    reason = run["settings"]["start"]["reason"]
    assert "launches no Triton kernel" in reason and "code" not in run["settings"]["start"]
    assert [e["payload"]["reason"] for e in events if e["kind"] == "start"] == [reason]
    assert any("no seed to start from" in r.getMessage() and "launches no Triton kernel" in r.getMessage()
               for r in caplog.records)
    assert "No candidate exists yet" in outcome.pending_prompts[0].read_text()


def test_a_seed_is_written_only_where_it_is_judged():
    assert _device("cpu", "batch", None) == ("cpu", "")
    device, why = _device("cuda", "local", None)
    import torch

    if not torch.cuda.is_available():
        assert device == "" and "this machine has none" in why
        assert _device("auto", "batch", None)[0] == "" and "judged elsewhere" in _device("auto", "batch", None)[1]
        assert _device("auto", "local", None) == ("cpu", "")
    assert _device("cpu", "local", False)[0] == "" and "full size" in _device("cpu", "local", False)[1]


def test_the_default_follows_kw_seed_start(monkeypatch):
    monkeypatch.setenv("KW_SEED_START", "0")
    assert not seed_start_default() and not Settings().seed_start
    monkeypatch.setenv("KW_SEED_START", "1")
    assert seed_start_default() and Settings().seed_start and not Settings(seed_start=False).seed_start
    monkeypatch.delenv("KW_SEED_START")
    assert Settings().seed_start
    assert not Settings.from_stored({}).seed_start  # a run stored before the setting existed


def test_a_seed_that_failed_the_judge_is_named_in_the_run_log(caplog):
    from kernelwright.search.drivers.seed_start import judged_start

    with caplog.at_level(logging.WARNING, logger="kernelwright.search"):
        judged_start({"id": "c1", "status": "pass", "speedup": 1.0, "reason": ""})
        judged_start(None)
        assert not caplog.records
        judged_start({"id": "c1", "status": "fail", "speedup": None, "reason": "trial 1: max abs error 0.5"})
    assert "the seed c1 did not pass the judge (fail)" in caplog.records[0].getMessage()
    assert "went on from the reference; trial 1: max abs error 0.5" in caplog.records[0].getMessage()
