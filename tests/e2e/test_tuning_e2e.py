"""The tuning step of an LLM run, end to end on the CPU, killed with SIGKILL in the middle of tuning.

Real `kernelwright optimize` processes and real judge runs (Triton in the interpreter, ReLU shrunk
to 16 x 1024): hand-written answers (tests/fixtures/cassettes/answers/tune_relu, not model output)
go through the exchange provider by role: a plan, a correct first version c1 (BLOCK_SIZE 256, 4
warps), and the Templatizer's template of it. The run then judges the template's default instance
and the tuner's configurations, one at a time; it is killed with SIGKILL once two instances are
stored, and the resume finishes the tuning without judging any stored instance again or asking
any stored prompt again.
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

pytestmark = pytest.mark.timeout(3000)  # several CLI runs on a loaded machine (e2e_scenarios.CLI_TIMEOUT_S)
PAUSED = 75
INSTANCES = 4  # tune_evals: the default instance and three configurations of the tuner


def rows(run_dir: Path, sql: str) -> list[sqlite3.Row]:
    conn = sqlite3.connect(run_dir / "run.sqlite")
    conn.row_factory = sqlite3.Row
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def instance_verdicts(run_dir: Path) -> dict[str, str]:
    """candidate id -> verdict JSON of every judged tuning instance."""
    found = rows(run_dir, "SELECT c.id, v.json FROM candidates c JOIN verdicts v ON v.candidate_id = c.id "
                          "WHERE c.action = 'tune'")
    return {r["id"]: r["json"] for r in found}


def answered(run_dir: Path) -> dict[str, str]:
    return {r["id"]: r["result"] for r in rows(run_dir, "SELECT id, result FROM asks WHERE result IS NOT NULL")}


def answer_prompts(run_dir: Path, cwd: Path, **changes) -> str:
    """Run, answer each prompt by role, resume, until the Templatizer's prompt is answered; its text."""
    args = scenario.tune_args(run_dir, **changes)
    prompt = ""
    for role, name in scenario.TUNE_SCRIPT:
        paused = scenario.cli(args, cwd=cwd)
        assert paused.returncode == PAUSED, paused.stdout + paused.stderr
        path = scenario.answer_pending(run_dir / "exchange", role, (scenario.TUNE_ANSWERS / name).read_text())
        prompt = path.read_text()
        args = ["optimize", "--resume", str(run_dir), "--quiet"]
    return prompt


def assert_templatizer_prompt(prompt: str) -> None:
    """The prompt a Templatizer reads: its role, the target, the reference, c1's code and verdict,
    the task with the tuning budget, and the template format."""
    assert "| agent role | templatizer |" in prompt
    assert "turn one of the team's fastest correct kernels into a *template*" in prompt
    assert "# Kernel to turn into a template (`c1`)" in prompt and "limits of an H100" in prompt
    assert "CPU interpreter" in prompt  # the target
    assert "torch.relu(x)" in prompt and "batch_size = 4096" in prompt  # the reference as written
    assert "relu_kernel[grid](x, out, n_elements, BLOCK_SIZE=256, num_warps=4)" in prompt  # c1, whole
    assert "Status: correct, 2/2 trials passed" in prompt and "of CPU wall time" in prompt  # its verdict
    assert "It judges at most 4 configurations in all" in prompt
    assert "KW_PARAMS = dict(KW_TUNE[\"defaults\"])" in prompt  # the answer format


def start(args: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(scenario.CLI), *args], cwd=cwd, env=scenario.env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def wait_for_instances(process: subprocess.Popen, run_dir: Path, count: int,
                       timeout: float = scenario.CLI_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, "the run ended before it could be killed:\n" + process.communicate()[1]
        try:
            if len(instance_verdicts(run_dir)) >= count:
                return
        except sqlite3.OperationalError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"fewer than {count} instances were stored in {timeout} s")


