"""Every `kernelwright optimize` path survives Ctrl-C (SIGINT), SIGTERM and kill -9, and resumes.

Real `python -m kernelwright optimize` processes, stopped with real signals in the middle of a
run (Ctrl-C goes to the whole process group, as a terminal sends it), then resumed: the status
says `interrupted`, the best candidate so far is on disk with its evidence header, the output
holds the resume command, and the resumed run judges nothing that was stored (no LLM call is
made twice, no template instance is judged twice). Problems are shrunk, judging is cut to the
bone (two trials, a 5 ms timing window) so each run is a few judge evaluations.
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

pytestmark = pytest.mark.timeout(1800)  # a few CLI runs on a loaded machine (e2e_scenarios.CLI_TIMEOUT_S)

INTERRUPTED = 130
FAST_JUDGE = ["--set", "judge.trials=2", "--set", "judge.baselines=eager", "--set", "judge.warmup_ms=1",
              "--set", "judge.rep_ms=5", "--set", "judge.min_reps=3", "--set", "judge.max_reps=10",
              "--set", "judge.device=cpu"]
TINY = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0


size = 64


def get_inputs():
    return [torch.rand(size)]


def get_init_inputs():
    return []
"""


def no_llm_env() -> dict[str, str]:
    return {k: v for k, v in scenario.env().items() if not k.startswith(("KW_LLM", "KERNELWRIGHT_LLM", "KW_CONFIG"))}


