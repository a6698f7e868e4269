"""KernelBench's run layout both ways: our best candidates exported as
runs/<name>_level<L>_<backend>/level_L_problem_N_sample_0_kernel.py (with the commands for
KernelBench's eval script), and a generations folder imported as candidates our judge evaluates."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelwright.interop.kernelbench import (export_best, find_generations, kernel_name, problem_file,
                                              problem_key)
from kernelwright.report.collect import ProblemResult, RuleResult

REPO = Path(__file__).resolve().parents[2]
ANSWER = REPO / "tests" / "fixtures" / "cassettes" / "answers" / "relu" / "03_repairer.md"  # hand-written
FAST = ["--set", "judge.trials=2", "--set", "judge.baselines=eager", "--set", "judge.warmup_ms=1", "--set",
        "judge.rep_ms=5", "--set", "judge.min_reps=3", "--set", "judge.max_reps=10", "--set", "judge.device=cpu",
        "--set", "batch_size=16", "--set", "dim=1024"]


def relu_module() -> str:
    return re.search(r"```python\n(.*?)```", ANSWER.read_text(), re.S).group(1)


def result(name: str, problem: str, correct: bool, code: str = "") -> ProblemResult:
    out = ProblemResult(name, Path(problem).parent.name, problem, f"runs/{name}", status="done", best_code=code)
    out.results = {"kernelbench": RuleResult("kernelbench", correct, "c3" if correct else None,
                                             {"eager": 1.7, "compile_default": 1.2}, 0.5)}
    return out


def test_names_follow_kernelbench():
    assert problem_key("/x/level1/19_ReLU.py") == (1, 19)
    assert problem_key("/x/level2/99_Matmul_GELU_Softmax.py") == (2, 99)
    assert problem_key("/x/problems/relu.py") is None and problem_key("/x/misc/19_ReLU.py") is None
    assert kernel_name(1, 19, 3) == "level_1_problem_19_sample_3_kernel.py"


def test_export_writes_the_run_layout_and_the_eval_commands(tmp_path):
    problems = [result("19_ReLU", "/kb/level1/19_ReLU.py", True, "# triton kernel\nimport triton\n"),
                result("23_Softmax", "/kb/level1/23_Softmax.py", False),
                result("mine", "/work/problems/mine.py", True, "x = 1\n"),
                result("9_Gemm", "/kb/level2/9_Gemm.py", True, "from torch.utils.cpp_extension import load_inline\n")]
    done = export_best(problems, tmp_path / "out", "kw")
    assert sorted(e.file for e in done.exported) == ["runs/kw_level1_triton/level_1_problem_19_sample_0_kernel.py",
                                                     "runs/kw_level2_cuda/level_2_problem_9_sample_0_kernel.py"]
    assert (tmp_path / "out" / done.exported[0].file).read_text() == "# triton kernel\nimport triton\n"
    assert done.skipped == {"23_Softmax": "no correct candidate",
                            "mine": "/work/problems/mine.py is not named like a KernelBench problem (levelL/N_name.py)"}
    manifest = json.loads((tmp_path / "out" / "kernelwright_export.json").read_text())
    assert manifest["exported"][0]["candidate"] == "c3" and manifest["exported"][0]["speedup"]["eager"] == 1.7
    readme = (tmp_path / "out" / "README.md").read_text()
    assert "run_name=kw_level1_triton" in readme and 'level=1 backend=triton subset="(19,19)"' in readme
    assert "run_name=kw_level2_cuda" in readme and "backend=cuda" in readme


def test_generations_are_found_and_matched_to_problems(tmp_path):
    runs = tmp_path / "runs" / "m"
    runs.mkdir(parents=True)
    for name in ("level_1_problem_19_sample_0_kernel.py", "level_1_problem_19_sample_1_kernel.py",
                 "level_2_problem_5_sample_0_kernel.py", "notes.txt", "level_1_problem_19_sample_0_prompt.txt"):
        (runs / name).write_text("x")
    found = find_generations(runs)
    assert [(g.level, g.problem_id, g.sample) for g in found] == [(1, 19, 0), (1, 19, 1), (2, 5, 0)]
    assert [g.sample for g in find_generations(runs, level=1)] == [0, 1]
    (tmp_path / "kb" / "level1").mkdir(parents=True)
    (tmp_path / "kb" / "level1" / "19_ReLU.py").write_text("")
    assert problem_file(tmp_path / "kb", 1, 19) == tmp_path / "kb" / "level1" / "19_ReLU.py"
    assert problem_file(tmp_path / "kb", 1, 1) is None and problem_file(tmp_path / "kb", 3, 1) is None


@pytest.mark.timeout(1200)  # a suite judged in a subprocess (bounded at 600 s) on a loaded machine, then an export
def test_a_generations_folder_is_judged_by_our_judge_and_exported_back(tmp_path, kernelbench):
    kb = tmp_path / "kb" / "level1"
    kb.mkdir(parents=True)
    shutil.copy(kernelbench / "level1" / "19_ReLU.py", kb)  # a scratch copy, outside the repository
    gens = tmp_path / "gens"
    gens.mkdir()
    good = relu_module()
    (gens / "level_1_problem_19_sample_0_kernel.py").write_text(good.replace("tl.where(x < 0, 0.0, x)",
                                                                              "tl.where(x < 0, 0.01 * x, x)"))
    (gens / "level_1_problem_19_sample_1_kernel.py").write_text(good)
    (gens / "level_1_problem_7_sample_0_kernel.py").write_text(good)  # no such problem here: skipped
    env = {**os.environ, "PYTHONPATH": str(REPO), "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-m", "kernelwright", "kernelbench", "import", str(gens), "--problems",
                           str(tmp_path / "kb"), "--run-dir", str(tmp_path / "suite"), "--quiet", "--json", *FAST],
                          capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "skipped level_1_problem_7_sample_0_kernel.py" in done.stderr
    (item,) = json.loads(done.stdout[done.stdout.index("{"):])["suite"]
    assert (item["name"], item["status"], item["best_id"]) == ("19_ReLU", "done", "s1")  # s0 is a leaky ReLU
    back = subprocess.run([sys.executable, "-m", "kernelwright", "kernelbench", "export", str(tmp_path / "suite"),
                           "--out", str(tmp_path / "export"), "--name", "again"], capture_output=True, text=True,
                          timeout=300, env=env)
    assert back.returncode == 0, back.stderr
    exported = tmp_path / "export" / "runs" / "again_level1_triton" / "level_1_problem_19_sample_0_kernel.py"
    assert exported.read_text() == good
