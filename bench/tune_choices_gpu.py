"""Issue 33, points 2 and 3 on the GPU: do the declared layout and algorithm choices pay, and does
a second tuning start from the first's best?

Per problem (the library template of its forward, pruned for this GPU):

- choices: for each non-block parameter of the template with more than one feasible value (split-K,
  program order, persistent grid, precision, the direct product of a depthwise conv), --per-value
  feasible configurations of each value in ONE sweep (`judge.api.judge_sweep`), the fastest sweep
  time per value, and the fastest configuration of each value judged in full (`judge()`);
- seeds: the autopilot twice with sweeps (--evals judge evaluations, sweeps of --configs, no
  measurement cache) sharing one scratch `SeedCache`: the first tuning's best, where it stands among
  the second tuning's configurations (1: right after the defaults), and both tunings' best times.

    PYTHONPATH=. KW_KERNELBENCH=/path/to/kernelbench python bench/tune_choices_gpu.py --out bench/results/choices33

Writes OUT/tune_choices_gpu.json and OUT/tune_choices_gpu.md (the table docs/benchmarks.md takes).
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.evidence_common import kernelbench_root  # noqa: E402
from bench.tune_sweep_gpu import log, template_for  # noqa: E402

# bench script, not product code: problems whose templates offer a choice at KernelBench sizes
# (split-K: 128 rows by 32768 columns, K = 32768; a persistent grid: 1.6 G elements; GROUP_M)
PROBLEMS = ["level2/59_Matmul_Swish_Scaling.py", "level1/19_ReLU.py", "level1/1_Square_matrix_multiplication_.py"]
CHOICE_KINDS = ("order", "split", "grid", "precision", "algorithm", "vector")


def choices(template, feasible: list[dict]) -> dict[str, list]:
    """Non-block parameters with more than one feasible value."""
    kinds = template.kinds()
    found = {}
    for name, kind in kinds.items():
        values = sorted({c[name] for c in feasible}, key=repr)
        if kind in CHOICE_KINDS and len(values) > 1:
            found[name] = values
    return found


def measure_choice(path: Path, template, feasible: list[dict], name: str, values: list, args, config) -> dict:
    from kernelwright.judge import judge
    from kernelwright.judge.api import judge_sweep
    from kernelwright.judge.request import SourceText
    from kernelwright.judge.sweep import SweepInstance

    rng = random.Random(args.seed)
    configs = []
    for value in values:
        pool = [c for c in feasible if c[name] == value]
        rng.shuffle(pool)
        configs += pool[: args.per_value]
    started = time.monotonic()
    result, _ = judge_sweep(path, [SweepInstance(c, template.instantiate(c)) for c in configs], config)
    row = {"parameter": name, "kind": template.kinds()[name], "configurations": len(configs),
           "sweep_s": round(time.monotonic() - started, 1), "values": []}
    for value in values:
        timed = sorted((c for c in result.configs if c.ok and c.params[name] == value), key=lambda c: c.time_ms)
        entry = {"value": value, "timed": len(timed), "sweep_ms": timed[0].time_ms if timed else None}
        if timed:
            verdict = judge(path, SourceText(template.instantiate(timed[0].params), "instance"), config)
            entry.update(params=timed[0].params, status=verdict.status,
                         full_ms=verdict.timing.median_ms if verdict.timing else None)
        row["values"].append(entry)
    return row


def measure_seeds(path: Path, args, config) -> dict:
    from kernelwright.tune.autopilot import optimize_without_llm
    from kernelwright.tune.seeds import SeedCache

    seeds = SeedCache(Path(tempfile.mkdtemp(prefix="kw-seeds-bench-")))
    runs = []
    for _ in range(2):
        started = time.monotonic()
        result = optimize_without_llm(path, strategy="auto", budget_evals=args.evals, judge_config=config, cache=None,
                                      seed=args.seed, sweep=args.configs, seeds=seeds,
                                      workdir=Path(tempfile.mkdtemp(prefix="kw-seeds-bench-")))
        best = result.best_verdict
        runs.append({"best_params": result.best_params, "best_ms": best.timing.median_ms if best and best.timing else None,
                     "tried": [p for p, _ in result.tried], "wall_s": round(time.monotonic() - started, 1),
                     "message": result.message[:300]})
    first, second = runs
    where = next((i for i, p in enumerate(second["tried"]) if p == first["best_params"]), None)
    return {"first_best_ms": first["best_ms"], "second_best_ms": second["best_ms"], "first_best_at": where,
            "first_best": first["best_params"], "runs": [{k: v for k, v in r.items() if k != "tried"} for r in runs]}


def one_problem(rel: str, args) -> dict:
    from kernelwright.judge import JudgeConfig

    path = kernelbench_root() / rel
    config = JudgeConfig(baselines=(), timeout_s=180, overrides=dict(args.set))
    try:
        template, feasible = template_for(path, dict(args.set))
    except Exception as exc:  # noqa: BLE001 - a bench row, not a crash
        return {"problem": rel, "error": f"{type(exc).__name__}: {exc}"[:400]}
    row = {"problem": rel, "template": template.name, "feasible": len(feasible), "kinds": template.kinds(),
           "choices": []}
    for name, values in choices(template, feasible).items():
        row["choices"].append(measure_choice(path, template, feasible, name, values, args, config))
        log(rel, "choice:", row["choices"][-1])
    row["seeds"] = measure_seeds(path, args, config)
    log(rel, "seeds:", {k: v for k, v in row["seeds"].items() if k != "runs"})
    print(json.dumps(row, default=str), flush=True)
    return row


def _n(value) -> str:
    return "-" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)


def markdown(rows: list[dict]) -> str:
    lines = ["| problem | choice (kind) | per value: fastest sweep ms / full ms | second tuning: first's best at | "
             "best ms, first / second tuning |", "|---|---|---|---|---|"]
    for row in rows:
        if "error" in row:
            lines.append(f"| {row['problem']} | {row['error']} | | | |")
            continue
        seeds = row["seeds"]
        tail = (f"| {_n(seeds['first_best_at'])} | {_n(seeds['first_best_ms'])} / {_n(seeds['second_best_ms'])} |")
        if not row["choices"]:
            lines.append(f"| {row['problem']} | none feasible at these sizes | " + tail)
        for choice in row["choices"]:
            per = "; ".join(f"{v['value']}: {_n(v['sweep_ms'])} / {_n(v.get('full_ms'))}" for v in choice["values"])
            lines.append(f"| {row['problem']} | {choice['parameter']} ({choice['kind']}) | {per} " + tail)
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--problems", nargs="*", default=PROBLEMS)
    parser.add_argument("--per-value", type=int, default=12, help="configurations of each choice value in its sweep")
    parser.add_argument("--configs", type=int, default=16, help="configurations per sweep of the seeded tunings")
    parser.add_argument("--evals", type=int, default=4, help="judge evaluations per seeded tuning")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", type=lambda t: (t.split("=")[0], int(t.split("=")[1])), action="append", default=[],
                        metavar="NAME=INT", help="size override for every problem (a CPU smoke run: tiny sizes)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "tune_choices")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = [one_problem(rel, args) for rel in args.problems]
    (args.out / "tune_choices_gpu.json").write_text(json.dumps(rows, indent=1, default=str))
    (args.out / "tune_choices_gpu.md").write_text(markdown(rows))
    print(markdown(rows))


if __name__ == "__main__":
    main()
