"""The cassette-driven suite of the shipped examples, shared by its tests and the script that
builds its cassette.

`kernelwright optimize examples/problems` (three problems: linear_relu, row_softmax,
scale_bias_gelu) with `--llm replay:examples_suite.jsonl`, greedy search with one draft, no
repair and no tuning step, Triton under the CPU interpreter. Six hand-written answers (a plan and a module per
problem; the modules are the hand-written candidates of examples/candidates/): row_softmax and
scale_bias_gelu are correct, linear_relu's module forgets the bias in its epilogue, so that
problem fails and the suite's numbers count it as 1.0x. The prompts hold no timing, path or
skill, so the answers recorded against them replay on any machine.
"""
from __future__ import annotations

from pathlib import Path

from e2e_scenarios import CASSETTES, CLI_TIMEOUT_S, REPO, answer_text, cli, env  # noqa: F401 - re-exported for the tests

PROBLEMS = REPO / "examples" / "problems"
ANSWERS = CASSETTES / "answers" / "examples"
CASSETTE = CASSETTES / "examples_suite.jsonl"
CORRECT, FAILED = ("row_softmax", "scale_bias_gelu"), ("linear_relu",)

SETTINGS = {
    "drafts": 1, "iterations": 1, "parallel": 1, "max_repairs": 0, "skills_k": 0,
    "judge.trials": 2, "judge.baselines": "eager", "judge.device": "cpu", "judge.warmup_ms": 1,
    "judge.rep_ms": 5, "judge.min_reps": 3, "judge.max_reps": 10,
    # no tuning step: the Templatizer's prompt quotes a measured CPU time, which no hash-keyed
    # cassette replays (tests/e2e/test_tuning_e2e.py covers that step)
    "tune": False,
}


def optimize_args(suite_dir: Path, llm: str, *extra: str) -> list[str]:
    args = ["optimize", str(PROBLEMS), "--llm", llm, "--strategy", "greedy", "--backend", "triton",
            "--run-dir", str(suite_dir), "--quiet"]
    for name, value in SETTINGS.items():
        args += ["--set", f"{name}={value}"]
    return args + list(extra)


def answer_for(problem: str, role: str) -> str:
    """The hand-written answer of `role` (planner, coder) for one example problem."""
    return (ANSWERS / f"{problem}_{role}.md").read_text()
