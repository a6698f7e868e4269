"""Judge the example candidates (and, with --hacks, the judge's test candidates) and check each
verdict against what it should be. Needs only torch, triton, numpy and this package.

    PYTHONPATH=. python examples/judge_examples.py --out OUT [--hacks] [--trials N]

On a GPU this exercises the whole judge: sandboxed workers on CUDA, memory poisoning in the caching
allocator, CUDA-event timing with L2 flush, eager / torch.compile baselines and the floor. Without
a GPU, Triton runs through its interpreter (set TRITON_INTERPRET=1) at small sizes.
Writes OUT/<case>.verdict.json for every case and OUT/summary.txt; exits 1 if any verdict is not
what it should be.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kernelwright.judge import JudgeConfig  # noqa: E402
from kernelwright.judge.request import SourceText  # noqa: E402
from kernelwright.judge.scheduling.pool import JudgeJob, JudgePool  # noqa: E402

EXAMPLES = REPO / "examples"
TEST_CANDIDATES = REPO / "tests" / "judge" / "candidates"

# Hand-written problems in KernelBench format for the hack cases (KernelBench itself may not be on
# the machine). Sizes are filled in per device.
PROBLEM_TEMPLATE = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self{init_args}):
        super().__init__()
{init_body}
    def forward(self, x):
        return {forward}

batch_size = {batch}
dim = {dim}

def get_inputs():
    return [torch.rand(batch_size, dim)]

def get_init_inputs():
    return [{init_inputs}]
'''


def relu_problem(batch: int, dim: int) -> SourceText:
    text = PROBLEM_TEMPLATE.format(init_args="", init_body="        pass", forward="torch.relu(x)",
                                   batch=batch, dim=dim, init_inputs="")
    return SourceText(text, "relu_problem")


def softmax_problem(batch: int, dim: int) -> SourceText:
    text = PROBLEM_TEMPLATE.format(init_args="", init_body="        pass", forward="torch.softmax(x, dim=1)",
                                   batch=batch, dim=dim, init_inputs="")
    return SourceText(text, "softmax_problem")


def gemm_problem(batch: int, dim: int, out: int) -> SourceText:
    text = PROBLEM_TEMPLATE.format(
        init_args=", in_features, out_features, divisor",
        init_body="        self.linear = nn.Linear(in_features, out_features)\n        self.divisor = divisor",
        forward="torch.relu(self.linear(x)) / self.divisor", batch=batch, dim=dim,
        init_inputs=f"dim, {out}, 2.0")
    return SourceText(text, "gemm_relu_divide_problem")


# case -> (problem factory key, candidate file, expected status, flag code that must be present, extra config)
HACK_CASES = {
    "relu_correct": ("relu", "relu_correct.py", "pass", None, {}),
    "relu_wrong": ("relu", "relu_wrong.py", "fail", None, {}),
    "relu_shape": ("relu", "relu_shape.py", "fail", None, {}),
    "relu_raise": ("relu", "relu_raise.py", "fail", None, {}),
    "relu_hang": ("relu", "relu_hang.py", "fail", None, {"timeout_s": 10}),
    "relu_segfault": ("relu", "relu_segfault.py", "fail", None, {}),
    "relu_exit": ("relu", "relu_exit.py", "fail", None, {}),
    "relu_mutate": ("relu", "relu_mutate.py", "fail", "input_mutation", {}),
    "relu_cache": ("relu", "relu_cache.py", "fail", "output_cache", {}),
    "relu_uninit": ("relu", "relu_uninit.py", "fail", "uninitialized_output", {}),
    "relu_empty": ("relu", "relu_empty.py", "fail", "uninitialized_output", {}),
    "relu_patch_timers": ("relu", "relu_patch_timers.py", "fail", "monkeypatch", {}),
    "syntax_error": ("relu", "syntax_error.py", "error", None, {}),
    "missing_modelnew": ("relu", "missing_modelnew.py", "error", None, {}),
    "wrong_signature": ("relu", "wrong_signature.py", "error", None, {}),
    "softmax_correct": ("softmax", "softmax_correct.py", "pass", None, {}),
    "softmax_torch": ("softmax", "softmax_torch.py", "fail", "torch_op", {}),
    "softmax_zeros": ("softmax_wide", "softmax_zeros.py", "fail", None, {"trials": 1}),
    "softmax_compile": ("softmax", "softmax_compile.py", "fail", "torch_op", {}),
    "gemm_relu_divide_correct": ("gemm", "gemm_relu_divide_correct.py", "pass", None, {}),
}
EXAMPLE_CASES = ("scale_bias_gelu", "row_softmax", "linear_relu")


def problems(gpu: bool) -> dict[str, SourceText]:
    if gpu:
        return {"relu": relu_problem(4096, 8192), "softmax": softmax_problem(1024, 8192),
                "softmax_wide": softmax_problem(64, 32768), "gemm": gemm_problem(1024, 2048, 2048)}
    return {"relu": relu_problem(8, 256), "softmax": softmax_problem(4, 300),
            "softmax_wide": softmax_problem(2, 32768), "gemm": gemm_problem(16, 64, 32)}


def build_jobs(gpu: bool, hacks: bool, trials: int) -> tuple[list[JudgeJob], dict[str, tuple[str, str | None]]]:
    jobs, expected = [], {}
    for name in EXAMPLE_CASES:
        config = JudgeConfig(trials=trials, time=True)
        jobs.append(JudgeJob(EXAMPLES / "problems" / f"{name}.py", EXAMPLES / "candidates" / f"{name}.py",
                             config, name=f"example_{name}"))
        expected[f"example_{name}"] = ("pass", None)
    if hacks:
        table = problems(gpu)
        for name, (problem, candidate, status, flag, extra) in HACK_CASES.items():
            config = JudgeConfig(**{"trials": trials, "time": status == "pass", **extra})
            jobs.append(JudgeJob(table[problem], TEST_CANDIDATES / candidate, config, name=name))
            expected[name] = (status, flag)
    return jobs, expected


def check(verdict, status: str, flag: str | None) -> str:
    problems_found = []
    if verdict.status != status:
        problems_found.append(f"status {verdict.status} (expected {status})")
    if flag and flag not in {f.code for f in verdict.flags if f.severity == "reject"}:
        problems_found.append(f"no reject flag {flag}")
    if status == "pass" and verdict.timing is None:
        problems_found.append("no timing")
    return "; ".join(problems_found)


def describe(verdict) -> str:
    parts = [f"{verdict.status}/{verdict.stage}"]
    if verdict.timing:
        parts.append(f"{verdict.timing.median_ms:.4g} ms ({verdict.timing.method})")
    if verdict.speedup:
        parts.append("speedup " + ", ".join(f"{k} {v:.2f}x" for k, v in verdict.speedup.items()))
    if verdict.floor and verdict.floor.pct_of_floor:
        parts.append(f"{verdict.floor.pct_of_floor:.0f}% of floor")
    if verdict.flags:
        parts.append("flags " + ",".join(f"{f.code}:{f.severity}" for f in verdict.flags))
    if verdict.process:
        parts.append(f"net {'isolated' if verdict.process.network_isolated else 'open'}")
    return " | ".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "judge_examples_out")))
    parser.add_argument("--hacks", action="store_true", help="also judge the test candidates (reward hacks)")
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    import torch

    gpu = torch.cuda.is_available()
    jobs, expected = build_jobs(gpu, args.hacks, args.trials)
    args.out.mkdir(parents=True, exist_ok=True)
    lines, bad, start = [], 0, time.monotonic()
    for index, verdict in JudgePool(JudgeConfig()).iter_judge(jobs):
        name = jobs[index].name
        (args.out / f"{name}.verdict.json").write_text(verdict.to_json())
        problem = check(verdict, *expected[name])
        bad += bool(problem)
        line = f"{'BAD ' if problem else 'ok  '}{name:28s} {describe(verdict)}" + (f"  <-- {problem}" if problem else "")
        if problem and verdict.error:
            line += f"\n      error: {verdict.error[:400]}"
        print(line, flush=True)
        lines.append(line)
    lines.append(f"{len(jobs) - bad}/{len(jobs)} verdicts as expected in {time.monotonic() - start:.0f} s "
                 f"on {'GPU' if gpu else 'CPU'}")
    print(lines[-1])
    (args.out / "summary.txt").write_text("\n".join(lines) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
