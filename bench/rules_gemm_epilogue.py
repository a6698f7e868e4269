"""A level-2 GEMM + epilogue problem under the rule sets: faster than eager and torch.compile?

    PYTHONPATH=. KW_KERNELBENCH=... python bench/rules_gemm_epilogue.py [--problem 95_Matmul_Add_Swish_Tanh_GELU_Hardtanh]
        [--budget-s 150] [--name rules_gemm_epilogue] [--device cuda]

Judges the hand-written candidates of bench/candidates/rules/<problem>__*.py at KernelBench's full
sizes with eager and torch.compile baselines, through the judge's pool as the product runs them:

- `__cublas_epilogue`: cuBLAS keeps the fp32 GEMM (`torch.mm`), one Triton kernel does the whole
  epilogue in place -- allowed under `kernelbench` (the default rule set), judged under it;
- `__tf32x3`: the GEMM in Triton with 3xTF32 on the tensor cores and the epilogue fused on the
  accumulator -- every op the candidate's own, judged under `strict`.

Writes $OUT/<name>.json (verdicts, environment, peaks) and $OUT/<name>.md (a table ready for
docs/benchmarks.md). `--device cpu` is a smoke test of this script (sizes shrunk, CPU wall times).
"""
from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures import as_completed
from pathlib import Path

from evidence_common import CANDIDATES, fmt, out_dir, problem_path, write_json

RULES_FOR = {"cublas_epilogue": "kernelbench", "tf32x3": "strict"}  # variant -> rule set it is judged under


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problem", default="95_Matmul_Add_Swish_Tanh_GELU_Hardtanh")
    parser.add_argument("--budget-s", type=float, default=150.0)
    parser.add_argument("--name", default="rules_gemm_epilogue")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--trials", type=int, default=5)
    return parser.parse_args()


def candidates(problem: str) -> list[tuple[str, Path, str]]:
    found = []
    for path in sorted((CANDIDATES / "rules").glob(f"{problem}__*.py")):
        variant = path.stem.rsplit("__", 1)[1]
        found.append((variant, path, RULES_FOR.get(variant, "kernelbench")))
    if not found:
        raise SystemExit(f"no candidates bench/candidates/rules/{problem}__*.py")
    return found


def row(variant: str, rules: str, verdict) -> dict:
    baselines = verdict.baselines
    timing, floor = verdict.timing, verdict.floor
    return {
        "candidate": variant, "rules": rules, "status": verdict.status, "error": verdict.error,
        "median_ms": timing.median_ms if timing else None,
        "eager_ms": baselines.eager.median_ms if baselines and baselines.eager else None,
        "compile_ms": baselines.compile_default.median_ms if baselines and baselines.compile_default else None,
        "speedup_eager": verdict.speedup.get("eager"), "speedup_compile": verdict.speedup.get("compile_default"),
        "pct_of_floor": floor.pct_of_floor if floor else None, "floor_peak": floor.peak_kind if floor else None,
        "margin": (verdict.precision or {}).get("margin"),
        "torch_work": verdict.work.torch if verdict.work else None,
        "flags": [f"{f.code}:{f.severity}" for f in verdict.flags if f.severity != "info"],
    }


def markdown(record: dict) -> str:
    env = record["environment"]
    first = record["verdicts"][0] if record["verdicts"] else {}
    sizes = ("KernelBench's sizes" if not first.get("shrunk") else
             "sizes shrunk for the CPU (" + ", ".join(f"{k}={v}" for k, v in (first.get("overrides") or {}).items()) + ")")
    lines = [f"Problem `{record['problem']}` at {sizes}; {env.get('gpu', record['args']['device'])}, "
             f"torch {env.get('torch')}, triton {env.get('triton')}; eager and torch.compile (default mode) "
             "baselines with TF32 off; median of the judge's timing (CUDA events, L2 flushed, on a GPU).", "",
             "| candidate | rule set | status | median ms | eager ms | compile ms | x eager | x compile | "
             "% of floor | margin (worst) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in record["rows"]:
        margin = (r["margin"] or {}).get("worst")
        lines.append(f"| `{r['candidate']}` | {r['rules']} | {r['status']} | {fmt(r['median_ms'], '.4f')} | "
                     f"{fmt(r['eager_ms'], '.4f')} | {fmt(r['compile_ms'], '.4f')} | {fmt(r['speedup_eager'], '.2f')} | "
                     f"{fmt(r['speedup_compile'], '.2f')} | {fmt(r['pct_of_floor'], '.1f')} ({r['floor_peak'] or '-'}) | "
                     f"{fmt(margin, '.3g')} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    args = parse_args()
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    from kernelwright.judge import JudgeConfig
    from kernelwright.judge.env import environment
    from kernelwright.judge.peaks import ensure_peaks
    from kernelwright.judge.scheduling.pool import JudgePool

    import torch

    started = time.perf_counter()
    out = out_dir()
    problem = problem_path(args.problem)
    record = {"problem": problem.name, "args": vars(args), "environment": environment(args.device), "rows": [],
              "verdicts": [], "skipped": []}
    if args.device.startswith("cuda") and torch.cuda.is_available():
        record["peaks"] = ensure_peaks("cuda").to_dict()
        torch.cuda.empty_cache()
    pool = JudgePool(per_gpu=2, gpus=[] if args.device == "cpu" else None, cpu_workers=1)
    futures = {}
    for variant, path, rules in candidates(args.problem):
        config = JudgeConfig(rules=rules, device=args.device, trials=args.trials,
                             baselines=("eager", "compile_default"), timeout_s=240.0)
        futures[pool.submit(problem, path, config, name=f"{variant}/{rules}")] = (variant, rules)
    try:
        for future in as_completed(futures, timeout=max(1.0, args.budget_s - (time.perf_counter() - started))):
            (variant, rules), verdict = futures[future], future.result()
            record["rows"].append(row(variant, rules, verdict))
            record["verdicts"].append(verdict.to_dict())
            print(record["rows"][-1], flush=True)
            write_json(out / f"{args.name}.json", record)
    except FutureTimeout:
        record["skipped"] = sorted(f"{v}/{r}" for f, (v, r) in futures.items() if not f.done())
    record["wall_s"] = round(time.perf_counter() - started, 1)
    write_json(out / f"{args.name}.json", record)
    text = markdown(record) + (f"\nnot finished within the budget: {record['skipped']}\n" if record["skipped"] else "")
    (out / f"{args.name}.md").write_text(text)
    print(text)
    os._exit(0)  # evaluations past the budget die with us


if __name__ == "__main__":
    raise SystemExit(main())
