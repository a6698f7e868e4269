"""`kernelwright runs show RUN --ask ID` prints a stored prompt exactly as the model read it."""
from __future__ import annotations

from typer.testing import CliRunner

from kernelwright.cli.app import app
from kernelwright.llm.types import Completion, Usage
from kernelwright.search.asks import ask_hash, result_to_dict
from kernelwright.search.budget import Limits
from kernelwright.search.core import Engine
from kernelwright.search.problem_info import ProblemInfo
from kernelwright.search.settings import Settings
from kernelwright.store import RunStore

runner = CliRunner()
REFERENCE = ("import torch\nimport torch.nn as nn\nclass Model(nn.Module):\n    def forward(self, x):\n"
             "        return torch.relu(x)\ndef get_inputs():\n    return [torch.rand(4)]\n"
             "def get_init_inputs():\n    return []\n")
PLAN = ('```json\n{"rationale": "r", "approach": "one pass relu", "steps": [{"region": "ModelNew.forward", '
        '"change": "launch one relu kernel", "skill": null}]}\n```')  # hand-written answer


def problem():
    return ProblemInfo(name="relu", source=REFERENCE, op_kinds=["elementwise"])


def completion(text):
    return Completion(text=text, model="hand-written", provider="test", usage=Usage(10, 5), cost_usd=0.0,
                      request_hash="", latency_s=0.0)


def test_show_ask_prints_prompts_answers_and_evaluations(tmp_path):
    engine = Engine(problem(), "greedy", Limits(), Settings(strategy="greedy", drafts=1, iterations=1))
    with RunStore.in_dir(tmp_path) as store:
        store.create_run("r1", problem_path="p.py", problem_name="relu", problem_hash="h", problem_source="x",
                         settings={})
        planner = engine.ask()[0]
        store.save_ask("r1", planner.to_dict(), ask_hash(planner))
        answer = completion(PLAN)
        store.save_result("r1", planner.id, result_to_dict(answer), 1.0)
        engine.tell(planner.id, answer)
        coder = engine.ask()[0]
        store.save_ask("r1", coder.to_dict(), ask_hash(coder))
    listed = runner.invoke(app, ["runs", "show", str(tmp_path), "--ask", "list"])
    assert listed.exit_code == 0 and "a1\tcompletion\tplanner\tanswered" in listed.output
    shown = runner.invoke(app, ["runs", "show", str(tmp_path), "--ask", planner.id])
    assert shown.exit_code == 0
    assert planner.request.messages[1].content in shown.output  # the user message, verbatim
    assert "## Message 1 of 2: system" in shown.output and "one pass relu" in shown.output
    waiting = runner.invoke(app, ["runs", "show", str(tmp_path), "--ask", coder.id])
    assert "(not answered yet)" in waiting.output and "# Plan to carry out" in waiting.output
    missing = runner.invoke(app, ["runs", "show", str(tmp_path), "--ask", "a99"])
    assert missing.exit_code == 1


def test_show_ask_prints_a_sweep_per_configuration_and_the_seeds(tmp_path):
    """A tuning job's sweep and seeds asks (hand-written records, no judge ran)."""
    from kernelwright.judge.sweep import ConfigResult, SweepResult
    from kernelwright.search.asks import SeedsAsk, SweepAsk, SweepItem
    from kernelwright.search.results import SeedsResult, SweepOutcome

    sweep = SweepAsk("a7", "c1", [SweepItem({"BLOCK": 64}, "a"), SweepItem({"BLOCK": 128}, "b")], "tune1")
    record = SweepResult([ConfigResult(0, {"BLOCK": 64}, "ok", time_ms=0.25),
                          ConfigResult(1, {"BLOCK": 128}, "failed", reason="trial 0: output differs")],
                         method="wall_cpu")
    seeds = SeedsAsk("a6", "KW_TUNE = {}", "cpu", 3, "tune1")
    with RunStore.in_dir(tmp_path) as store:
        store.create_run("r1", problem_path="p.py", problem_name="relu", problem_hash="h", problem_source="x",
                         settings={})
        for ask, result in ((seeds, SeedsResult([{"BLOCK": 128}])), (sweep, SweepOutcome(record))):
            store.save_ask("r1", ask.to_dict(), ask_hash(ask))
            store.save_result("r1", ask.id, result_to_dict(result), 1.0)
    listed = runner.invoke(app, ["runs", "show", str(tmp_path), "--ask", "list"])
    assert "a7\tsweep\tc1\tanswered" in listed.output and "a6\tseeds\ttune1\tanswered" in listed.output
    shown = runner.invoke(app, ["runs", "show", str(tmp_path), "--ask", "a7"])
    assert shown.exit_code == 0 and "a sweep of 2 instances of c1's template" in shown.output
    assert '#0\tok\t0.25 ms\t{"BLOCK": 64}' in shown.output and "trial 0: output differs" in shown.output
    shown = runner.invoke(app, ["runs", "show", str(tmp_path), "--ask", "a6"])
    assert shown.exit_code == 0 and '{"BLOCK": 128}' in shown.output
