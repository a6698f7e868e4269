"""`kernelwright judge` / `kernelwright baseline` through typer's test runner."""
from __future__ import annotations

import json
import re
from pathlib import Path

import typer
from typer.testing import CliRunner

from kernelwright.cli.judge_cmd import register

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


def _app() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


def test_judge_json_output_and_exit_code_for_a_pass():
    result = runner.invoke(_app(), ["judge", str(REPO / "examples/problems/row_softmax.py"),
                                    str(REPO / "examples/candidates/row_softmax.py"), "--json", "--no-time",
                                    "--trials", "2", "--set", "batch_size=4", "--set", "dim=100"])
    assert result.exit_code == 0, result.output
    verdict = json.loads(result.stdout)
    assert verdict["status"] == "pass" and verdict["overrides"] == {"batch_size": 4, "dim": 100}
    assert len(verdict["trials"]) == 2


def test_judge_table_output_and_exit_code_for_a_failure():
    result = runner.invoke(_app(), ["judge", str(REPO / "examples/problems/row_softmax.py"),
                                    str(REPO / "tests/judge/candidates/syntax_error.py"), "--no-time",
                                    "--trials", "1", "--set", "batch_size=2", "--set", "dim=16"])
    assert result.exit_code == 1
    flat = re.sub(r"[\s│┃]+", " ", result.output)  # undo the table's line folding
    assert "error (stage compile" in flat and "line 7: syntax error" in flat


def test_usage_errors_exit_with_2(tmp_path):
    app = _app()
    missing = runner.invoke(app, ["judge", str(tmp_path / "nope.py"), str(tmp_path / "nope2.py")])
    assert missing.exit_code == 2
    bad_set = runner.invoke(app, ["judge", "a.py", "b.py", "--set", "no-equals-sign"])
    assert bad_set.exit_code == 2
    bad_rules = runner.invoke(app, ["judge", "a.py", "b.py", "--rules", "maybe"])
    assert bad_rules.exit_code == 2 and "kernelbench" in bad_rules.output
    nothing = runner.invoke(app, ["judge"])
    assert nothing.exit_code == 2
    broken = tmp_path / "broken_problem.py"  # hand-written: no Model, no get_inputs
    broken.write_text("import torch\n")
    candidate = REPO / "examples/candidates/row_softmax.py"
    unloadable = runner.invoke(app, ["judge", str(broken), str(candidate), "--no-time"])
    assert unloadable.exit_code == 2


def test_baseline_command_on_a_problem_file():
    result = runner.invoke(_app(), ["baseline", str(REPO / "examples/problems/scale_bias_gelu.py"),
                                    "--device", "cpu", "--set", "batch_size=8", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    (entry,) = data.values()
    assert entry["eager"]["median_ms"] > 0 and entry["eager"]["method"] == "wall_cpu"


def test_verdict_table_shows_rules_margin_and_torch_work():
    from rich.console import Console

    from kernelwright.cli.judge_cmd import verdict_table
    from kernelwright.judge.verdict import TrialResult, Verdict, WorkRecord

    verdict = Verdict(problem="p.py", candidate="c.py", status="pass", stage="done", rules="library",
                      trials=[TrialResult(0, 42, "given", True, error_ratio=0.03, rel_l2_ratio=0.01)],
                      precision={"margin": {"elementwise": 0.03, "rel_l2": 0.01, "worst": 0.03}},
                      work=WorkRecord("library", reference={"matmul": 1, "elementwise": 1}, torch={"matmul": 1},
                                      extension={"matmul": 1}, launches={"triton": {"k": 2}}))  # hand-written
    console = Console(width=200, record=True)
    console.print(verdict_table(verdict))
    text = console.export_text()
    assert "library" in text and "0.03 of the elementwise tolerance" in text
    assert "candidate's torch matmul 1 (extension matmul 1); own launches 2" in text
