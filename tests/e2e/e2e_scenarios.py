"""The end-to-end scenarios shared by the e2e tests and by the script that builds their cassette.

ReLU (KernelBench level 1, problem 19) shrunk to 16 x 1024, Triton under the CPU interpreter,
greedy search with one draft and one repair: the draft's Coder answer computes a leaky ReLU (wrong
for negative inputs), the judge says so, the Repairer fixes it. Three hand-written answers, two
evaluations. The prompts hold nothing that changes from run to run (no timings, no paths, no
skills), so answers recorded against them replay.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CASSETTES = REPO / "tests" / "fixtures" / "cassettes"
ANSWERS = CASSETTES / "answers" / "relu"
CASSETTE = CASSETTES / "relu_repair.jsonl"
CLI = Path(__file__).resolve().parent / "kw_cli.py"
SHARED_KB = Path(os.environ.get("KW_KERNELBENCH", REPO.parent / "shared" / "kernelbench"))
PROBLEM = SHARED_KB / "level1" / "19_ReLU.py"

# (agent role, hand-written answer) in the order the run asks for them
SCRIPT = [("planner", "01_planner.md"), ("coder", "02_coder.md"), ("repairer", "03_repairer.md")]

SEARCH_SETTINGS = ("drafts", "iterations", "parallel", "max_repairs", "skills_k", "tune")
SETTINGS = {
    "drafts": 1, "iterations": 1, "parallel": 1, "max_repairs": 1, "skills_k": 0,
    "tune": False,  # the tuning step has its own scenario (TUNE_SETTINGS)
    "batch_size": 16, "dim": 1024,  # problem sizes
    "judge.trials": 2, "judge.baselines": "eager", "judge.device": "cpu", "judge.warmup_ms": 1,
    "judge.rep_ms": 5, "judge.min_reps": 3, "judge.max_reps": 10,
}


def optimize_args(run_dir: Path, llm: str, *extra: str) -> list[str]:
    args = ["optimize", str(PROBLEM), "--llm", llm, "--strategy", "greedy", "--backend", "triton",
            "--run-dir", str(run_dir), "--quiet"]
    for name, value in SETTINGS.items():
        args += ["--set", f"{name}={value}"]
    return args + list(extra)


def env() -> dict[str, str]:
    return {**os.environ, "TRITON_INTERPRET": "1",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}


# Bounds sized for a loaded 2-core machine (two CPU-bound jobs beside the tests and other judges):
# there a CLI call of these scenarios takes 10-75 s where an idle machine takes 5-30 s; a bound is
# a failure's reading, not a deadline a busy machine should meet, so each is several times that.
CLI_TIMEOUT_S = 600  # one CLI call that judges
QUICK_TIMEOUT_S = 300  # one that judges nothing (runs list/show, a refused resume)


def cli(args: list[str], cwd: Path, timeout: float = CLI_TIMEOUT_S, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CLI), *args], cwd=cwd, env=env(), capture_output=True,
                          text=True, timeout=timeout, **kwargs)


def answer_text(name: str) -> str:
    return (ANSWERS / name).read_text()


# ---- the tuning step: plan, a correct first version, the Templatizer's template, then tuning ------
# The same problem and judge settings; hand-written answers in answers/tune_relu, given through the
# exchange provider by role (the Templatizer's prompt quotes the candidate's measured CPU time, so
# no hash-keyed cassette could replay it from run to run).
TUNE_ANSWERS = CASSETTES / "answers" / "tune_relu"
TUNE_SCRIPT = [("planner", "01_planner.md"), ("coder", "02_coder.md"), ("templatizer", "03_templatizer.md")]
TUNE_SETTINGS = {
    **SETTINGS, "max_repairs": 0, "tune": True, "tune_evals": 4,
    "tune_sweep": 1, "tune_seeds": False,  # one configuration per evaluation, no seed cache (sweeps: their own tests)
    # the default instance is judged seconds after the candidate on a shared CPU, where the
    # interpreter's wall time varies severalfold: a loose tolerance (1.25 by default on a GPU)
    "tune_match": 4,
}


def tune_args(run_dir: Path, llm: str = "exchange", **changes) -> list[str]:
    """The tuning scenario's command line; `changes` replace settings (`judge.device` as `judge__device`)."""
    args = ["optimize", str(PROBLEM), "--llm", llm, "--strategy", "greedy", "--backend", "triton",
            "--run-dir", str(run_dir), "--quiet"]
    settings = {**TUNE_SETTINGS, **{k.replace("__", "."): v for k, v in changes.items()}}
    for name, value in settings.items():
        args += ["--set", f"{name}={value}"]
    return args


def answer_pending(exchange: Path, role: str, text: str) -> Path:
    """Write `text` as the answer of the one prompt waiting in `exchange`, which must be for `role`;
    the prompt's path."""
    import json

    from kernelwright.llm.exchange import read_answer

    pending = [p for p in sorted(exchange.glob("*.request.json"))
               if read_answer(exchange, p.name[: -len(".request.json")]) is None]
    if len(pending) != 1:
        raise AssertionError(f"expected exactly one pending prompt in {exchange}, found {len(pending)}")
    sidecar = json.loads(pending[0].read_text())
    if sidecar["request"]["role"] != role:
        raise AssertionError(f"the run asked the {sidecar['request']['role']}, the next answer is for the {role}")
    (exchange / sidecar["answer_file"]).write_text(text)
    return exchange / sidecar["prompt_file"]
