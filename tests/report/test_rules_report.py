"""The rule set in reports: the evidence header, the run summary and a column per rule set.

Verdicts here are written by hand for the tests (no judge ran); they only feed the renderers.
"""
from __future__ import annotations

from rich.console import Console
from typer.testing import CliRunner

from kernelwright.judge.verdict import TrialResult, Verdict
from kernelwright.report.best import evidence_lines
from kernelwright.report.tables import rules_table, run_summary
from kernelwright.store import RunStore


def _text(renderable) -> str:
    console = Console(width=200, record=True)
    console.print(renderable)
    return console.export_text()


def _verdict(rules: str, status: str = "pass") -> dict:
    trials = [TrialResult(0, 42, "given", True, error_ratio=0.02, rel_l2_ratio=0.004)]
    return Verdict(problem="p", candidate="c1", status=status, stage="done", rules=rules, trials=trials,
                   speedup={"eager": 1.7} if status == "pass" else {},
                   precision={"margin": {"elementwise": 0.02, "rel_l2": 0.004, "worst": 0.02}}).to_dict()


def test_evidence_header_states_the_rule_set_and_the_error_margin():
    run = {"id": "r1", "problem_path": "/p.py", "problem_hash": "ab" * 32}
    lines = evidence_lines(run, {"id": "c1", "node": {"action": "draft"}}, _verdict("kernelbench"))
    text = "\n".join(lines)
    assert "rules:     kernelbench (KernelBench-compatible" in text
    assert "error:     0.02 of the elementwise tolerance, 0.004 of the rel-L2 bound" in text
    old = _verdict("kernelbench")
    old.pop("rules")
    old["config"] = {"torch_op_policy": "reject"}
    assert any("strict (judged before rule sets" in line for line in evidence_lines(run, {"id": "c1"}, old))


def test_run_summary_and_a_column_per_rule_set(tmp_path):
    store = RunStore.in_dir(tmp_path)
    store.create_run("r1", problem_path="/p.py", problem_name="p", problem_hash="h", problem_source="s",
                     settings={"judge": {"rules": "library"}})
    store.save_verdict("r1", "c1", _verdict("library"))
    store.save_verdict("r1", "c1", _verdict("strict", "fail"))
    assert "library (no torch compute" in _text(run_summary(store.run("r1")))
    table = _text(rules_table(store.verdict_rows("r1")))
    assert "library" in table and "strict" in table and "pass 1.70x" in table and "fail" in table
    store.close()


def test_runs_rejudge_refuses_an_unknown_rule_set(tmp_path):
    from kernelwright.cli.app import app

    result = CliRunner().invoke(app, ["runs", "rejudge", str(tmp_path), "--rules", "lenient"])
    assert result.exit_code == 2 and "kernelbench, library, strict" in result.output
