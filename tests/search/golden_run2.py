"""A later-round run on a level-2 GEMM + BatchNorm problem, on the H100 target, replayed through the
pure engine to render every prompt the issue-31 critique was about.

Everything told to the engine here is HAND-WRITTEN test data: the plans, the code, the diagnoses and
the verdicts (times, floors, kernel shares, profiles and findings are illustrative numbers in the
shape the H100 judge writes, not measurements; no model produced any answer). The device facts are
tests/fixtures/golden/h100_device.json. Only this module's own imports and the engine's public
surface are used, so the same script renders the prompts of older versions of kernelwright too
(how the sizes before and after issue 31 were measured, docs/agents.md).

The run (a scripted strategy, one job at a time, one repair, the Analyst on):

    c0 -> plan A -> c1       pass 1.55x (its verdict's floor from peaks measured on a shared GPU)
    c0 -> plan B -> c2       illegal memory access -> repairer -> c3 pass, slower than c1: B is a dead end
    c1 -> analyst, plan C -> c4  pass 1.90x, the best (c1 plus statistics in the epilogue)
    c1 -> plan D -> c5       planned while c4 is best: c4 is shown as a diff to c1
    c3 -> analyst, plan E -> c6  a dead-end candidate expanded: one instruction about it
"""
from __future__ import annotations

import json
from pathlib import Path

from search_scripts import completion

from kernelwright.judge.target import read_target
from kernelwright.judge.verdict import Baselines, Floor, TimingStats, TrialResult, Verdict
from kernelwright.memory.ranking import rank_skills
from kernelwright.memory.skills import builtin_library
from kernelwright.search.asks import CompletionAsk, EvaluationAsk
from kernelwright.search.budget import Limits
from kernelwright.search.core import Engine
from kernelwright.search.drivers.targets import describe_on, prompt_extra
from kernelwright.search.problem_info import describe_problem
from kernelwright.search.results import EvalResult
from kernelwright.search.settings import Settings
from kernelwright.search.strategies.base import Strategy

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "golden"
PROBLEM = "level2/33_Gemm_Scale_BatchNorm.py"
EXPANSIONS = ["c0", "c0", "c1", "c1", "c3"]  # the nodes the scripted strategy expands, in order