def test_an_llm_run_templatizes_tunes_and_resumes_after_kill_9_mid_tuning(tmp_path, kernelbench):
    run_dir = tmp_path / "run"
    assert_templatizer_prompt(answer_prompts(run_dir, tmp_path))

    process = start(["optimize", "--resume", str(run_dir), "--quiet"], tmp_path)
    try:
        wait_for_instances(process, run_dir, 2)
        os.kill(process.pid, signal.SIGKILL)
        process.communicate(timeout=scenario.QUICK_TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
    before, asked_before = instance_verdicts(run_dir), answered(run_dir)
    assert 2 <= len(before) < INSTANCES, "the kill came after the tuning ended"

    done = scenario.cli(["optimize", "--resume", str(run_dir), "--json"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    outcome = json.loads(done.stdout)
    after = instance_verdicts(run_dir)
    assert len(after) == INSTANCES and {k: after[k] for k in before} == before  # none judged again
    assert {k: answered(run_dir)[k] for k in asked_before} == asked_before  # no stored result replaced
    told = rows(run_dir, "SELECT ask_id, COUNT(*) AS n FROM journal WHERE kind = 'tell' GROUP BY ask_id")
    assert all(r["n"] == 1 for r in told) and len(told) == 3 + 1 + INSTANCES  # each ask told once
    calls = rows(run_dir, "SELECT ask_id, COUNT(*) AS n FROM llm_calls GROUP BY ask_id")
    assert len(calls) == 3 and all(r["n"] == 1 for r in calls)  # no prompt asked twice

    c1 = json.loads(rows(run_dir, "SELECT node FROM candidates WHERE id = 'c1'")[0]["node"])
    record = c1["tuning"]
    assert record["cost"]["evaluations"] == INSTANCES and record["cost"]["templatizer_calls"] == 1
    assert record["cost"]["device_label"] == "CPU-seconds" and record["cost"]["device_s"] > 0
    assert record["feasible"] == 12 and record["default_instance"] == "c2" and len(record["instances"]) == INSTANCES
    params = [json.loads(r["node"])["tuning"]["params"]
              for r in rows(run_dir, "SELECT node FROM candidates WHERE action = 'tune' ORDER BY rowid")]
    assert params[0] == {"BLOCK_SIZE": 256, "num_warps": 4} and len({json.dumps(p) for p in params}) == INSTANCES
    assert outcome["tuning"]["evals"] == INSTANCES and outcome["tuning"]["jobs"] == 1
    searched = {r["id"]: r["search_parent"] for r in rows(run_dir, "SELECT id, search_parent FROM candidates "
                                                                   "WHERE action = 'tune'")}
    adopted = [cid for cid, parent in searched.items() if parent == "c1"]
    assert adopted == ([record["best"]] if record["best"] else [])  # only the adopted one joins the search
    if record["best"]:  # a faster configuration was found (the interpreter's times decide)
        assert c1["tuned"].startswith("parameters tuned: BLOCK_SIZE in {128, 256, 512, 1024}")
        assert outcome["best_id"] == record["best"]
        header = (run_dir / "best_model_new.py").read_text().split("\n\n")[0]
        assert f"candidate: {record['best']} (tune of c1)" in header and "verified:  pass" in header


@pytest.mark.gpu
def test_on_a_gpu_the_default_instance_reproduces_the_candidate_within_the_default_tolerance(tmp_path, kernelbench):
    """The same scenario judged on the GPU at a size worth timing (a 0.8 GB input), with the
    default tune_match of 1.25: the template's default instance must reproduce c1's time."""
    run_dir = tmp_path / "run"
    answer_prompts(run_dir, tmp_path, judge__device="cuda", tune_match=1.25, batch_size=512, dim=393216,
                   judge__trials=3, judge__warmup_ms=25, judge__rep_ms=100, judge__min_reps=10, judge__max_reps=1000)
    done = scenario.cli(["optimize", "--resume", str(run_dir), "--json"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    c1 = json.loads(rows(run_dir, "SELECT node FROM candidates WHERE id = 'c1'")[0]["node"])
    record = c1["tuning"]
    assert record["outcome"].startswith("tuned:"), record  # the default instance reproduced c1
    assert record["cost"]["device_label"] == "GPU-seconds" and record["cost"]["device_s"] > 0
    devices = {json.loads(v)["device"] for v in instance_verdicts(run_dir).values()}
    assert len(devices) == 1 and next(iter(devices)).startswith("cuda")


def test_an_llm_run_tunes_in_a_sweep_with_seeds_and_a_resume_replays_the_same_asks(tmp_path, kernelbench,
                                                                                   monkeypatch):
    """tune_sweep=3 within 3 evaluations: the seeds asked of the driver (an empty cache here), the
    default instance judged, then ONE sweep of three configurations in one real judge evaluation,
    and its fastest judged in full. The seed cache then holds the sweep's times; a resume replays
    the stored seeds answer (not the cache) and asks nothing more."""
    monkeypatch.setenv("KW_TUNE_CACHE", str(tmp_path / "tune-cache"))
    run_dir = tmp_path / "run"
    answer_prompts(run_dir, tmp_path, tune_sweep=3, tune_seeds="true", tune_evals=3)
    done = scenario.cli(["optimize", "--resume", str(run_dir), "--json"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    kinds = [r["kind"] for r in rows(run_dir, "SELECT kind FROM asks ORDER BY seq")]
    assert kinds.count("sweep") == 1 and kinds.count("seeds") == 1 and kinds.index("seeds") < kinds.index("sweep")
    [sweep] = rows(run_dir, "SELECT id, payload, result FROM asks WHERE kind = 'sweep'")
    record = json.loads(sweep["result"])["record"]
    assert len(json.loads(sweep["payload"])["instances"]) == 3 and len(record["configs"]) == 3
    timed = [c for c in record["configs"] if c["status"] == "ok"]
    c1 = json.loads(rows(run_dir, "SELECT node FROM candidates WHERE id = 'c1'")[0]["node"])
    tuning = c1["tuning"]
    assert tuning["cost"]["evaluations"] == 3 and tuning["seeds"] == [] and tuning["sweeps"][0]["configs"] == 3
    nodes = [json.loads(r["node"]) for r in rows(run_dir, "SELECT node FROM candidates WHERE action = 'tune'")]
    winners = [n for n in nodes if n["tuning"].get("sweep")]
    assert len(nodes) == 1 + len(winners) and len(winners) == (1 if timed else 0)
    if winners:  # the sweep's fastest, judged in full: its own verdict row
        fastest = min(timed, key=lambda c: c["time_ms"])
        assert winners[0]["tuning"]["params"] == fastest["params"]
        assert winners[0]["tuning"]["sweep"]["ask"] == sweep["id"] and winners[0]["id"] in instance_verdicts(run_dir)
        assert list((tmp_path / "tune-cache" / "seeds").glob("*.json"))  # recorded by the driver
    answered_before = answered(run_dir)
    again = scenario.cli(["optimize", "--resume", str(run_dir), "--json"], cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert answered(run_dir) == answered_before  # the replay asked nothing new, the seeds from the log
