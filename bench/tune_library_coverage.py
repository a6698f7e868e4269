"""How much of KernelBench the built-in template library covers with no LLM.

For every problem of the given levels: build the library template (sizes shrunk to the CPU budget
when there is no GPU), then judge its default instance with the real judge (a fresh sandboxed
process per candidate; Triton runs in the interpreter on a CPU). Records, per problem, whether a
template matched (and which kernels), or why not, and the judge's verdict.

    PYTHONPATH=. python bench/tune_library_coverage.py ../shared/kernelbench --levels 1 2 --out out/coverage

`--batch N` caps the batch (a problem's `batch_size`) after shrinking: the Triton interpreter runs
convolutions slowly (minutes per shrunk problem on a loaded machine), and the batch is a loop the
kernels repeat, not a case they handle differently. `--only A B` judges the problems whose path
contains one of the strings.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernelbench", type=Path)
    parser.add_argument("--levels", nargs="*", default=["1", "2"])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")) / "coverage")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--batch", type=int, default=None, help="cap batch_size (after shrinking)")
    parser.add_argument("--timeout-s", type=float, default=300.0, help="judge timeout per problem")
    parser.add_argument("--only", nargs="*", default=None)
    args = parser.parse_args()

    import torch

    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")
    from kernelwright.judge import JudgeConfig
    from kernelwright.judge.scheduling.pool import JudgeJob, JudgePool
    from kernelwright.problem import load_problem
    from kernelwright.tune.library import NoTemplate, build_template

    args.out.mkdir(parents=True, exist_ok=True)
    shrink = not torch.cuda.is_available()
    config = JudgeConfig(trials=args.trials, baselines=(), time=False, shrink=shrink, timeout_s=args.timeout_s)
    rows, jobs = {}, []
    for level in args.levels:
        for path in sorted((args.kernelbench / f"level{level}").glob("*.py")):
            key = f"level{level}/{path.name}"
            if args.only and not any(part in key for part in args.only):
                continue
            try:
                problem = load_problem(path, shrink=shrink)
                overrides = _batch_cap(problem, args.batch)
                if overrides:
                    problem = load_problem(path, overrides=overrides, shrink=shrink)
                match = build_template(problem)
            except NoTemplate as exc:
                rows[key] = {"matched": False, "reason": str(exc).split(": ", 1)[-1]}
                continue
            except Exception as exc:  # noqa: BLE001 -- a problem that does not even load
                rows[key] = {"matched": False, "reason": f"{type(exc).__name__}: {exc}"}
                continue
            candidate = args.out / "instances" / f"level{level}_{path.stem}.py"
            candidate.parent.mkdir(parents=True, exist_ok=True)
            candidate.write_text(match.template.default_instance())
            rows[key] = {"matched": True, "families": match.families, "kernels": match.groups, "overrides": overrides}
            jobs.append((key, str(path), str(candidate), overrides))
    print(f"{sum(r['matched'] for r in rows.values())} of {len(rows)} problems matched; judging", flush=True)
    start = time.monotonic()
    pool = JudgePool(config, compile_workers=args.workers, cpu_workers=args.workers)
    items = [JudgeJob(p, c, dataclasses.replace(config, overrides=o)) for _, p, c, o in jobs]
    for index, verdict in pool.iter_judge(items):
        key = jobs[index][0]
        rows[key].update(status=verdict.status, stage=verdict.stage, error=(verdict.error or "")[:500],
                         flags=[f"{f.severity}:{f.code}" for f in verdict.flags])
        print(f"{key}: {verdict.status} ({time.monotonic() - start:.0f}s)", flush=True)
    passed = [k for k, r in rows.items() if r.get("status") == "pass"]
    summary = {"problems": len(rows), "matched": sum(r["matched"] for r in rows.values()), "passed": len(passed),
               "device": "cuda" if not shrink else "cpu (Triton interpreter, shrunk sizes)", "rows": rows}
    (args.out / "coverage.json").write_text(json.dumps(summary, indent=1))
    print(f"matched {summary['matched']}, passed the judge {summary['passed']} of {summary['problems']}")
    return 0


def _batch_cap(problem, cap: int | None) -> dict:
    """Overrides that cap the problem's batch_size (after shrinking) at `cap`, or none."""
    batch = getattr(problem.module, "batch_size", None)
    if cap is None or not isinstance(batch, int) or batch <= cap:
        return {}
    return {**problem.overrides, "batch_size": cap}


if __name__ == "__main__":
    raise SystemExit(main())
