"""`kernelwright runs list|show`: tables on stdout, --json, and runs whose process is gone."""
from __future__ import annotations

import json

from typer.testing import CliRunner

from kernelwright.cli.app import app
from kernelwright.store import RunLock, RunStore

runner = CliRunner()


def make_run(folder, status="running", run_id="r1"):
    with RunStore.in_dir(folder) as store:
        store.create_run(run_id, problem_path="/p/relu.py", problem_name="relu", problem_hash="0" * 64,
                         problem_source="SOURCE", settings={"search": {"strategy": "autotune"}, "mode": "autotune"},
                         status=status)
        store.upsert_candidates(run_id, [{"id": "c0", "action": "reference", "status": "reference"},
                                         {"id": "t0", "parent_id": "c0", "action": "tune", "status": "pass",
                                          "code": "CODE", "plan": '{"BLOCK": 64}', "speedup": 1.5}])
        store.save_verdict(run_id, "t0", {"status": "pass", "speedup": {"eager": 1.5}})
        store.update_run(run_id, best_candidate="t0", best_speedup=1.5)


def test_list_and_show_as_json(tmp_path):
    make_run(tmp_path / "ws" / "a", status="done")
    listed = runner.invoke(app, ["runs", "list", "--dir", str(tmp_path / "ws"), "--json"])
    assert listed.exit_code == 0
    [run] = json.loads(listed.stdout)
    assert run["id"] == "r1" and run["status"] == "done" and run["best_candidate"] == "t0"
    assert "problem_source" not in run and run["resume"] is None
    shown = runner.invoke(app, ["runs", "show", str(tmp_path / "ws" / "a"), "--json"])
    record = json.loads(shown.stdout)
    assert [c["id"] for c in record["candidates"]] == ["c0", "t0"] and record["asks"]["total"] == 0
    one = runner.invoke(app, ["runs", "show", str(tmp_path / "ws" / "a"), "--candidate", "t0", "--json"])
    candidate = json.loads(one.stdout)
    assert candidate["code"] == "CODE" and candidate["verdict"]["speedup"] == {"eager": 1.5}
    missing = runner.invoke(app, ["runs", "show", str(tmp_path / "ws" / "a"), "--candidate", "t9"])
    assert missing.exit_code == 2


def test_a_running_run_without_its_process_is_shown_interrupted(tmp_path):
    run_dir = tmp_path / "ws" / "a"
    make_run(run_dir, status="running")
    listed = json.loads(runner.invoke(app, ["runs", "list", "--dir", str(tmp_path / "ws"), "--json"]).stdout)
    assert listed[0]["status"] == "interrupted"
    assert listed[0]["resume"] == f"kernelwright optimize --resume {run_dir}"
    shown = runner.invoke(app, ["runs", "show", str(run_dir)], env={"COLUMNS": "200"})
    assert "interrupted" in shown.output and f"kernelwright optimize --resume {run_dir}" in shown.output
    with RunLock(run_dir):  # while a process holds it, it is running
        listed = json.loads(runner.invoke(app, ["runs", "list", "--dir", str(tmp_path / "ws"), "--json"]).stdout)
        assert listed[0]["status"] == "running" and listed[0]["resume"] is None
