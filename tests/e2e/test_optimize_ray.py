"""`kernelwright optimize --eval ray:ADDRESS` end to end: the hand-written scenario (e2e_scenarios.py)
with its evaluations judged on a real local Ray instance (the session's `ray_cluster`, two CPU
workers), each driver a subprocess; one driver is killed with SIGKILL mid-run and resumed."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from proc_tree import alive, judge_workers

import e2e_scenarios as scenario
from test_optimize_e2e import _wait_for_answers, assert_finished_with_the_repair, read_db, replay_spec

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]


@pytest.fixture(autouse=True)
def _needs_kernelbench(kernelbench):
    return kernelbench


def judged_on(run_dir: Path) -> dict[str, dict]:
    rows = read_db(run_dir, "SELECT candidate_id, json FROM verdicts ORDER BY candidate_id")
    return {r["candidate_id"]: json.loads(r["json"])["environment"].get("judged_on", {}) for r in rows}


def cluster_cpus_free(ray_cluster: str, timeout: float = 60) -> bool:
    import ray

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ray.available_resources().get("CPU", 0) >= 2:
            return True
        time.sleep(0.2)
    return False


def test_optimize_judges_on_a_ray_cluster(tmp_path, ray_cluster):
    import ray

    run_dir = tmp_path / "run"
    done = scenario.cli(scenario.optimize_args(run_dir, replay_spec(), "--eval", f"ray:{ray_cluster}"), cwd=tmp_path)
    assert_finished_with_the_repair(run_dir, done)
    where = judged_on(run_dir)
    assert sorted(where) == ["c1", "c2"]
    node = ray.get_runtime_context().get_node_id()
    assert all(w["ray_node_id"] == node and w["attempt"] == 1 and w["hostname"] for w in where.values())
    header = (run_dir / "best_model_new.py").read_text().split("\n\n")[0]
    assert f"judged on: {where['c2']['hostname']}, CPU, Ray node {node[:12]}" in header
    shown = scenario.cli(["runs", "show", str(run_dir), "--candidate", "c1"], cwd=tmp_path, timeout=60)
    assert f"judged on: {where['c1']['hostname']}, CPU, Ray node {node[:12]}" in shown.stdout
    stored = read_db(run_dir, "SELECT settings FROM runs")[0]["settings"]
    assert json.loads(stored)["eval"] == f"ray:{ray_cluster}"
    assert cluster_cpus_free(ray_cluster)  # the driver's actors ended with it


def test_driver_killed_mid_evaluation_resumes_on_ray_and_loses_nothing(tmp_path, ray_cluster):
    run_dir = tmp_path / "run"
    args = [sys.executable, str(scenario.CLI),
            *scenario.optimize_args(run_dir, replay_spec(), "--eval", f"ray:{ray_cluster}")]
    process = subprocess.Popen(args, cwd=tmp_path, env=scenario.env(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        _wait_for_answers(run_dir, process, at_least=4)  # plan, code, c1's verdict, the repair
        workers = _wait_for_judge_worker(process)  # c2 is being judged on the cluster
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == -signal.SIGKILL
    assert cluster_cpus_free(ray_cluster) and _all_gone(workers)  # nothing left running
    before = {r["id"]: r["result"] for r in read_db(run_dir, "SELECT id, result FROM asks WHERE result IS NOT NULL")}
    assert len(before) == 4 and read_db(run_dir, "SELECT COUNT(*) FROM verdicts")[0][0] == 1
    done = scenario.cli(["optimize", "--resume", str(run_dir), "--quiet"], cwd=tmp_path)  # the stored ray:ADDRESS
    assert_finished_with_the_repair(run_dir, done)
    after = {r["id"]: r["result"] for r in read_db(run_dir, "SELECT id, result FROM asks WHERE result IS NOT NULL")}
    assert {k: after[k] for k in before} == before
    journal = read_db(run_dir, "SELECT ask_id FROM journal WHERE kind = 'tell'")
    assert len(journal) == len({r["ask_id"] for r in journal}) == 5
    assert sorted(judged_on(run_dir)) == ["c1", "c2"]


def _all_gone(pids: list[int], timeout: float = 10) -> bool:
    """Whether every process of `pids` ended within `timeout` (warm ones go with their fork server,
    which notices its owner's end first)."""
    deadline = time.monotonic() + timeout
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not any(alive(pid) for pid in pids)


def _wait_for_judge_worker(process: subprocess.Popen, timeout: float = 120) -> list[int]:
    """Pids of judge workers running under this test's Ray instance (a child of this process)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, "the run ended before it could be killed"
        found = judge_workers(os.getpid())
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("no judge worker started")
