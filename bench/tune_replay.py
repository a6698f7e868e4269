"""Replay the search strategies against sweeps measured by bench/tune_gpu.py (runs on a CPU).

For each saved sweep and each strategy (exhaustive, random, tpe, cmaes, gp) it runs the tuning
loop with the recorded table as evaluator, for budgets of 10% and 25% of the measured space, over
many seeds, and reports the share of the exhaustive optimum reached (optimum time / best time
found). Writes tune_replay.json and tune_replay.md next to the sweeps.

    python bench/tune_replay.py out/tune_gpu           # the folder tune_gpu.py wrote
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelwright.tune.replay import load_sweep, markdown_table, strategy_shares  # noqa: E402
from kernelwright.tune.strategies import TUNE_STRATEGIES  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="folder with the sweep JSON files (and summary.json)")
    parser.add_argument("--seeds", type=int, default=50, help="seeds per strategy (random, tpe, cmaes)")
    parser.add_argument("--gp-seeds", type=int, default=20, help="seeds for gp (slowest to replay)")
    parser.add_argument("--strategies", nargs="*", default=list(TUNE_STRATEGIES))
    parser.add_argument("--fractions", nargs="*", type=float, default=[0.10, 0.25])
    args = parser.parse_args()
    files = sorted(p for p in args.folder.glob("*.json") if p.name not in ("summary.json", "tune_replay.json"))
    if not files:
        print(f"no sweep files in {args.folder}", file=sys.stderr)
        return 2
    report, tables = {"seeds": args.seeds, "gp_seeds": args.gp_seeds, "sweeps": {}}, []
    for path in files:
        sweep = load_sweep(path)
        if sweep.optimum_ms is None:
            report["sweeps"][sweep.name] = {"skipped": "no configuration passed"}
            continue
        start = time.monotonic()
        stats = strategy_shares(sweep, args.strategies, tuple(args.fractions), seeds=args.seeds,
                                seeds_by_strategy={"gp": args.gp_seeds})
        report["sweeps"][sweep.name] = {
            "measured": len(sweep.configs), "truncated": sweep.truncated, "optimum_ms": sweep.optimum_ms,
            "shares": [s.to_dict() for s in stats], "replay_s": time.monotonic() - start,
        }
        table = markdown_table(sweep.name, stats, len(sweep.configs))
        tables.append(table + ("\n\n(truncated sweep: the optimum is that of the measured sample)"
                               if sweep.truncated else ""))
        print(table + "\n", flush=True)
    (args.folder / "tune_replay.json").write_text(json.dumps(report, indent=1))
    (args.folder / "tune_replay.md").write_text("\n\n".join(tables) + "\n")
    print(f"wrote {args.folder / 'tune_replay.json'} and tune_replay.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
