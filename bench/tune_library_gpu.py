"""The built-in template library on a GPU, in two parts (each under its own time budget):

- autopilot: `optimize_without_llm` (match, judge the default instance, tune within --evals
  evaluations, verify) on the shared problems with long rows (softmax over 393216 columns, batch
  and group norm over millions of values per channel or group, a norm of the whole tensor, an
  L2 norm over 65535) and on the pooling problems; per problem the default and the best instance
  x eager, x torch.compile and % of the speed-of-light floor, and the tuning cost;
- coverage: every level-1/level-2 problem at its KernelBench size, the library's default instance
  judged for correctness (no timing): which problems have a template, which pass the judge. The
  judge runs several at once, as many as fit an estimate of GPU memory (4 x inputs and output).

    PYTHONPATH=. KW_KERNELBENCH=/path/to/kernelbench python bench/tune_library_gpu.py \\
        --parts autopilot coverage --autopilot-budget-s 150 --coverage-budget-s 150

Writes $OUT/tune_library_gpu.json and $OUT/tune_library_gpu.md. Sizes: --sizes bench (default)
cuts the batch of the autopilot problems so each input is about 1 GB (the dimension that makes the
rows long or the window large is kept, and the table says which batch ran); --sizes full runs
KernelBench's own sizes. The coverage part always runs KernelBench's sizes.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.evidence_common import kernelbench_root  # noqa: E402

# bench script, not product code: the problems are named here. Batch cut so each input is ~1 GB.
AUTOPILOT = {
    "level1/23_Softmax.py": {"batch_size": 512},
    "level1/33_BatchNorm.py": {"batch_size": 16},
    "level1/35_GroupNorm_.py": {"batch_size": 16},
    "level1/37_FrobeniusNorm_.py": {"batch_size": 16},
    "level1/39_L2Norm_.py": {"batch_size": 4096},
    "level1/41_Max_Pooling_1D.py": {"batch_size": 16},
    "level1/43_Max_Pooling_3D.py": {"batch_size": 4},
    "level1/45_Average_Pooling_2D.py": {"batch_size": 1},
}


def _verdict_row(verdict) -> dict:
    if verdict is None:
        return {}
    floor = verdict.floor
    return {"status": verdict.status, "median_ms": verdict.timing.median_ms if verdict.timing else None,
            "x_eager": verdict.speedup.get("eager"), "x_compile": verdict.speedup.get("compile_default"),
            "pct_of_floor": floor.pct_of_floor if floor else None}


def autopilot_one(rel: str, overrides: dict, evals: int, workers: int, out: Path) -> dict:
    from kernelwright.judge import JudgeConfig
    from kernelwright.tune.autopilot import optimize_without_llm
    from kernelwright.tune.cache import TuneCache

    problem = kernelbench_root() / rel
    config = JudgeConfig(trials=3, baselines=("eager", "compile_default"), timeout_s=180)  # bounded tail
    started = time.monotonic()
    try:
        result = optimize_without_llm(problem, overrides=overrides, strategy="auto", budget_evals=evals,
                                      judge_config=config, workers=workers, cache=TuneCache(out / "tune_cache.sqlite"),
                                      workdir=Path(tempfile.mkdtemp(prefix="kw-tlg-")))
    except Exception as exc:  # noqa: BLE001 - a bench row, not a crash: the table says what failed
        return {"problem": rel, "overrides": overrides, "error": f"{type(exc).__name__}: {exc}"[:400]}
    row = {"problem": rel, "overrides": overrides, "matched": result.matched, "message": result.message[:300],
           "kernels": result.kernels, "best_params": result.best_params, "default": _verdict_row(result.default_verdict),
           "best": _verdict_row(result.best_verdict), "tried": [[p, s] for p, s in result.tried],
           "cost": result.cost.to_dict(), "wall_s": round(time.monotonic() - started, 1)}
    print(json.dumps({k: row[k] for k in ("problem", "default", "best", "wall_s")}), flush=True)
    return row


def run_autopilot(args, out: Path) -> list[dict]:
    chosen = {rel: ({} if args.sizes == "full" else o) for rel, o in AUTOPILOT.items()}
    deadline = time.monotonic() + args.autopilot_budget_s
    rows, pending = [], {}
    with ThreadPoolExecutor(args.concurrent) as pool:
        queue = list(chosen.items())
        while queue or pending:
            while queue and len(pending) < args.concurrent and time.monotonic() < deadline:
                rel, overrides = queue.pop(0)
                pending[pool.submit(autopilot_one, rel, overrides, args.evals, args.workers, out)] = rel
            if not pending:
                break
            done, _ = wait(pending, timeout=max(1.0, deadline + 60 - time.monotonic()), return_when=FIRST_COMPLETED)
            if not done:  # well past the budget: report what is still running and stop waiting
                rows += [{"problem": rel, "error": "still running at the end of the budget"} for rel in pending.values()]
                break
            for future in done:
                rows.append(future.result())
                pending.pop(future)
        rows += [{"problem": rel, "error": "not started: time budget spent"} for rel, _ in queue]
    return rows


def _bytes_on_meta(problem) -> int:
    """Bytes of the inputs and outputs of one forward, from shapes alone (meta device)."""
    import torch

    with torch.device("meta"):
        torch.manual_seed(0)
        inputs = list(problem.module.get_inputs())
        model = problem.Model(*problem.init_inputs(0))
        out = model(*inputs)
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)] + [
        x for x in (out if isinstance(out, (tuple, list)) else [out]) if isinstance(x, torch.Tensor)]
    return sum(t.numel() * t.element_size() for t in tensors)


def run_coverage(args, out: Path) -> dict:
    from kernelwright.judge import JudgeConfig
    from kernelwright.judge.scheduling.pool import JudgePool
    from kernelwright.problem import load_problem
    from kernelwright.tune.library import NoTemplate, build_template

    kb = kernelbench_root()
    rows, jobs = {}, []
    folder = out / "coverage_instances"
    folder.mkdir(parents=True, exist_ok=True)
    for level in args.levels:
        for path in sorted((kb / f"level{level}").glob("*.py")):
            key = f"level{level}/{path.name}"
            try:
                problem = load_problem(path, shrink=False)
                match = build_template(problem)
                need = _bytes_on_meta(problem)
            except NoTemplate as exc:
                rows[key] = {"matched": False, "reason": str(exc).split(": ", 1)[-1][:300]}
                continue
            except Exception as exc:  # noqa: BLE001 - a problem that does not load or trace: a row says so
                rows[key] = {"matched": False, "reason": f"{type(exc).__name__}: {exc}"[:300]}
                continue
            candidate = folder / f"level{level}_{path.stem}.py"
            candidate.write_text(match.template.default_instance())
            rows[key] = {"matched": True, "families": match.families, "gb": round(need / 2**30, 2)}
            jobs.append((need, key, str(path), str(candidate)))
    jobs.sort()  # small first: most problems get judged within the budget
    config = JudgeConfig(trials=2, baselines=(), time=False, shrink=False, timeout_s=120)
    budget_bytes = args.gpu_memory_gb * 2**30
    deadline = time.monotonic() + args.coverage_budget_s
    in_flight: dict = {}
    with JudgePool(config, compile_workers=args.coverage_workers, per_gpu=args.coverage_workers) as pool:
        while (jobs and time.monotonic() < deadline) or in_flight:
            used = sum(4 * need for need, _ in in_flight.values())
            while jobs and time.monotonic() < deadline and (not in_flight or used + 4 * jobs[0][0] <= budget_bytes) \
                    and len(in_flight) < args.coverage_workers:
                need, key, problem, candidate = jobs.pop(0)
                in_flight[pool.submit(problem, candidate)] = (need, key)
                used += 4 * need
            done, _ = wait(in_flight, timeout=max(1.0, deadline + 60 - time.monotonic()), return_when=FIRST_COMPLETED)
            if not done:
                for _, key in in_flight.values():
                    rows[key]["status"] = "not finished within the budget"
                pool.close(wait=False)  # the judges still running end by their own timeout
                break
            for future in done:
                _, key = in_flight.pop(future)
                verdict = future.result()
                rows[key].update(status=verdict.status, stage=verdict.stage, error=(verdict.error or "")[:300])
                print(f"{key}: {verdict.status}", flush=True)
    for _, key, _, _ in jobs:
        rows[key]["status"] = "not judged: time budget spent"
    return {"problems": len(rows), "matched": sum(r["matched"] for r in rows.values()),
            "passed": sum(r.get("status") == "pass" for r in rows.values()), "rows": rows}


def markdown(report: dict) -> str:
    lines = []
    if report.get("autopilot"):
        lines += ["| problem | batch | kernels | default x eager / x compile / % floor | best x eager | best x compile "
                  "| best % floor | best ms | evaluations (cached) | GPU-s | wall s |", "|" + "---|" * 11]
        for r in report["autopilot"]:
            if "error" in r:
                lines.append(f"| {r['problem']} | {r.get('overrides', '')} | {r['error']} |" + " |" * 8)
                continue
            d, b, c = r["default"], r["best"], r["cost"]
            lines.append(
                f"| {r['problem']} | {r['overrides'].get('batch_size', 'full')} | {'; '.join(r['kernels'])} | "
                f"{_f(d.get('x_eager'))} / {_f(d.get('x_compile'))} / {_f(d.get('pct_of_floor'), '.1f')} | "
                f"{_f(b.get('x_eager'))} | {_f(b.get('x_compile'))} | {_f(b.get('pct_of_floor'), '.1f')} | "
                f"{_f(b.get('median_ms'), '.4g')} | {c['evaluations']} ({c['cached']}) | {c['device_s']:.1f} | {r['wall_s']} |")
    if report.get("coverage"):
        cov = report["coverage"]
        lines += ["", f"Coverage at KernelBench sizes: {cov['matched']} of {cov['problems']} matched, "
                      f"{cov['passed']} passed the judge.", "", "| problem | families | GB | verdict |", "|---|---|---|---|"]
        for key, r in sorted(cov["rows"].items()):
            if r["matched"]:
                lines.append(f"| {key} | {'+'.join(r['families'])} | {r['gb']} | {r.get('status')} "
                             f"{(r.get('error') or '')[:120]} |")
    return "\n".join(lines) + "\n"


def _f(value, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="*", default=["autopilot", "coverage"], choices=["autopilot", "coverage"])
    parser.add_argument("--sizes", choices=["bench", "full"], default="bench")
    parser.add_argument("--evals", type=int, default=4, help="evaluations per autopilot problem (default first)")
    parser.add_argument("--workers", type=int, default=1, help="instances judged at once per autopilot problem")
    parser.add_argument("--concurrent", type=int, default=8, help="autopilot problems at once")
    parser.add_argument("--autopilot-budget-s", type=float, default=150)
    parser.add_argument("--levels", nargs="*", default=["1", "2"])
    parser.add_argument("--coverage-budget-s", type=float, default=150)
    parser.add_argument("--coverage-workers", type=int, default=8)
    parser.add_argument("--gpu-memory-gb", type=float, default=64, help="coverage: estimated GPU memory in flight")
    args = parser.parse_args()
    out = Path(os.environ.get("OUT", "out"))
    out.mkdir(parents=True, exist_ok=True)
    import torch

    report: dict = {"device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
                    "date": time.strftime("%Y-%m-%d"), "args": vars(args)}
    started = time.monotonic()
    if "autopilot" in args.parts:
        report["autopilot"] = run_autopilot(args, out)
        report["autopilot_s"] = round(time.monotonic() - started, 1)
    if "coverage" in args.parts:
        began = time.monotonic()
        report["coverage"] = run_coverage(args, out)
        report["coverage_s"] = round(time.monotonic() - began, 1)
    (out / "tune_library_gpu.json").write_text(json.dumps(report, indent=1, default=str))
    text = markdown(report)
    (out / "tune_library_gpu.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