def start(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen:
    """`python -m kernelwright ARGS` in its own process group, with Ctrl-C handled as a terminal
    user's shell would leave it (SIGINT at its default, whatever the test runner inherited)."""
    return subprocess.Popen([sys.executable, "-m", "kernelwright", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def run(args: list[str], cwd: Path, env: dict[str, str], timeout: float = scenario.CLI_TIMEOUT_S
        ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kernelwright", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def rows(run_dir: Path, sql: str) -> list[sqlite3.Row]:
    conn = sqlite3.connect(run_dir / "run.sqlite")
    conn.row_factory = sqlite3.Row
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def wait_until(process: subprocess.Popen, run_dir: Path, sql: str, at_least: int,
               timeout: float = scenario.CLI_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, "the run ended before it could be stopped:\n" + process.communicate()[1]
        try:
            if (run_dir / "run.sqlite").is_file() and rows(run_dir, sql)[0][0] >= at_least:
                return
        except sqlite3.OperationalError:  # the schema is being created
            pass
        time.sleep(0.05)
    raise AssertionError(f"{sql} stayed below {at_least} for {timeout} s")


def stop(process: subprocess.Popen, how: int) -> tuple[str, str]:
    """Send `how` to the whole group (Ctrl-C at a terminal) or to the process (kill -9)."""
    if how == signal.SIGKILL:
        os.kill(process.pid, how)
    else:
        os.killpg(process.pid, how)
    try:
        return process.communicate(timeout=scenario.QUICK_TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()


def assert_best_file(run_dir: Path, candidate: str) -> None:
    text = (run_dir / "best_model_new.py").read_text()
    header = text.split("\n\n")[0]
    assert f"candidate: {candidate} " in header and "verified:  pass" in header and "speedup:" in header
    assert "baseline:  eager median" in header  # which baseline measurement the speedup used


def status(run_dir: Path) -> str:
    return rows(run_dir, "SELECT status FROM runs")[0]["status"]


# ---------------------------------------------------------------------------- without an LLM


@pytest.fixture
def tiny(tmp_path) -> Path:
    path = tmp_path / "tiny_relu.py"
    path.write_text(TINY)
    return path


def autotune_args(problem: Path, run_dir: Path, evals: int) -> list[str]:
    return ["optimize", str(problem), "--run-dir", str(run_dir), "--max-evals", str(evals), *FAST_JUDGE]


def tune_rows(run_dir: Path) -> dict[str, tuple[str, str]]:
    """candidate id -> (parameters, verdict JSON) of every judged instance."""
    found = rows(run_dir, "SELECT c.id, c.plan, v.json FROM candidates c JOIN verdicts v "
                          "ON v.candidate_id = c.id WHERE c.action = 'tune'")
    return {r["id"]: (r["plan"], r["json"]) for r in found}


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill-9"])
def test_autotune_run_stopped_mid_run_resumes_without_judging_again(tiny, tmp_path, how):
    run_dir = tmp_path / "run"
    process = start(autotune_args(tiny, run_dir, evals=3), tmp_path, no_llm_env())
    wait_until(process, run_dir, "SELECT COUNT(*) FROM candidates WHERE action = 'tune' AND status = 'pass'", 1)
    out, err = stop(process, how)
    before = tune_rows(run_dir)
    assert before and len(before) < 3
    first_best = min(before)  # t0 passed; the best so far is on disk however the process ended
    assert (run_dir / "best_model_new.py").is_file()
    if how == signal.SIGINT:
        assert process.returncode == INTERRUPTED, err
        assert status(run_dir) == "interrupted"
        assert f"kernelwright optimize --resume {run_dir}" in out  # the outcome lines are results: stdout
        assert "best so far:" in out and "[0:" in err  # progress lines went to stderr
    else:
        assert process.returncode == -signal.SIGKILL
        assert status(run_dir) == "running"  # nobody could say otherwise ...
        listed = run(["runs", "list", "--dir", str(tmp_path), "--json"], tmp_path, no_llm_env(),
                     timeout=scenario.QUICK_TIMEOUT_S)
        shown = json.loads(listed.stdout)
        assert [r["status"] for r in shown] == ["interrupted"]  # ... but the free lock does
        assert shown[0]["resume"] == f"kernelwright optimize --resume {run_dir}"
    assert_best_file(run_dir, (rows(run_dir, "SELECT best_candidate FROM runs")[0][0] or first_best))
    # the files the judge was given for the stored instances (named by a hash of their code; an
    # instance in flight when the run stopped was never stored, and is judged again)
    stored_code = [r["code"] for r in rows(run_dir, "SELECT code FROM candidates WHERE action = 'tune'")]
    instance_files = {p: p.stat().st_mtime_ns for p in (run_dir / "autotune" / "instances").glob("*.py")
                      if p.read_text() in stored_code}
    assert len(instance_files) == len(before)

    done = run(["optimize", "--resume", str(run_dir), "--json"], tmp_path, no_llm_env())
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["status"] == "done" and outcome["candidates"] == 3 and outcome["spend"]["evals"] == 3
    after = tune_rows(run_dir)
    assert {k: after[k] for k in before} == before  # stored instances kept, verdicts untouched
    assert len({plan for plan, _ in after.values()}) == 3  # three different instances, none twice
    for path, mtime in instance_files.items():  # an instance judged again would be rewritten first
        assert path.stat().st_mtime_ns == mtime, f"{path.name} was judged again"
    assert f"{len(before)} from the store" in done.stderr  # the progress lines say so
    assert_best_file(run_dir, outcome["best_id"])
    assert status(run_dir) == "done"


def test_autotune_max_minutes_is_honoured_within_one_instance(tiny, tmp_path):
    """The limit is checked before each instance but the first: with a one-second limit the run
    judges exactly one instance and stops; a resume with a larger limit goes on from there."""
    run_dir = tmp_path / "run"
    done = run([*autotune_args(tiny, run_dir, evals=20), "--max-minutes", str(1 / 60), "--json"],
               tmp_path, no_llm_env())
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert "time budget reached" in outcome["detail"] and outcome["candidates"] == 1
    [stored_at] = [json.loads(r["node"])["elapsed_s"]
                   for r in rows(run_dir, "SELECT node FROM candidates WHERE action = 'tune'")]
    assert outcome["spend"]["elapsed_s"] <= stored_at + 5.0  # it ended when that instance was stored

    more = run(["optimize", "--resume", str(run_dir), "--max-minutes", "10", "--json"], tmp_path, no_llm_env())
    assert more.returncode == 0, more.stderr
    resumed = json.loads(more.stdout)
    assert "time budget reached" not in resumed["detail"] and resumed["candidates"] > 1
    assert resumed["spend"]["elapsed_s"] > outcome["spend"]["elapsed_s"]  # active time adds up


# ---------------------------------------------------------------------------- with an LLM


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_llm_run_interrupted_mid_run_resumes_without_asking_again(tmp_path, how, kernelbench):
    run_dir = tmp_path / "run"
    process = start(scenario.optimize_args(run_dir, f"replay:{scenario.CASSETTE}"), tmp_path, scenario.env())
    wait_until(process, run_dir, "SELECT COUNT(*) FROM asks WHERE result IS NOT NULL", 3)  # plan, code, verdict
    out, err = stop(process, how)
    assert process.returncode == INTERRUPTED, err
    assert status(run_dir) == "interrupted"
    assert f"kernelwright optimize --resume {run_dir}" in out
    answered = {r["id"]: r["result"] for r in rows(run_dir, "SELECT id, result FROM asks WHERE result IS NOT NULL")}
    assert len(answered) >= 3

    done = scenario.cli(["optimize", "--resume", str(run_dir), "--quiet"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    after = {r["id"]: r["result"] for r in rows(run_dir, "SELECT id, result FROM asks WHERE result IS NOT NULL")}
    assert {k: after[k] for k in answered} == answered
    per_ask = rows(run_dir, "SELECT ask_id, COUNT(*) AS n FROM llm_calls GROUP BY ask_id")
    assert len(per_ask) == 3 and all(r["n"] == 1 for r in per_ask)  # no LLM call made twice
    assert status(run_dir) == "done"
    assert_best_file(run_dir, "c2")
    events = [r["payload"] for r in rows(run_dir, "SELECT payload FROM events WHERE kind = 'status'")]
    assert any('"interrupted"' in e for e in events)


def test_a_live_run_cannot_be_resumed_twice(tiny, tmp_path):
    run_dir = tmp_path / "run"
    process = start(autotune_args(tiny, run_dir, evals=3), tmp_path, no_llm_env())
    try:
        wait_until(process, run_dir, "SELECT COUNT(*) FROM runs", 1)
        second = run(["optimize", "--resume", str(run_dir)], tmp_path, no_llm_env(), timeout=scenario.QUICK_TIMEOUT_S)
        assert second.returncode == 2 and "another process" in second.stderr
    finally:
        stop(process, signal.SIGKILL)
