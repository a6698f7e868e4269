"""`kernelwright optimize` end to end on the CPU: real judge runs (Triton under the interpreter),
answers from the hand-written cassette (tests/fixtures/cassettes), each run in a subprocess.

The scenario (e2e_scenarios.py): plan, a wrong first version, the judge's verdict, a repair, the
judge again; the run ends with a correct best candidate and its evidence header.
"""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import e2e_scenarios as scenario

pytestmark = pytest.mark.timeout(1200)  # one or two CLI runs on a loaded machine (e2e_scenarios.CLI_TIMEOUT_S)
PAUSED = 75


@pytest.fixture(autouse=True)
def _needs_kernelbench(kernelbench):
    return kernelbench


def replay_spec() -> str:
    return f"replay:{scenario.CASSETTE}"


def read_db(run_dir: Path, sql: str, *args) -> list[sqlite3.Row]:
    conn = sqlite3.connect(run_dir / "run.sqlite")
    conn.row_factory = sqlite3.Row
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def assert_finished_with_the_repair(run_dir: Path, done: subprocess.CompletedProcess) -> None:
    assert done.returncode == 0, done.stdout + done.stderr
    failures = read_db(run_dir, "SELECT id, result FROM asks WHERE result LIKE '%\"type\": \"failure\"%'")
    assert not failures, f"asks failed (a cassette miss means: rebuild it, see its README): {[dict(r) for r in failures]}"
    statuses = {r["id"]: (r["action"], r["status"]) for r in read_db(run_dir, "SELECT * FROM candidates")}
    assert statuses == {"c0": ("reference", "reference"), "c1": ("draft", "fail"), "c2": ("repair", "pass")}
    best = (run_dir / "best_model_new.py").read_text()
    repaired = scenario.answer_text("03_repairer.md").split("```python\n")[1].split("```")[0]
    assert best.endswith(repaired)
    header = best.split("\n\n")[0]
    assert "candidate: c2 (repair of c1)" in header
    assert "verified:  pass, 2/2 correctness trials passed" in header
    assert "vs eager PyTorch (" in header and " ms vs " in header  # speedup with both medians
    assert "vs torch.compile" in header
    assert "CPU wall-time, not GPU performance" in header and "triton" in header
    assert "batch_size=16, dim=1024" in header


def test_cassette_answers_are_labelled_hand_written():
    lines = [json.loads(line) for line in scenario.CASSETTE.read_text().splitlines() if line.strip()]
    assert [line["request"]["role"] for line in lines] == [role for role, _ in scenario.SCRIPT]
    assert all(line["source"] == "hand-written for tests" for line in lines)
    assert all(line["completion"]["model"] == "hand-written" for line in lines)
    assert "written by hand" in (scenario.CASSETTES / "README.md").read_text()


def test_whole_loop_replays_to_a_correct_best_candidate(tmp_path):
    run_dir = tmp_path / "run"
    done = scenario.cli(scenario.optimize_args(run_dir, replay_spec()), cwd=tmp_path)
    assert_finished_with_the_repair(run_dir, done)
    calls = read_db(run_dir, "SELECT agent, model, error_type FROM llm_calls ORDER BY id")
    assert [(c["agent"], c["model"], c["error_type"]) for c in calls] == [
        ("planner", "hand-written", None), ("coder", "hand-written", None), ("repairer", "hand-written", None)]
    verdicts = read_db(run_dir, "SELECT candidate_id, status FROM verdicts ORDER BY candidate_id")
    assert [tuple(v) for v in verdicts] == [("c1", "fail"), ("c2", "pass")]
    shown = scenario.cli(["runs", "show", str(run_dir)], cwd=tmp_path, timeout=scenario.QUICK_TIMEOUT_S)
    assert shown.returncode == 0 and "c2" in shown.stdout and "repair" in shown.stdout
    listed = scenario.cli(["runs", "list", "--dir", str(tmp_path)], cwd=tmp_path, timeout=scenario.QUICK_TIMEOUT_S)
    assert listed.returncode == 0 and "19_ReLU" in listed.stdout and "done" in listed.stdout


