"""Seed and judge problems under each rule set (issue 34's evidence): per problem and rule set, whether
`kernelwright seed` could write a seed (else its reason), the judge's verdict on it and its speedups
over eager and torch.compile; then the pass rate per rule set and the geomean speedups of the passing
seeds. Writes OUT/seed_suite.json and OUT/seed_suite.md.

    python bench/seed_suite.py PROBLEM_OR_FOLDER ... --out DIR [--rules kernelbench strict]
                               [--set NAME=VALUE ...] [--limit N]

On a GPU the seeds are written there (inductor's autotuner picks the launches) and timed against
eager and torch.compile. On a CPU (TRITON_INTERPRET=1) the verdicts are real but the times are the
interpreter's: use it to check the script, not to measure.
"""
from __future__ import annotations

import argparse
import ast
import json
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def problems(paths: list[str], limit: int | None) -> list[Path]:
    found: list[Path] = []
    for text in paths:
        path = Path(text)
        found += sorted(path.glob("*.py")) if path.is_dir() else [path]
    return found[:limit] if limit else found


def one(problem: Path, rules: str, out: Path, overrides: dict, judge_config) -> dict:
    from kernelwright.judge import judge
    from kernelwright.seed import SeedError, SeedOptions, seed_problem

    row = {"problem": problem.stem, "rules": rules}
    target = out / "seeds" / f"{problem.stem}.{rules}.py"
    started = time.monotonic()
    try:
        seed = seed_problem(problem, target, SeedOptions(rules=rules, overrides=overrides))
    except SeedError as exc:
        return {**row, "seeded": False, "reason": str(exc), "seed_s": round(time.monotonic() - started, 1)}
    except Exception as exc:  # noqa: BLE001 -- a bug of the seed writer: recorded as such, the suite goes on
        return {**row, "seeded": False, "crashed": True, "reason": f"seed crashed: {type(exc).__name__}: {exc}"}
    row.update(seeded=True, kernels=len(seed.kernels), torch_calls=seed.torch_calls,
               seed_s=round(time.monotonic() - started, 1))
    import dataclasses

    verdict = judge(str(problem), str(target), dataclasses.replace(judge_config, rules=rules, overrides=overrides))
    row.update(status=verdict.status, error=(verdict.error or "")[:300], speedup=dict(verdict.speedup),
               device=verdict.device)
    return row


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summary(rows: list[dict], rule_sets: list[str]) -> dict:
    out = {}
    for rules in rule_sets:
        mine = [r for r in rows if r["rules"] == rules]
        passed = [r for r in mine if r.get("status") == "pass"]
        out[rules] = {"problems": len(mine), "seeded": sum(r["seeded"] for r in mine), "passed": len(passed),
                      "geomean_vs_eager": geomean([r["speedup"].get("eager") for r in passed]),
                      "geomean_vs_compile": geomean([r["speedup"].get("compile_default") for r in passed])}
    return out


def markdown(record: dict) -> str:
    def x(value):
        return "-" if value is None else f"{value:.3g}x"

    lines = ["# Seeds judged (kernelwright seed + kernelwright judge)", "", f"device: {record['device']}", "",
             "| rule set | problems | seeded | passed | geomean vs eager | geomean vs torch.compile |",
             "|---|---|---|---|---|---|"]
    for rules, s in record["summary"].items():
        lines.append(f"| {rules} | {s['problems']} | {s['seeded']} | {s['passed']} | {x(s['geomean_vs_eager'])} | "
                     f"{x(s['geomean_vs_compile'])} |")
    lines += ["", "| problem | rule set | result | × eager | × torch.compile | why not |", "|---|---|---|---|---|---|"]
    for r in record["rows"]:
        result = r.get("status", "no seed")
        why = (r.get("reason") or r.get("error") or "").replace("|", "\\|").replace("\n", " ")[:160]
        speed = r.get("speedup", {})
        lines.append(f"| {r['problem']} | {r['rules']} | {result} | {x(speed.get('eager'))} | "
                     f"{x(speed.get('compile_default'))} | {why} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", help="problem files or folders of them")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rules", nargs="+", default=["kernelbench", "strict"])
    parser.add_argument("--set", dest="sets", action="append", default=[], help="size override NAME=VALUE")
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args()
    import torch

    from kernelwright.judge.config import JudgeConfig

    cuda = torch.cuda.is_available()
    if not cuda:
        os.environ.setdefault("TRITON_INTERPRET", "1")
    overrides = {k: ast.literal_eval(v) for k, v in (s.split("=", 1) for s in args.sets)}
    config = JudgeConfig(baselines=("eager", "compile_default") if cuda else ("eager",))
    (args.out / "seeds").mkdir(parents=True, exist_ok=True)
    rows = []
    for problem in problems(args.paths, args.limit):
        for rules in args.rules:
            rows.append(one(problem, rules, args.out, overrides, config))
            print(json.dumps(rows[-1])[:400], flush=True)
    record = {"device": torch.cuda.get_device_name() if cuda else "cpu (Triton interpreter)",
              "torch": torch.__version__, "rows": rows, "summary": summary(rows, args.rules)}
    (args.out / "seed_suite.json").write_text(json.dumps(record, indent=1))
    (args.out / "seed_suite.md").write_text(markdown(record))
    print(markdown(record))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
