"""`kernelwright report` on runs outside a suite, as a new user's first report reads: the results
on stdout, each run named after its problem and placed in a KernelBench level only when its file
lies in one, a run stopped before its first verdict not judged (not incorrect), torch.compile
figures empty where it was never timed, and no published numbers beside a CPU report.

Runs are written straight into stores with hand-written verdicts; no judge runs.
"""
from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kernelwright.cli.app import app
from kernelwright.store import RunStore

PROBLEM = "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
runner = CliRunner()


def cpu_pass(cid: str) -> dict:
    """Correct on the CPU (sizes shrunk), timed against eager only: torch.compile is not timed there."""
    return {"problem": "p", "candidate": cid, "status": "pass", "stage": "done", "rules": "kernelbench",
            "speedup": {"eager": 0.002}, "timing": {"median_ms": 30.0, "method": "wall_cpu"}, "device": "cpu",
            "shrunk": True, "baselines": {"eager": {"median_ms": 0.06}}, "environment": {"cpu": "x86_64"},
            "process": {"wall_s": 9.0}, "trials": [{"ok": True}]}


def make_run(workspace: Path, folder: str, problem: Path, status: str, verdicts: dict[str, dict]) -> Path:
    run_dir = workspace / folder
    problem.parent.mkdir(parents=True, exist_ok=True)
    problem.write_text(PROBLEM)
    run_id = f"id-{folder}"
    with RunStore.in_dir(run_dir) as store:
        store.create_run(run_id, problem_path=str(problem), problem_name=problem.stem, problem_hash="0" * 64,
                         problem_source=PROBLEM, settings={"mode": "autotune", "judge": {"rules": "kernelbench"}})
        store.upsert_candidates(run_id, [{"id": "c0", "action": "reference", "status": "reference", "code": PROBLEM}])
        for cid, data in verdicts.items():
            store.upsert_candidates(run_id, [{"id": cid, "parent_id": "c0", "action": "tune", "status": data["status"],
                                              "code": f"# {cid}\n"}])
            store.save_verdict(run_id, cid, data)
        store.update_run(run_id, status=status)
    return run_dir


def test_a_one_run_cpu_report(tmp_path):
    workspace = tmp_path / "kw-runs"
    make_run(workspace, "a", tmp_path / "examples" / "problems" / "scale_bias_gelu.py", "done", {"t0": cpu_pass("t0")})
    result = runner.invoke(app, ["report", str(workspace / "a")])
    assert result.exit_code == 0, result.output
    out = result.stdout  # the results are on stdout
    row = next(line for line in out.splitlines() if "scale_bias_gelu" in line)  # named after its problem, not "a"
    cells = [c.strip() for c in row.strip("│ ").split("│")]
    assert cells[:5] == ["scale_bias_gelu", "-", "done", "correct", "t0"]  # no level: "problems" is not one
    assert "kernelbench: 1 of 1 judged, 1 correct (100%); geomean vs eager 0.002x" in out
    assert f"markdown: {workspace / 'a' / 'report' / 'report.md'}" in out
    markdown = (workspace / "a" / "report" / "report.md").read_text()
    assert "| fast_0 vs torch.compile | - | - |" in markdown  # never timed: not "0%"
    assert "| fast_0 vs eager | 100% | 100% |" in markdown
    assert "Published numbers" not in markdown
    assert "Published numbers" not in (workspace / "a" / "report" / "report.html").read_text()
    data = json.loads(runner.invoke(app, ["report", str(workspace / "a"), "--json"]).stdout)
    assert data["published"] is None and data["levels"] == ["-"]


def test_a_run_stopped_before_its_first_verdict_is_not_judged(tmp_path):
    workspace = tmp_path / "kw-runs"
    make_run(workspace, "r1", tmp_path / "kb" / "level1" / "19_ReLU.py", "done", {"t0": cpu_pass("t0")})
    make_run(workspace, "r2", tmp_path / "kb" / "level1" / "19_ReLU.py", "interrupted", {})
    make_run(workspace, "r3", tmp_path / "mine" / "sort.py", "failed", {})  # finished with nothing: incorrect
    result = runner.invoke(app, ["report", str(workspace), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    rows = {p["name"]: p for p in data["problems"]}
    assert set(rows) == {"19_ReLU (r1)", "19_ReLU (r2)", "sort"}  # two runs of one problem told apart
    assert rows["19_ReLU (r1)"]["level"] == "level1" and rows["sort"]["level"] == "-"
    overall = data["summaries"]["kernelbench"]["all"]
    assert (overall["n"], overall["judged"], overall["correct"]) == (3, 2, 1)
    [missing] = data["not_judged"]["kernelbench"]
    assert missing["problem"] == "19_ReLU (r2)" and "no verdict yet (the run is interrupted" in missing["error"]
    assert "json: " in result.stderr  # the paths written, beside the JSON