def test_kill_9_in_the_middle_then_resume_loses_nothing(tmp_path):
    run_dir = tmp_path / "run"
    args = [sys.executable, str(scenario.CLI), *scenario.optimize_args(run_dir, replay_spec())]
    process = subprocess.Popen(args, cwd=tmp_path, env=scenario.env(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        answered = _wait_for_answers(run_dir, process, at_least=3)  # plan, code, first verdict
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=scenario.QUICK_TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == -signal.SIGKILL
    before = {r["id"]: r["result"] for r in read_db(run_dir, "SELECT id, result FROM asks WHERE result IS NOT NULL")}
    assert len(before) >= answered >= 3
    done = scenario.cli(["optimize", "--resume", str(run_dir), "--quiet"], cwd=tmp_path)
    assert_finished_with_the_repair(run_dir, done)
    after = {r["id"]: r["result"] for r in read_db(run_dir, "SELECT id, result FROM asks WHERE result IS NOT NULL")}
    assert {k: after[k] for k in before} == before  # every stored result kept as it was
    per_ask = read_db(run_dir, "SELECT ask_id, COUNT(*) AS n FROM llm_calls GROUP BY ask_id")
    assert len(per_ask) == 3 and all(r["n"] == 1 for r in per_ask)  # no LLM call made twice
    journal = read_db(run_dir, "SELECT ask_id FROM journal WHERE kind = 'tell'")
    assert len(journal) == len({r["ask_id"] for r in journal}) == 5  # each ask told exactly once


def _wait_for_answers(run_dir: Path, process: subprocess.Popen, at_least: int,
                      timeout: float = scenario.CLI_TIMEOUT_S) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, "the run ended before it could be killed"
        if (run_dir / "run.sqlite").exists():
            try:
                count = read_db(run_dir, "SELECT COUNT(*) FROM asks WHERE result IS NOT NULL")[0][0]
            except sqlite3.OperationalError:  # the schema is being created
                count = 0
            if count >= at_least:
                return count
        time.sleep(0.05)
    raise AssertionError(f"fewer than {at_least} answers after {timeout} s")


@pytest.mark.timeout(3000)  # five CLI runs and two judged candidates, on a loaded machine
def test_exchange_pauses_until_answers_are_written_then_completes(tmp_path):
    run_dir = tmp_path / "run"
    result = scenario.cli(scenario.optimize_args(run_dir, "exchange"), cwd=tmp_path)
    for role, answer in scenario.SCRIPT:
        assert result.returncode == PAUSED, result.stdout + result.stderr
        prompts = _unanswered(run_dir / "exchange")
        assert len(prompts) == 1 and str(prompts[0]["prompt_file"]) in result.stderr + result.stdout
        assert prompts[0]["request"]["role"] == role
        # a second resume before the answer exists changes nothing
        if role == "planner":
            again = scenario.cli(["optimize", "--resume", str(run_dir), "--quiet"], cwd=tmp_path)
            assert again.returncode == PAUSED and len(_unanswered(run_dir / "exchange")) == 1
        (run_dir / "exchange" / prompts[0]["answer_file"]).write_text(scenario.answer_text(answer))
        result = scenario.cli(["optimize", "--resume", str(run_dir), "--quiet"], cwd=tmp_path)
    assert_finished_with_the_repair(run_dir, result)


def _unanswered(folder: Path) -> list[dict]:
    sidecars = [json.loads(p.read_text()) for p in sorted(folder.glob("*.request.json"))]
    return [s for s in sidecars if not (folder / s["answer_file"]).exists()]


@pytest.mark.timeout(3000)  # five CLI runs and three batch runs, on a loaded machine
def test_batch_evaluations_round_trip_through_a_folder(tmp_path):
    run_dir = tmp_path / "run"
    result = scenario.cli(scenario.optimize_args(run_dir, replay_spec(), "--eval", "batch"), cwd=tmp_path)
    # the run does not know where it will be judged: it pauses before its first prompt; the batch
    # runner's first contact records the device, and the run goes on
    assert result.returncode == PAUSED and "device.json" in result.stdout + result.stderr
    assert not list((run_dir / "evals").glob("*.request.json"))
    recorded = subprocess.run([sys.executable, "-m", "kernelwright.judge.scheduling.batch", str(run_dir / "evals")],
                              cwd=tmp_path, env=scenario.env(), capture_output=True, text=True,
                              timeout=scenario.CLI_TIMEOUT_S)
    assert recorded.returncode == 0 and (run_dir / "evals" / "device.json").is_file(), recorded.stderr
    result = scenario.cli(["optimize", "--resume", str(run_dir), "--quiet"], cwd=tmp_path)
    for expected in ("c1", "c2"):
        assert result.returncode == PAUSED, result.stdout + result.stderr
        evals = run_dir / "evals"
        pending = sorted(p.name for p in evals.glob("*.request.json") if not (evals / p.name.replace(
            ".request.json", ".verdict.json")).exists())
        assert pending == [f"{expected}.request.json"]
        judged = subprocess.run([sys.executable, "-m", "kernelwright.judge.scheduling.batch", str(evals)], cwd=tmp_path,
                                env=scenario.env(), capture_output=True, text=True, timeout=scenario.CLI_TIMEOUT_S)
        assert judged.returncode == 0, judged.stdout + judged.stderr
        assert (evals / f"{expected}.verdict.json").is_file()
        result = scenario.cli(["optimize", "--resume", str(run_dir), "--quiet"], cwd=tmp_path)
    assert_finished_with_the_repair(run_dir, result)


def test_without_an_llm_the_template_autotuner_runs_and_records_its_instances(tmp_path):
    run_dir = tmp_path / "run"
    # the problem, its sizes and the judge settings of the scenario; no LLM, so no search settings
    # (the autotuner refuses flags it cannot honour)
    args = ["optimize", str(scenario.PROBLEM), "--run-dir", str(run_dir), "--quiet", "--max-evals", "1"]
    for name, value in scenario.SETTINGS.items():
        if name not in scenario.SEARCH_SETTINGS:
            args += ["--set", f"{name}={value}"]
    env = {k: v for k, v in scenario.env().items() if not k.startswith(("KERNELWRIGHT_LLM", "KW_LLM", "KW_CONFIG"))}
    done = subprocess.run([sys.executable, str(scenario.CLI), *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=scenario.CLI_TIMEOUT_S)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = read_db(run_dir, "SELECT id, action, status FROM candidates WHERE action = 'tune'")
    assert [tuple(r) for r in rows] == [("t0", "tune", "pass")]
    assert read_db(run_dir, "SELECT COUNT(*) FROM verdicts")[0][0] == 1
    header = (run_dir / "best_model_new.py").read_text().split("\n\n")[0]
    assert "candidate: t0 (tune of c0)" in header and "2/2 correctness trials passed" in header
    assert "vs eager PyTorch (" in header