HEAD = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def linear_scale_kernel(x_ptr, w_ptr, b_ptr, s_ptr, y_ptr, M, N, K,
                        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros([BM, BN], tl.float32)
    for k in range(0, K, BK):
        rk = k + tl.arange(0, BK)
        a = tl.load(x_ptr + rm[:, None].to(tl.int64) * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        w = tl.load(w_ptr + rn[None, :].to(tl.int64) * K + rk[:, None], mask=(rn[None, :] < N) & (rk[:, None] < K), other=0.0)
        acc += tl.dot(a, w, input_precision="tf32x3")
    acc = (acc + tl.load(b_ptr + rn, mask=rn < N)[None, :]) * tl.load(s_ptr + rn, mask=rn < N)[None, :]
    live = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(y_ptr + rm[:, None].to(tl.int64) * N + rn[None, :], acc, mask=live)
{stats}

@triton.jit
def bn_train_kernel(y_ptr, g_ptr, beta_ptr, out_ptr, M, N, eps, BM: tl.constexpr, BN: tl.constexpr):
    # one program per BN columns: the batch mean and biased variance of each column, then normalise
    rn = tl.program_id(0) * BN + tl.arange(0, BN)
    total = tl.zeros([BN], tl.float32)
    squares = tl.zeros([BN], tl.float32)
    for m in range(0, M, BM):
        rm = m + tl.arange(0, BM)
        y = tl.load(y_ptr + rm[:, None].to(tl.int64) * N + rn[None, :], mask=(rm[:, None] < M) & (rn[None, :] < N), other=0.0)
        total += tl.sum(y, 0)
        squares += tl.sum(y * y, 0)
    mean = total / M
    rstd = 1.0 / tl.sqrt(squares / M - mean * mean + eps)
    g = tl.load(g_ptr + rn, mask=rn < N, other=1.0)
    beta = tl.load(beta_ptr + rn, mask=rn < N, other=0.0)
    for m in range(0, M, BM):
        rm = m + tl.arange(0, BM)
        live = (rm[:, None] < M) & (rn[None, :] < N)
        y = tl.load(y_ptr + rm[:, None].to(tl.int64) * N + rn[None, :], mask=live, other=0.0)
        tl.store(out_ptr + rm[:, None].to(tl.int64) * N + rn[None, :], (y - mean) * rstd * g + beta, mask=live)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale_shape, eps=1e-5, momentum=0.1):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(torch.randn(scale_shape))
        self.bn = nn.BatchNorm1d(out_features, eps=eps, momentum=momentum)

    def forward(self, x):
        x = x.contiguous()
        M, K = x.shape
        N = self.gemm.weight.shape[0]
        y = torch.empty((M, N), device=x.device, dtype=x.dtype)
        out = torch.empty_like(y)
        grid = (triton.cdiv(M, {bm}), triton.cdiv(N, 128))
        linear_scale_kernel[grid](x, self.gemm.weight, self.gemm.bias, self.scale, y, M, N, K, BM={bm}, BN=128, BK=32)
        bn_train_kernel[(triton.cdiv(N, 64),)](y, self.bn.weight, self.bn.bias, out, M, N, self.bn.eps, BM=64, BN=64)
        return out
'''

STATS = '''    acc = tl.where(live, acc, 0.0)  # batch statistics of each column, added in the epilogue
    tl.atomic_add(sum_ptr + rn, tl.sum(acc, 0), mask=rn < N)
    tl.atomic_add(sq_ptr + rn, tl.sum(acc * acc, 0), mask=rn < N)'''


def code(bm: int = 128, stats: bool = False) -> str:
    text = HEAD.replace("{bm}", str(bm)).replace("{stats}", STATS if stats else "")
    if stats:
        text = text.replace("s_ptr, y_ptr, M, N, K,", "s_ptr, y_ptr, sum_ptr, sq_ptr, M, N, K,")
    return "```python\n" + text + "```"


def plan(approach: str, region: str, change: str, skill, rationale: str) -> str:
    return "```json\n" + json.dumps({"rationale": rationale, "approach": approach,
                                     "steps": [{"region": region, "change": change, "skill": skill}]}, indent=1) + "\n```"


PLANS = ([
    plan("one tf32x3 GEMM kernel with the scale in its epilogue, then a two-pass BatchNorm kernel", "linear_scale_kernel",
         "tile 128x128x32, accumulate each K tile with tf32x3 and add it to the fp32 sum; apply bias and scale before "
         "the store; bn_train_kernel computes column mean and variance, then normalises", "tf32x3-split-gemm",
         "The GEMM carries all the FLOPs; the scale fuses into its epilogue, BatchNorm needs batch statistics."),
    plan("3xBF16 split GEMM with BatchNorm statistics by atomics", "linear_scale_kernel",
         "split x and W into bf16 halves, three products per tile; atomically add column sums", "tf32x3-split-gemm",
         "3xBF16 runs at a third of the bf16 rate, twice 3xTF32's."),
    plan("BatchNorm statistics in the GEMM epilogue, one normalising pass", "linear_scale_kernel",
         "add per-column sum and sum of squares of the scaled accumulator with tl.atomic_add; bn_train_kernel reads "
         "them instead of re-reading y twice", "gemm-norm-fusion",
         "bn_train_kernel reads y twice (31% of GPU time); statistics from the epilogue save one pass."),
    plan("BM 64 tiles for two waves of programs", "ModelNew.forward", "launch linear_scale_kernel with BM=64",
         None, "512 tiles fill 3.9 waves; smaller tiles balance the last wave."),
    plan("fix the slow bf16 split: per-tile accumulation and BK 64", "linear_scale_kernel",
         "sum each tile's three products from zero and add to the running sum; BK=64", "tf32x3-split-gemm",
         "c3 is slower than c1; its K loop issues three dependent dots per 32-wide tile."),
])
DIAGNOSES = ([
    "linear_scale_kernel holds 69% of the GPU time at 0.68 ms and bn_train_kernel 31%: the BatchNorm pass "
    "re-reads y twice. The GEMM's tensor pipes are 71% busy. Removing one pass over y is the cheapest gain.\n"
    "Bottleneck: memory\nSkills: [gemm-norm-fusion]",
    "c3 spends 78% of its time in linear_scale_kernel at 0.94 ms: three dependent dots per 32-wide K tile keep "
    "the tensor pipes 48% busy. The split itself is not the cost; the short K tile is.\n"
    "Bottleneck: latency\nSkills: [tf32x3-split-gemm]",
])


# ----------------------------------------------------------------------------- verdicts (hand-written)

EAGER, COMPILED = 1.52, 1.31
FLOPS, BYTES = 137438953472.0, 335740936.0


def floor(median: float, tflops: float) -> Floor:
    floor_ms = FLOPS / (tflops * 1e12) * 1e3
    return Floor(flops=FLOPS, bytes=BYTES, peak_tflops=tflops, peak_gbps=3006.0, floor_ms=floor_ms,
                 pct_of_floor=floor_ms / median * 100, bound="compute", peak_kind="bf16x3", peak_source="measured")


def gpu_pass(median: float, gemm_share: float, tflops: float, profiled: bool, stats: bool = False) -> Verdict:
    names = ["linear_scale_kernel", "bn_train_kernel"]
    kernels = {"available": True, "method": "torch.profiler, 5 forwards after the timing",
               "kernels": [{"name": name, "us_per_call": median * 1000 * share, "launches_per_call": 1.0,
                            "share": round(share, 4)} for name, share in zip(names, (gemm_share, 1 - gemm_share), strict=True)]}
    profile = None
    if profiled:
        profile = {"status": "ok", "device": "NVIDIA H100 80GB HBM3", "bottleneck": "compute", "kernels": [
            {"name": "linear_scale_kernel", "launches": 1, "time_us": median * 1000 * gemm_share, "share": gemm_share,
             "bottleneck": "compute", "reason": "compute-bound: SM 74% / memory 41% of peak", "confident": True,
             "numbers": {"dram_pct": 22.0, "mem_pct": 41.0, "sm_pct": 74.0, "tensor_pct": 71.0,
                         "achieved_occupancy_pct": 11.0, "waves": 3.88, "registers": 168.0}},
            {"name": "bn_train_kernel", "launches": 1, "time_us": median * 1000 * (1 - gemm_share),
             "share": 1 - gemm_share, "bottleneck": "memory", "reason": "memory-bound: memory 83% / SM 12% of peak",
             "confident": True, "numbers": {"dram_pct": 81.0, "mem_pct": 83.0, "sm_pct": 12.0, "waves": 0.97}}],
            "findings": [
                {"text": "`bn_train_kernel` (31% of GPU time): DRAM at 81% of peak moving 100.7 MB per launch: the "
                         "kernel is at the memory roof, only fewer bytes help — fuse it with the other kernels of "
                         "the forward so intermediates never reach DRAM.",
                 "tags": ["memory-bound-elementwise-fusion", "operator-fusion", "roofline-speed-of-light"],
                 "kind": "action", "rank": 1},
                {"text": "`linear_scale_kernel` (69% of GPU time): tensor pipes 71% busy: near the compute roof — what "
                         "is left is fusing the epilogue (bias, activation, cast) into this kernel instead of separate "
                         "passes.", "tags": ["epilogue-fusion", "roofline-speed-of-light"], "kind": "action", "rank": 2}],
            "notes": []}
    trials = [TrialResult(i, 42 + i, variant, True, max_abs_err=3e-5, max_rel_err=2e-4, rel_l2_err=4e-7)
              for i, variant in enumerate(["given", "signed", "wide", "negated", "given"])]
    return Verdict(problem="33_Gemm_Scale_BatchNorm", candidate="c", status="pass", stage="done", trials=trials,
                   timing=TimingStats(median, median * 0.01, median, median * 0.99, median * 1.02, 100,
                                      "cuda_events", True),
                   baselines=Baselines(eager=TimingStats(EAGER, 0.01, EAGER, EAGER, EAGER, 50, "cuda_events", True),
                                       compile_default=TimingStats(COMPILED, 0.01, COMPILED, COMPILED, COMPILED, 50,
                                                                   "cuda_events", True)),
                   speedup={"eager": round(EAGER / median, 4), "compile_default": round(COMPILED / median, 4)},
                   floor=floor(median, tflops), device="cuda", kernels=kernels, profile=profile)


def gpu_fault() -> Verdict:
    error = ("the candidate raised during trial 0 (seed 42, given inputs): RuntimeError: CUDA error: an illegal "
             "memory access was encountered\nCUDA kernel errors might be asynchronously reported at some other API "
             "call, so the stacktrace below might be incorrect.\n  File \"candidate.py\", line 58, in forward\n"
             "    out = torch.empty_like(y)")
    return Verdict(problem="33_Gemm_Scale_BatchNorm", candidate="c2", status="fail", stage="check",
                   trials=[], error=error, device="cuda")  # the process died in its first trial


VERDICTS = {
    "c1": gpu_pass(0.98, 0.69, 200.0, True),   # its floor from peaks measured while the GPU was shared
    "c2": gpu_fault(),
    "c3": gpu_pass(1.21, 0.78, 239.3, False),
    "c4": gpu_pass(0.80, 0.87, 239.3, False, stats=True),
    "c5": gpu_pass(0.84, 0.86, 239.3, False),
    "c6": gpu_pass(0.95, 0.80, 239.3, False),
}
CODES = {"A": code(), "B": code(bm=64), "repair": code(bm=64).replace(".to(tl.int64) * K", ".to(tl.int64) * K + 0"),
         "C": code(stats=True), "D": code(bm=64, stats=True), "E": code(bm=128).replace("BK=32", "BK=64")}
CODE_ORDER = ("A", "B", "C", "D", "E")


class Scripted(Strategy):
    """Expands the nodes of EXPANSIONS in order, each once it exists and its last job has ended."""
    name = "scripted"

    def __init__(self, settings: Settings):
        super().__init__(settings)
        self.order = list(EXPANSIONS)

    def select(self, state) -> str | None:
        if not self.order or state.active or self.order[0] not in state.tree.nodes:
            return None
        node = state.tree[self.order[0]]
        if node.id != "c0" and node.eval is None:
            return None
        return self.order.pop(0)


# ----------------------------------------------------------------------------- the run


class Prompt:
    def __init__(self, label: str, ask: CompletionAsk):
        self.label, self.ask = label, ask

    @property
    def system(self) -> str:
        return self.ask.request.messages[0].content

    @property
    def user(self) -> str:
        return "\n".join(m.content for m in self.ask.request.messages[1:])


def run(kernelbench: Path) -> list[Prompt]:
    target = read_target(GOLDEN / "h100_device.json")
    info = describe_problem(kernelbench / PROBLEM, "triton", {}, "cpu")
    info.path = PROBLEM
    info = describe_on(info, target)
    library = builtin_library()
    settings = Settings(strategy="greedy", drafts=2, parallel=1, iterations=5, max_repairs=1, analyst=True,
                        context_tokens=40000, tune=False)
    engine = Engine(info, Scripted(settings), Limits(), settings, skills=lambda q, k: rank_skills(library, q, k),
                    skill_names=library.names(), target=target,
                    extra=prompt_extra({"problem": info.to_dict(), "judge": {}}))
    prompts: list[Prompt] = []
    seen: set[str] = set()
    repairs, plans, diagnoses, codes = iter([CODES["repair"]]), iter(PLANS), iter(DIAGNOSES), iter(CODE_ORDER)
    while not engine.done:
        asks = [a for a in engine.ask() if a.id not in seen]
        seen.update(a.id for a in asks)
        for ask in asks:
            if isinstance(ask, CompletionAsk):
                prompts.append(Prompt(f"{len(prompts) + 1:02d}_{ask.agent}", ask))
        ask = engine.ask()[0]
        if isinstance(ask, EvaluationAsk):
            engine.tell(ask.id, EvalResult.from_verdict(VERDICTS[ask.candidate_id]))
        elif ask.agent == "planner":
            engine.tell(ask.id, completion(next(plans)))
        elif ask.agent == "analyst":
            engine.tell(ask.id, completion(next(diagnoses)))
        elif ask.agent == "repairer":
            engine.tell(ask.id, completion("The grid of `bn_train_kernel` was sized with BM: fixed.\n\n" + next(repairs)))
        else:
            engine.tell(ask.id, completion(CODES[next(codes)]))
    return prompts
