"""The main job without an LLM, on a GPU: `kernelwright optimize` on shared KernelBench problems.

For problems the built-in template library covers (decided by the library itself, in sorted order,
at most --per-family per template family, no problem named here), run `kernelwright optimize PROBLEM --max-evals N` in its own
process at the problem's real sizes, then read the run store: best passing speedup against eager
and torch.compile, how many instances were judged and passed. Prints a table and writes
$OUT/optimize_autopilot.json.

    PYTHONPATH=. python bench/optimize_autopilot_gpu.py --problems 4 --max-evals 4 --budget-s 420
"""
from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.evidence_common import kernelbench_root  # noqa: E402


def covered(problem: Path) -> str | None:
    """The template family that covers the whole problem, or None (checked on the meta device)."""
    from kernelwright.problem import load_problem
    from kernelwright.tune.library import build_template

    try:
        match = build_template(load_problem(problem))
    except Exception:  # noqa: BLE001 -- no template for this problem: listed as such
        return None
    return "+".join(match.families)


def best_of(run_dir: Path) -> dict:
    """Best passing verdict of a run, from its SQLite store."""
    db = next(run_dir.rglob("run.sqlite"), None)
    if db is None:
        return {"error": "no run store"}
    con = sqlite3.connect(db)
    rows = con.execute("select status, speedup_eager, speedup_compile, median_ms from verdicts").fetchall()
    passing = [r for r in rows if r[0] == "pass" and r[1] is not None]
    best = max(passing, key=lambda r: r[1], default=None)
    return {"judged": len(rows), "passed": len(passing),
            "speedup_eager": best and best[1], "speedup_compile": best and best[2], "median_ms": best and best[3]}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--problems", type=int, default=5)
    parser.add_argument("--per-family", type=int, default=2, help="at most this many problems per template family")
    parser.add_argument("--max-evals", type=int, default=4)
    parser.add_argument("--budget-s", type=float, default=420)
    args = parser.parse_args()
    out = Path(os.environ.get("OUT", "out"))
    out.mkdir(parents=True, exist_ok=True)
    kb = kernelbench_root()
    problems = sorted((kb / "level1").glob("*.py")) + sorted((kb / "level2").glob("*.py"))
    start, results = time.monotonic(), []
    for problem in problems:
        if len(results) >= args.problems or time.monotonic() - start > args.budget_s:
            break
        family = covered(problem)
        if family is None or sum(r["template"] == family for r in results) >= args.per_family:
            continue
        left = args.budget_s - (time.monotonic() - start)
        run_dir = out / "runs" / problem.stem
        cmd = [sys.executable, "-m", "kernelwright.cli.app", "optimize", str(problem), "--max-evals",
               str(args.max_evals), "--run-dir", str(run_dir), "--quiet"]
        t0 = time.monotonic()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=max(30.0, left))
            tail = (proc.stdout + proc.stderr)[-400:]
        except subprocess.TimeoutExpired:
            tail = "timed out"
        row = {"problem": f"{problem.parent.name}/{problem.stem}", "template": family,
               "wall_s": round(time.monotonic() - t0, 1), **best_of(run_dir), "tail": tail}
        results.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "tail"}), flush=True)
    (out / "optimize_autopilot.json").write_text(json.dumps(results, indent=1))
    print("\nproblem | template | judged | passed | best x eager | best x compile | median ms | wall s")
    for r in results:
        print(f"{r['problem']} | {r['template']} | {r.get('judged')} | {r.get('passed')} | "
              f"{r.get('speedup_eager')} | {r.get('speedup_compile')} | {r.get('median_ms')} | {r['wall_s']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
