"""Exhaustive sweeps of built-in templates on the GPU: the data behind the tuning evidence.

For each kernel below, the library builds its template for the problem, prunes the space against
the device's limits, and times EVERY remaining configuration in this process (compiled ahead in a
pool of processes, checked once against the reference, pruned if the compiler reports spills,
timed with triton.testing.do_bench). Each sweep is saved as JSON; bench/tune_replay.py then
replays the search strategies against the saved tables on a CPU machine (optuna is not needed
here). Also measured: cuBLAS for the GEMM, PyTorch eager for the others, and the device's copy
bandwidth.

    PYTHONPATH=. python bench/tune_gpu.py            # writes $OUT/tune_gpu/*.json (default ./out)

Needs only torch, triton, numpy and the kernelwright package. Stops each sweep at its time cap
(and all of them at --deadline) so the whole run stays within about 8 minutes; a truncated
sweep is marked as such and its configurations were measured in a seeded random order, so what
was measured is a uniform sample of the space.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# compile workers are spawned processes: they find the package through PYTHONPATH
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)

from kernelwright.problem import load_problem  # noqa: E402
from kernelwright.tune.hardware import detect_limits  # noqa: E402
from kernelwright.tune.inprocess import InProcessEvaluator, bench_ms, load_module  # noqa: E402
from kernelwright.tune.library import build_template  # noqa: E402
from kernelwright.tune.prune import prune_space  # noqa: E402
from kernelwright.tune.template import config_key  # noqa: E402

COPY_TARGET_GBPS = 3000.0  # the H100 copy bandwidth the issue compares against

GEMM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, A, B):
        return torch.matmul(A, B)


M = 4096
N = 4096
K = 4096


def get_inputs():
    return [torch.randn(M, K, dtype=torch.bfloat16), torch.randn(K, N, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
'''

SOFTMAX = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


rows = 16384
cols = 8192


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
'''

LAYERNORM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.norm = nn.LayerNorm(cols)

    def forward(self, x):
        return self.norm(x)


rows = 16384
cols = 8192


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return [cols]
'''

POINTWISE = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x, y):
        return F.gelu(x * 0.5 + y) * torch.sigmoid(y)


n = 2 ** 28


def get_inputs():
    return [torch.randn(n), torch.randn(n)]


def get_init_inputs():
    return []
'''

# name -> (problem source, metric, parameter domains swept, compile workers, time cap in s)
KERNELS = {
    "gemm_bf16_4096": (GEMM, "tflops", {"BLOCK_M": [64, 128, 256], "BLOCK_N": [64, 128, 256],
                                        "BLOCK_K": [32, 64, 128], "GROUP_M": [8], "num_warps": [4, 8],
                                        "num_stages": [3, 4, 5]}, 12, 170),
    "softmax_fp32_16384x8192": (SOFTMAX, "gbps", {}, 8, 110),
    "layernorm_fp32_16384x8192": (LAYERNORM, "gbps", {}, 8, 110),
    "pointwise_gelu_chain_fp32_2e28": (POINTWISE, "gbps", {}, 0, 50),
}


def tensor_bytes(values) -> int:
    total = 0
    for v in values if isinstance(values, (list, tuple)) else [values]:
        if isinstance(v, torch.Tensor):
            total += v.numel() * v.element_size()
    return total


def work_of(metric: str, problem, evaluator) -> float:
    """FLOPs of the GEMM, or bytes read + written by a memory-bound kernel."""
    if metric == "tflops":
        a, b = evaluator.inputs
        return 2.0 * a.shape[0] * a.shape[1] * b.shape[1]
    return float(tensor_bytes(evaluator.inputs) + tensor_bytes(evaluator.expected))


def rate(metric: str, work: float, ms: float | None) -> float | None:
    if not ms:
        return None
    return work / (ms * 1e-3) / (1e12 if metric == "tflops" else 1e9)


def copy_bandwidth_gbps() -> float:
    src = torch.empty(2 ** 28, dtype=torch.float32, device="cuda").uniform_()
    dst = torch.empty_like(src)
    ms, _ = bench_ms(lambda: dst.copy_(src), "cuda", 25, 300)  # noqa: F821 -- timed before the `del` below
    moved = 2 * src.numel() * src.element_size()
    del src, dst
    torch.cuda.empty_cache()
    return moved / (ms * 1e-3) / 1e9


def sweep(name: str, out_dir: Path, deadline: float, limits, smoke: bool = False) -> dict:
    """Measure every feasible configuration of the kernel's template (until its time cap)."""
    source, metric, domains, workers, cap = KERNELS[name]
    device = "cpu" if smoke else "cuda"
    if smoke:  # a CPU rehearsal under the Triton interpreter: shrunk sizes, a few configurations
        workers, cap = 0, 20
    started = time.monotonic()
    stop_at = min(deadline, started + cap)
    problem_path = out_dir / "problems" / f"{name}.py"
    problem_path.parent.mkdir(parents=True, exist_ok=True)
    if smoke:  # the Triton interpreter's bf16 tl.dot is broken on CPU: rehearse the GEMM in fp16
        source = source.replace("bfloat16", "float16")
    problem_path.write_text(source)
    problem = load_problem(problem_path, shrink=smoke)
    match = build_template(problem, limits=limits)
    template = match.template.restrict(domains=domains) if domains else match.template
    report = prune_space(template, limits)
    order = list(report.feasible)
    random.Random(0).shuffle(order)  # a truncated sweep is then a uniform sample
    if template.defaults in order:  # the default first: it is reported whatever happens
        order.remove(template.defaults)
        order.insert(0, template.defaults)
    evaluator = InProcessEvaluator(problem, device=device, compile_workers=workers, warmup_ms=25,
                                   rep_ms=5 if smoke else 60, limits=limits, workdir=out_dir / "instances" / name)
    table, measured = {}, 0
    batch = max(4, 2 * workers)
    try:
        while measured < len(order) and time.monotonic() < stop_at:
            chunk = order[measured: measured + batch]
            for m in evaluator.evaluate(template, chunk):
                table[config_key(m.params)] = {"params": m.params, "status": m.status, "time_ms": m.time_ms,
                                               "error": m.error, "resources": m.resources, "method": m.method}
            measured += len(chunk)
            print(f"  {name}: {measured}/{len(order)} measured, {time.monotonic() - started:.0f}s", flush=True)
        work = work_of(metric, problem, evaluator)  # noqa: F821 -- deleted only in `finally`
        reference = problem.make_model(0, device=device)
        with torch.no_grad():
            baseline_ms, _ = bench_ms(lambda: reference(*evaluator.inputs), device, 25, 300)  # noqa: F821 -- deleted only in `finally`
            best = min((r for r in table.values() if r["status"] == "pass"), key=lambda r: r["time_ms"], default=None)
            best_ms = None
            if best is not None:  # re-time the winner with more repetitions
                path = evaluator.instance_path(template, best["params"])
                model = problem.make_model(0, device=device, cls=load_module(path).ModelNew)
                best_ms, _ = bench_ms(lambda: model(*evaluator.inputs), device, 25, 300)  # noqa: F821 -- deleted only in `finally`
    finally:
        evaluator.close()
        del evaluator
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    default = table.get(config_key(template.defaults))
    result = {
        "name": name, "family": match.families, "kernels": match.groups, "metric": metric, "work": work,
        "problem_source": source, "template_source": template.source, "domains": domains,
        "limits": limits.to_dict(), "space": template.space_size, "feasible": len(report.feasible),
        "pruned_static": len(report.pruned), "prune_reasons": report.reasons(), "measured": len(table),
        "truncated": len(table) < len(report.feasible), "table": table,
        "baseline": {"what": "cuBLAS (torch.matmul)" if metric == "tflops" else "PyTorch eager",
                     "time_ms": baseline_ms, "rate": rate(metric, work, baseline_ms)},
        "best": None if best is None else {"params": best["params"], "sweep_ms": best["time_ms"], "time_ms": best_ms,
                                           "rate": rate(metric, work, best_ms)},
        "default": None if default is None else {"params": template.defaults, "time_ms": default["time_ms"],
                                                 "status": default["status"],
                                                 "rate": rate(metric, work, default["time_ms"])},
        "statuses": {s: sum(r["status"] == s for r in table.values()) for s in {r["status"] for r in table.values()}},
        "elapsed_s": time.monotonic() - started,
    }
    (out_dir / f"{name}.json").write_text(json.dumps(result, indent=1, default=str))
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "out"))
    parser.add_argument("--deadline", type=float, default=450.0, help="seconds for the whole run")
    parser.add_argument("--only", nargs="*", default=None, help="kernel names to sweep")
    parser.add_argument("--smoke", action="store_true",
                        help="rehearse on the CPU (TRITON_INTERPRET=1, shrunk sizes, 20 s per kernel)")
    args = parser.parse_args()
    if args.smoke:
        os.environ.setdefault("TRITON_INTERPRET", "1")
    elif not torch.cuda.is_available():
        print("needs a CUDA GPU (or --smoke for a CPU rehearsal)", file=sys.stderr)
        return 2
    start = time.monotonic()
    deadline = start + args.deadline
    out_dir = Path(args.out) / "tune_gpu"
    out_dir.mkdir(parents=True, exist_ok=True)
    import triton

    limits = detect_limits()
    device_name = "cpu (smoke)" if args.smoke else torch.cuda.get_device_name()
    summary = {"device": device_name, "torch": torch.__version__, "triton": triton.__version__,
               "python": platform.python_version(), "limits": limits.to_dict(), "sweeps": {}}
    summary["copy_gbps"] = None if args.smoke else copy_bandwidth_gbps()
    print(f"copy bandwidth: {summary['copy_gbps']} GB/s", flush=True)
    for name in args.only or list(KERNELS):
        if time.monotonic() > deadline - 20:
            summary["sweeps"][name] = {"skipped": "deadline"}
            continue
        try:
            r = sweep(name, out_dir, deadline, limits, smoke=args.smoke)
        except Exception as exc:  # noqa: BLE001 -- record and go on: one broken sweep must not lose the others
            summary["sweeps"][name] = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
            print(f"{name}: ERROR {exc}", flush=True)
            continue
        line = {k: r[k] for k in ("family", "feasible", "measured", "truncated", "baseline", "best", "default",
                                  "statuses", "elapsed_s")}
        if r["metric"] == "gbps" and r["best"] and r["best"]["rate"]:
            line["share_of_3TBps"] = r["best"]["rate"] / COPY_TARGET_GBPS
            if summary["copy_gbps"]:
                line["share_of_measured_copy"] = r["best"]["rate"] / summary["copy_gbps"]
        if r["metric"] == "tflops" and r["best"] and r["best"]["rate"] and r["baseline"]["rate"]:
            line["share_of_cublas"] = r["best"]["rate"] / r["baseline"]["rate"]
        summary["sweeps"][name] = line
        print(f"{name}: {json.dumps(line, default=str)}", flush=True)
    summary["elapsed_s"] = time.monotonic() - start
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    print(f"done in {summary['elapsed_s']:.0f}s -> {out_dir}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
