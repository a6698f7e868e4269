"""Suites without an LLM: the template tuner over several problems in one suite folder, judged here
over one pool, or through ONE batch folder in rounds (request priorities put every problem's first
instance first; a partly judged round is stored before the suite pauses again)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kernelwright.judge.scheduling import batch, batch_folder
from kernelwright.search.drivers.session import RunOptions
from kernelwright.search.drivers.suite import resume_suite, run_suite
from kernelwright.search.budget import Limits
from kernelwright.store import RunStore
from kernelwright.store.suite import entries_for, find_runs, read_manifest
from tiny_problem import FAST, write_problems



@pytest.fixture
def problems(tmp_path) -> list[Path]:
    return write_problems(tmp_path / "problems")


def test_run_folders_are_named_after_their_problems(tmp_path):
    a, b = tmp_path / "level1" / "19_ReLU.py", tmp_path / "level2" / "19_ReLU.py"
    c = tmp_path / "level2" / "evals.py"
    entries = entries_for([a, b, c])
    assert [e.name for e in entries] == ["level1-19_ReLU", "level2-19_ReLU", "evals_"]  # never the shared folders
    assert [e.level for e in entries] == ["level1", "level2", "level2"]
    assert entries[0].request_prefix == "level1-19_ReLU--"


def test_a_batch_suite_judged_in_part_stores_what_came_back(problems, tmp_path):
    suite = tmp_path / "suite"
    options = RunOptions(judge=FAST, limits=Limits(max_evals=2), eval_mode="batch", run_dir=str(suite))
    first = run_suite(problems, options, no_model=True)
    assert first.exit_code == 75 and first.manifest.mode == "autotune"
    folder = suite / "evals"
    requests = sorted(folder.glob("*.request.json"))
    assert len(requests) == 4 and {p.name.split("--")[0] for p in requests} == {"relu_x2", "relu_x3"}
    ordered = sorted(requests, key=lambda p: (batch_folder.request_priority(p), p.name))
    assert [batch_folder.request_priority(p) for p in ordered] == [0, 0, 1, 1]  # every problem's first instance first
    for request in requests:
        data = json.loads(request.read_text())
        assert "problem_source" in data and data["config"]["shrink"] is False  # no path of this machine
    aside = tmp_path / "aside"  # the GPU call ran out of time: only the first instances were judged
    aside.mkdir()
    for request in ordered[2:]:
        shutil.move(request, aside / request.name)
    assert len(batch.run_batch(folder, base=FAST)) == 2
    for request in aside.iterdir():
        shutil.move(request, folder / request.name)
    second = resume_suite(suite, RunOptions())
    assert second.exit_code == 75 and len(second.pending_evals()) == 2
    for entry in read_manifest(suite).entries:
        with RunStore.in_dir(suite / entry.name, create=False) as store:
            stored = [c["id"] for c in store.candidates(store.run()["id"]) if c["action"] == "tune"]
            assert stored == ["t0"]  # the judged instance is stored although its round is not complete
    batch.run_batch(folder, base=FAST)
    third = resume_suite(suite, RunOptions())
    assert third.exit_code == 0
    assert {o.best_id for _, o in third.results} <= {"t0", "t1"} and all(o.status == "done" for _, o in third.results)
    assert len(list(folder.glob("*.request.json"))) == 4  # nothing asked twice


def test_a_local_suite_shares_one_pool_and_find_runs_reads_it(problems, tmp_path):
    suite = tmp_path / "ws" / "suite"
    outcome = run_suite(problems, RunOptions(judge=FAST, limits=Limits(max_evals=1), run_dir=str(suite)),
                        no_model=True)
    said = "\n".join(f"{e.name}: {o!r}" if isinstance(o, Exception) else f"{e.name}: {o.status}: {o.detail}"
                     for e, o in outcome.results)  # whole, not cut by pytest's repr
    assert outcome.exit_code == 0 and [o.best_id for _, o in outcome.results] == ["t0", "t0"], said
    found, manifest = find_runs(suite)
    assert [f.entry.name for f in found] == ["relu_x2", "relu_x3"] and manifest.mode == "autotune"
    workspace, _ = find_runs(tmp_path / "ws")  # a workspace holding a suite finds the suite's runs
    assert [f.run_dir for f in workspace] == [f.run_dir for f in found]
    single, none = find_runs(suite / "relu_x2")
    assert none is None and single[0].run_dir == suite / "relu_x2"
