"""Issue 33 point 1 on the GPU: configurations benchmarked inside one judge evaluation.

Per problem (the library template of its forward, pruned for this GPU):

- sweep: --configs feasible configurations (the defaults and a seeded sample) in ONE sweep request
  (`judge.api.judge_sweep`): configurations per evaluation, wall seconds of the evaluation and per
  configuration (the sweep's own seconds per configuration too), what was skipped and why;
- full: the sweep's fastest --singles configurations judged as normal evaluations (`judge()`, five
  trials, steady timing, no baselines), seconds per evaluation, and their full time against their
  sweep time (does one repeat rank like the steady timing?);
- tuning at equal judge evaluations: the autopilot with --evals judge evaluations, once with sweeps
  of --configs (`sweep=`) and once one configuration per evaluation: configurations measured and the
  best instance's fully judged time.

    PYTHONPATH=. KW_KERNELBENCH=/path/to/kernelbench python bench/tune_sweep_gpu.py --out bench/results/sweep33

Writes OUT/tune_sweep_gpu.json and OUT/tune_sweep_gpu.md (the table docs/benchmarks.md takes).
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

# bench script, not product code: the problems are named here (a GEMM, an elementwise op, a long
# row reduction, a GEMM with an epilogue; each has a library template with a space above 30)
PROBLEMS = ["level1/1_Square_matrix_multiplication_.py", "level1/19_ReLU.py", "level1/23_Softmax.py",
            "level2/53_Gemm_Scaling_Hardtanh_GELU.py"]


def log(*parts) -> None:
    print(time.strftime("%H:%M:%S"), *parts, file=sys.stderr, flush=True)


def template_for(path: Path, overrides: dict):
    import torch

    from kernelwright.problem import load_problem
    from kernelwright.tune.hardware import detect_limits
    from kernelwright.tune.library import build_template
    from kernelwright.tune.prune import prune_space

    limits = detect_limits()
    shrink = not torch.cuda.is_available()  # as the judge does (a CPU run is a smoke test of this script)
    template = build_template(load_problem(path, overrides=overrides, shrink=shrink), limits=limits).template
    return template, prune_space(template, limits).feasible


def sample(template, feasible: list[dict], n: int, seed: int) -> list[dict]:
    from kernelwright.tune.template import config_key

    rest = [c for c in feasible if config_key(c) != config_key(template.defaults)]
    random.Random(seed).shuffle(rest)
    return [dict(template.defaults)] + rest[: n - 1]


def run_sweep(path: Path, template, configs: list[dict], config) -> tuple[dict, object]:
    from kernelwright.judge.api import judge_sweep
    from kernelwright.judge.sweep import SweepInstance

    instances = [SweepInstance(c, template.instantiate(c)) for c in configs]
    started = time.monotonic()
    result, verdict = judge_sweep(path, instances, config)
    wall = time.monotonic() - started
    timed = [c for c in result.configs if c.ok]
    row = {"configurations": len(configs), "wall_s": round(wall, 2), "s_per_configuration": round(wall / len(configs), 3),
           "checker_s_per_configuration": round(sum(c.seconds for c in result.configs) / len(configs), 3),
           "timed": len(timed), "counts": result.counts(), "ended_early": result.ended_early,
           "stage_seconds": verdict.stage_seconds, "method": result.method,
           "skipped": [{"params": c.params, "status": c.status, "reason": c.reason[:200]}
                       for c in result.configs if not c.ok][:10]}
    return row, result


def run_full(path: Path, template, ranked, singles: int, config) -> list[dict]:
    from kernelwright.judge import judge
    from kernelwright.judge.request import SourceText

    rows = []
    for found in ranked[:singles]:
        started = time.monotonic()
        verdict = judge(path, SourceText(template.instantiate(found.params), "instance"), config)
        rows.append({"params": found.params, "sweep_ms": found.time_ms, "status": verdict.status,
                     "full_ms": verdict.timing.median_ms if verdict.timing else None,
                     "wall_s": round(time.monotonic() - started, 2)})
    return rows


def run_tuning(path: Path, evals: int, sweep: int, config, seed: int) -> dict:
    from kernelwright.tune.autopilot import optimize_without_llm

    started = time.monotonic()
    result = optimize_without_llm(path, strategy="auto", budget_evals=evals, judge_config=config, cache=None,
                                  seed=seed, sweep=sweep, workdir=Path(tempfile.mkdtemp(prefix="kw-sweep-bench-")))
    best = result.best_verdict
    return {"sweep": sweep, "evaluations": evals, "judge_runs": result.cost.judge_runs,
            "configurations": len(result.tried), "best_params": result.best_params,
            "best_ms": best.timing.median_ms if best and best.timing else None,
            "wall_s": round(time.monotonic() - started, 1), "message": result.message[:300]}


def one_problem(rel: str, args) -> dict:
    from kernelwright.judge import JudgeConfig

    path = kernelbench_root() / rel
    config = JudgeConfig(baselines=(), timeout_s=180, overrides=dict(args.set))
    try:
        template, feasible = template_for(path, dict(args.set))
    except Exception as exc:  # noqa: BLE001 - a bench row, not a crash
        return {"problem": rel, "error": f"{type(exc).__name__}: {exc}"[:400]}
    configs = sample(template, feasible, args.configs, args.seed)
    row = {"problem": rel, "template": template.name, "feasible": len(feasible)}
    log(rel, f"sweep of {len(configs)} of {len(feasible)} feasible configurations")
    row["sweep"], result = run_sweep(path, template, configs, config)
    log(rel, "sweep:", result.summary(), f"{row['sweep']['wall_s']} s")
    row["full"] = run_full(path, template, result.ranked, args.singles, config)
    log(rel, "full:", row["full"])
    row["tuning"] = []
    for sweep in (args.configs, 0):
        row["tuning"].append(run_tuning(path, args.evals, sweep, config, args.seed))
        log(rel, "tuning:", row["tuning"][-1])
    print(json.dumps({"problem": rel, "sweep": {k: row["sweep"][k] for k in ("configurations", "wall_s", "timed")},
                      "full": row["full"], "tuning": row["tuning"]}), flush=True)
    return row


def _n(value) -> str:
    return "-" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)


def markdown(rows: list[dict]) -> str:
    lines = ["| problem | configurations in one sweep | timed | sweep s | s / configuration | full evaluation s "
             "| sweep ms vs full ms (fastest) | tuned best ms, sweeps (configs) | tuned best ms, one per evaluation "
             "(configs) |", "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        if "error" in row:
            lines.append(f"| {row['problem']} | {row['error']} |" + " |" * 7)
            continue
        sweep, full, tuning = row["sweep"], row["full"], row["tuning"]
        full_s = sum(f["wall_s"] for f in full) / len(full) if full else None
        first = full[0] if full else {}
        swept, single = tuning[0], tuning[1]
        lines.append(f"| {row['problem']} | {sweep['configurations']} | {sweep['timed']} | {_n(sweep['wall_s'])} "
                     f"| {_n(sweep['s_per_configuration'])} | {_n(full_s)} "
                     f"| {_n(first.get('sweep_ms'))} vs {_n(first.get('full_ms'))} "
                     f"| {_n(swept['best_ms'])} ({swept['configurations']}) "
                     f"| {_n(single['best_ms'])} ({single['configurations']}) |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--problems", nargs="*", default=PROBLEMS)
    parser.add_argument("--configs", type=int, default=32, help="configurations per sweep")
    parser.add_argument("--singles", type=int, default=3, help="the sweep's fastest judged in full")
    parser.add_argument("--evals", type=int, default=2, help="judge evaluations per tuning (both ways)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", type=lambda t: (t.split("=")[0], int(t.split("=")[1])), action="append", default=[],
                        metavar="NAME=INT", help="size override for every problem (a CPU smoke run: tiny sizes)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "tune_sweep")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = [one_problem(rel, args) for rel in args.problems]
    (args.out / "tune_sweep_gpu.json").write_text(json.dumps(rows, indent=1, default=str))
    (args.out / "tune_sweep_gpu.md").write_text(markdown(rows))
    print(markdown(rows))


if __name__ == "__main__":
    main()
