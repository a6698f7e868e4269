"""Reference outputs computed once per problem (judge/refstore.py): the first candidate of a problem
computes and stores them, every later one reads them.

    PYTHONPATH=. python bench/reference_store.py [--problem 23_Softmax] [--n 4] [--device cuda]
        [--overrides '{"batch_size": 256}'] [--trials 5]

Judges the problem's bench candidate (bench/candidates/<problem>__triton.py) `--n` times one after
another with a fresh cache (no timing: the reference stage is what is measured), and reports per
evaluation the seconds of the stages `reference` (computed, or looked up, verified and loaded) and
`reference_store` (written and published; the first evaluation only), whether it hit, and the entry's
size. Writes $OUT/reference_store.json.
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time

from evidence_common import CANDIDATES, fmt, out_dir, print_table, problem_path, write_json


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problem", default="23_Softmax")
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--overrides", default="{}", help="JSON sizes; {} keeps the problem's full size")
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()

    from kernelwright.judge import JudgeConfig
    from kernelwright.judge.api import judge

    problem = problem_path(args.problem)
    candidate = CANDIDATES / f"{problem.stem}__triton.py"
    cache = tempfile.mkdtemp(prefix="kw-refstore-bench-")
    config = JudgeConfig(trials=args.trials, device=args.device, time=False, overrides=json.loads(args.overrides),
                         cache_dir=cache)
    rows, records = [], []
    for index in range(args.n):
        started = time.perf_counter()
        verdict = judge(problem, candidate, config)
        wall = time.perf_counter() - started
        cache_record = (verdict.reference or {}).get("cache") or {}
        seconds = verdict.stage_seconds
        records.append({"index": index, "status": verdict.status, "wall_s": round(wall, 3), "cache": cache_record,
                        "stage_seconds": seconds, "error": verdict.error})
        rows.append([str(index), verdict.status, str(cache_record.get("hit")), fmt(seconds.get("reference")),
                     fmt(seconds.get("reference_store")), fmt(cache_record.get("verify_s")),
                     fmt(cache_record.get("bytes", 0) / 2**20, ".1f") if cache_record.get("bytes") else "-",
                     fmt(wall)])
    table = print_table(rows, ["#", "status", "hit", "reference s", "store s", "verify s", "entry MiB", "wall s"])
    later = [r["stage_seconds"].get("reference", 0.0) for r in records[1:]]
    summary = {"problem": problem.name, "device": args.device, "overrides": json.loads(args.overrides),
               "trials": args.trials, "first_reference_s": records[0]["stage_seconds"].get("reference"),
               "first_store_s": records[0]["stage_seconds"].get("reference_store"),
               "later_reference_s_median": statistics.median(later) if later else None,
               "evaluations": records, "table": table}
    write_json(out_dir() / "reference_store.json", summary)
    print(json.dumps({k: v for k, v in summary.items() if k not in ("evaluations", "table")}))


if __name__ == "__main__":
    main()
