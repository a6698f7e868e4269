"""A recorded multi-round run, replayed through the pure engine to render every prompt a model reads.

Everything told to the engine here is HAND-WRITTEN test data: the plans, the code, the diagnosis
and the verdicts (their times, speedups, floor shares, kernel shares and profile findings are
illustrative numbers in the shape the H100 judge writes, not measurements). The device facts of the
GPU run come from tests/fixtures/golden/h100_device.json (the project's H100, peaks measured in
run 1 of docs/benchmarks.md). See tests/fixtures/golden/README.md.

The run (greedy, two first versions, one repair, the Analyst on):

    a1 planner (draft 1)            -> plan A
    a2 coder (draft 1)  a3 planner (draft 2, sees plan A in progress)
    a4, a5 evaluations of c1 and c2, told together: c1 wrong, c2 correct
    a6 repairer (c1)                -> c3, judged correct but slower than c2
    analyst on c2, planner (later round, expanding c2), coder (later round)
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from search_scripts import completion

from kernelwright.judge.target import Target, cpu_target, read_target
from kernelwright.judge.verdict import Baselines, Floor, TimingStats, TrialResult, Verdict
from kernelwright.memory.ranking import rank_skills
from kernelwright.memory.skills import builtin_library
from kernelwright.search.asks import CompletionAsk, EvaluationAsk
from kernelwright.search.budget import Limits
from kernelwright.search.core import Engine
from kernelwright.search.drivers.targets import describe_on, prompt_extra
from kernelwright.search.problem_info import ProblemInfo, describe_problem
from kernelwright.search.results import EvalResult
from kernelwright.search.settings import Settings

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "golden"
PROBLEM = "level1/45_Average_Pooling_2D.py"

KERNEL = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def avg_pool2d_kernel(x_ptr, out_ptr, H, W, OH, OW, K: tl.constexpr, BLOCK_W: tl.constexpr):
    row = tl.program_id(0)  # one (batch, channel, output row)
    plane, oh = row // OH, row % OH
    ow = tl.program_id(1) * BLOCK_W + tl.arange(0, BLOCK_W)
    acc = tl.zeros([BLOCK_W], tl.float32)
    for kh in range(K):
        for kw in range(K):
            src = x_ptr + plane.to(tl.int64) * H * W + (oh * K + kh) * W + ow * K + kw
            acc += tl.load(src, mask=ow < OW, other=0.0)
    tl.store(out_ptr + row.to(tl.int64) * OW + ow, acc / {divisor}, mask=ow < OW)


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int = None, padding: int = 0):
        super().__init__()
        self.k = kernel_size

    def forward(self, x):
        x = x.contiguous()
        n, c, h, w = x.shape
        oh, ow = (h - self.k) // self.k + 1, (w - self.k) // self.k + 1
        out = torch.empty((n, c, oh, ow), device=x.device, dtype=x.dtype)
        grid = (n * c * oh, triton.cdiv(ow, {block}))
        avg_pool2d_kernel[grid](x, out, h, w, oh, ow, K=self.k, BLOCK_W={block})
        return out
'''


def plan(approach: str, region: str, change: str, skill, rationale: str) -> str:
    return "```json\n" + json.dumps({"rationale": rationale, "approach": approach,
                                     "steps": [{"region": region, "change": change, "skill": skill}]}, indent=1) + "\n```"


PLAN_A = plan("one program per output row: sum each 11x11 window in registers and divide once",
              "avg_pool2d_kernel", "one program per (batch, channel, output row) and [BLOCK_W] = 128 output "
              "columns; accumulate the window in fp32 registers and store once", "pooling-windows",
              "Pooling reads every input once; a window sum in registers is one pass over memory.")
PLAN_B = plan("2-D output tiles of 16 rows x 64 columns with the window rows reused through L1",
              "avg_pool2d_kernel", "tile the output 16 x 64 per program so neighbouring windows share "
              "input rows in L1", "pooling-windows",
              "Adjacent output rows read disjoint input rows; tiling keeps a program's reads contiguous.")
PLAN_LATER = plan("vectorize the window-row loads to 16 bytes and autotune BLOCK_W with num_warps",
                  "avg_pool2d_kernel", "load each window row as 4 contiguous float32 per lane and let "
                  "@triton.autotune pick BLOCK_W in {64, 128, 256} and num_warps in {4, 8}",
                  "vectorized-access",
                  "The profile shows 4-byte loads using a quarter of each sector at 86% of DRAM peak; wider "
                  "loads cut requests and the block width was never tuned.")
DIAGNOSIS = ("avg_pool2d_kernel takes all of the GPU time and runs at 90% of the speed-of-light floor: DRAM "
             "is 86% busy, but each load moves 4 bytes and uses a quarter of its 32-byte sector, so the "
             "load path issues four times the requests it needs. The window loop in avg_pool2d_kernel is "
             "where this happens.\nBottleneck: memory\nSkills: [vectorized-access], [coalescing]")


def code(block: int, divisor: str = "(K * K)") -> str:
    return "```python\n" + KERNEL.replace("{block}", str(block)).replace("{divisor}", divisor) + "```"


# ----------------------------------------------------------------------------- verdicts (hand-written)


def gpu_pass(median: float, iqr: float, eager: float, compiled: float, pct: float, share_main: float,
             profiled: bool) -> Verdict:
    kernels = {"available": True, "method": "torch.profiler, 5 forwards after the timing",
               "kernels_per_call": 1.0 if share_main == 1.0 else 2.0,
               "kernel_us_per_call": median * 1000 * 0.98, "busy_us_per_call": median * 1000 * 0.98,
               "wall_us_per_call": median * 1000, "idle_fraction": 0.02,
               "kernels": [{"name": "avg_pool2d_kernel", "us_per_call": median * 1000 * share_main,
                            "launches_per_call": 1.0, "share": share_main}]}
    if share_main < 1.0:
        kernels["kernels"].append({"name": "at::native::vectorized_elementwise_kernel<…>",
                                   "us_per_call": median * 1000 * (1 - share_main), "launches_per_call": 1.0,
                                   "share": round(1 - share_main, 4)})
    profile = None
    if profiled:
        profile = {"status": "ok", "device": "NVIDIA H100 80GB HBM3", "bottleneck": "memory", "kernels": [
            {"name": "avg_pool2d_kernel", "launches": 1, "time_us": median * 1000, "share": 1.0,
             "bottleneck": "memory", "reason": "memory-bound: memory 88% / SM 21% of peak", "confident": True,
             "numbers": {"dram_pct": 86.0, "mem_pct": 88.0, "sm_pct": 21.0, "achieved_occupancy_pct": 82.0,
                         "waves": 45.2, "registers": 40.0}}],
            "findings": [
                {"text": "`avg_pool2d_kernel` (100% of GPU time): global loads use 25% of each 32-byte sector they "
                         "fetch — make consecutive threads read consecutive addresses.", "tags": ["coalescing"],
                 "kind": "action", "rank": 1},
                {"text": "`avg_pool2d_kernel` (100% of GPU time): DRAM throughput 86% of peak with 4-byte global "
                         "loads per thread — vectorise to 16-byte accesses.", "tags": ["vectorized-access"],
                 "kind": "action", "rank": 2}],
            "notes": []}
    trials = [TrialResult(i, 42 + i, variant, True, max_abs_err=2e-7, max_rel_err=3e-6, rel_l2_err=1e-7)
              for i, variant in enumerate(["given", "signed", "wide", "given", "signed"])]
    return Verdict(problem="45_Average_Pooling_2D", candidate="c", status="pass", stage="done", trials=trials,
                   timing=TimingStats(median, iqr, median, median * 0.99, median * 1.05, 48, "cuda_events", True),
                   baselines=Baselines(eager=TimingStats(eager, 0.01, eager, eager, eager, 40, "cuda_events", True),
                                       compile_default=TimingStats(compiled, 0.01, compiled, compiled, compiled,
                                                                   40, "cuda_events", True)),
                   speedup={"eager": round(eager / median, 4), "compile_default": round(compiled / median, 4)},
                   floor=Floor(flops=0.0, bytes=17321574400.0, peak_tflops=51.9, peak_gbps=3006.0,
                               floor_ms=median * pct / 100, pct_of_floor=pct, bound="memory", peak_kind="fp32",
                               peak_source="measured"),
                   device="cuda", kernels=kernels, profile=profile)


def gpu_wrong() -> Verdict:
    trials = [TrialResult(0, 42, "given", True, max_abs_err=1e-7),
              TrialResult(1, 43, "signed", False, max_abs_err=0.031, max_rel_err=0.52, rel_l2_err=0.0021,
                          message="output differs from the reference in 3040 of 3543104 elements "
                                  "(max abs error 0.031, atol=rtol=0.0001)")]
    return Verdict(problem="45_Average_Pooling_2D", candidate="c1", status="fail", stage="check", trials=trials,
                   error="1 of 2 trials failed; trial 1 (seed 43, signed inputs): output differs from the reference "
                         "in 3040 of 3543104 elements (max abs error 0.031, atol=rtol=0.0001)", device="cuda")


def cpu_pass(median: float, eager: float) -> Verdict:
    trials = [TrialResult(i, 42 + i, "given", True, max_abs_err=1e-7) for i in range(2)]
    return Verdict(problem="45_Average_Pooling_2D", candidate="c", status="pass", stage="done", trials=trials,
                   timing=TimingStats(median, median * 0.05, median, median, median, 5, "wall_cpu", False,
                                      note="CPU wall time: not GPU performance"),
                   baselines=Baselines(eager=TimingStats(eager, 0.1, eager, eager, eager, 5, "wall_cpu")),
                   speedup={"eager": round(eager / median, 4)}, device="cpu", shrunk=True,
                   kernels={"available": False, "reason": "evaluated on the CPU: there is no GPU kernel timeline "
                                                          "(Triton runs in the interpreter), so no per-kernel times"})


def cpu_wrong() -> Verdict:
    verdict = gpu_wrong()
    verdict.device, verdict.shrunk = "cpu", True
    return verdict


# ----------------------------------------------------------------------------- the run


@dataclass
class Prompt:
    label: str  # e.g. "03_planner_draft2"
    ask: CompletionAsk

    @property
    def system(self) -> str:
        return self.ask.request.messages[0].content

    @property
    def user(self) -> str:
        return self.ask.request.messages[1].content


def target_for(kind: str) -> Target:
    return read_target(GOLDEN / "h100_device.json") if kind == "h100" else cpu_target(interpreter=True)


def problem_info(kernelbench: Path, target: Target) -> ProblemInfo:
    info = describe_problem(kernelbench / PROBLEM, "triton", {}, "cpu")
    info.path = PROBLEM  # no path of this machine in a snapshot
    return describe_on(info, target)


def make_engine(info: ProblemInfo, target: Target, settings: Settings | None = None) -> Engine:
    library = builtin_library()
    settings = settings or Settings(strategy="greedy", drafts=2, parallel=2, iterations=3, max_repairs=1,
                                    analyst=True, context_tokens=40000, tune=False)
    stored = {"problem": info.to_dict(), "judge": {}}
    return Engine(info, "greedy", Limits(), settings, skills=lambda q, k: rank_skills(library, q, k),
                  skill_names=library.names(), target=target, extra=prompt_extra(stored))


def run(kernelbench: Path, kind: str) -> list[Prompt]:
    """Every prompt of the recorded run, labelled in the order they were written."""
    target = target_for(kind)
    engine = make_engine(problem_info(kernelbench, target), target)
    on_gpu = kind == "h100"
    verdicts = {"c1": gpu_wrong() if on_gpu else cpu_wrong(),
                "c2": gpu_pass(6.41, 0.012, 8.90, 7.35, 89.9, 1.0, True) if on_gpu else cpu_pass(950.0, 38.0),
                "c3": gpu_pass(7.02, 0.020, 8.90, 7.35, 82.1, 0.93, False) if on_gpu else cpu_pass(990.0, 38.0),
                "c4": gpu_pass(6.02, 0.010, 8.90, 7.35, 95.7, 1.0, True) if on_gpu else cpu_pass(900.0, 38.0)}
    answers = {"planner": iter([PLAN_A, PLAN_B, PLAN_LATER]), "analyst": iter([DIAGNOSIS]),
               "coder": iter([code(128), code(64), code(128, "121.0")]), "repairer": iter([code(128, "(1.0 * K * K)")])}
    prompts: list[Prompt] = []
    seen: set[str] = set()
    while not engine.done:
        asks = [a for a in engine.ask() if a.id not in seen]
        seen.update(a.id for a in asks)
        for ask in asks:
            if isinstance(ask, CompletionAsk):
                prompts.append(Prompt(f"{len(prompts) + 1:02d}_{ask.agent}", ask))
        evaluations = [a for a in engine.ask() if isinstance(a, EvaluationAsk)]
        if evaluations and len(evaluations) == len(engine.ask()):  # every job waits for the judge: one batch
            engine.tell_many([(a.id, EvalResult.from_verdict(verdicts[a.candidate_id])) for a in evaluations])
            continue
        ask = next(a for a in engine.ask() if isinstance(a, CompletionAsk))
        engine.tell(ask.id, completion(next(answers[ask.agent])))
    return prompts
