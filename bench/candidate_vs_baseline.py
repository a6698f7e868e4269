"""The same program timed as a candidate and as its eager baseline (issue 14): do they agree?

On the H100 (2026-11-23) the reference judged as its own candidate read 1.2-2.1x slower than its
baseline on fused_add_rmsnorm, moe_unpermute, moe_topk_softmax and moe_permute. Per problem this
measures, one at a time (no other judge on the GPU):

- `judged`: the real judge (sandboxed, forked worker) on the reference as candidate, with its
  eager baseline measured afresh by the real baseline subprocess: candidate ms, baseline ms, ratio;
- `in_process`: the judge's stages run in this process (no sandbox, no fork, no Landlock) on the
  same candidate: if `judged` disagrees and this agrees, the process the candidate runs in is the
  cause (confinement, forked state); if this disagrees too, the worker's stages are;
- `plain`: `timed.time_model` on the reference in this process before any stage ran.

    PYTHONPATH=. python bench/candidate_vs_baseline.py [--problems fused_add_rmsnorm,...] [--budget-s 70]
    TRITON_INTERPRET=1 PYTHONPATH=. python bench/candidate_vs_baseline.py --device cpu --set num_tokens=16 \\
        --problems fused_add_rmsnorm --set hidden_size=256     # smoke test (CPU wall time)

Writes $OUT/candidate_vs_baseline.json and prints one line per problem.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SUITE = ROOT / "examples" / "realworld"

from evidence_common import out_dir, write_json  # noqa: E402 - bench/ is on the path when run as a script
DEFAULT = "fused_add_rmsnorm,moe_unpermute,moe_topk_softmax,moe_permute"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", default=DEFAULT)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="size override (smoke tests)")
    parser.add_argument("--budget-s", type=float, default=70.0, help="start no problem after this many seconds")
    return parser.parse_args()


def config_for(args, cache: str):
    from kernelwright.judge import JudgeConfig
    from kernelwright.problem import parse_override

    return JudgeConfig(device=args.device, baselines=("eager",), trials=2, energy_ms=0, cache_dir=cache,
                       overrides=dict(parse_override(t) for t in args.set))


def candidate_file(problem: Path, folder: Path) -> Path:
    from kernelwright.tune.from_reference import reference_candidate

    path = folder / f"{problem.stem}_as_candidate.py"
    path.write_text(reference_candidate(problem.read_text()))
    return path


def ms(stats) -> float | None:
    return round(stats.median_ms, 5) if stats is not None else None


def judged(problem: Path, candidate: Path, config) -> dict:
    from kernelwright.judge import judge

    verdict = judge(str(problem), str(candidate), config)
    base = verdict.baselines.eager if verdict.baselines else None
    row = {"status": verdict.status, "candidate_ms": ms(verdict.timing), "baseline_ms": ms(base),
           "candidate_note": verdict.timing.note if verdict.timing else None,
           "baseline_repeats": (verdict.baselines.measured.get("eager", {}).get("repeats") if verdict.baselines else None),
           "stage_seconds": verdict.stage_seconds}
    if verdict.error:
        row["error"] = verdict.error[:500]
    return row


def in_process(problem: Path, candidate: Path, config) -> dict:
    from kernelwright.judge import timing
    from kernelwright.judge.request import make_request
    from kernelwright.judge.checker.main import evaluate
    from kernelwright.judge.checker.stages.context import ResultWriter

    settings = type(config).from_dict({**config.to_dict(), "baselines": []})
    request = make_request(problem, candidate, settings, Path(tempfile.mkdtemp(prefix="kw-cvb-")))
    verdict = evaluate(request, ResultWriter(request, ""), {"timing": timing}, [])
    return {"status": verdict.status, "candidate_ms": ms(verdict.timing), "error": (verdict.error or "")[:300]}


def plain(problem: Path, config) -> dict:
    from kernelwright.judge import timed, timing
    from kernelwright.judge.grad import runner_for
    from kernelwright.problem import load_problem

    loaded = load_problem(problem, config.overrides, shrink=False)
    device = "cuda" if config.device in ("auto", "cuda") else config.device
    model = loaded.make_model(config.seed, device)
    call = timed.model_call(model, timed.timing_inputs(loaded, config, device), runner_for(loaded, device), config.seed)
    call()
    result = timed.time_model(call, config, device, timing.measure)
    return {"reference_ms": ms(result.stats), "repeats": result.repeats}


def main() -> int:
    args = parse_args()
    out = out_dir()
    folder = Path(tempfile.mkdtemp(prefix="kw-cvb-"))
    config = config_for(args, str(folder / "cache"))
    start, rows = time.monotonic(), []
    for name in [n for n in args.problems.split(",") if n]:
        if time.monotonic() - start > args.budget_s:
            rows.append({"problem": name, "skipped": "budget"})
            continue
        problem = SUITE / f"{name}.py"
        candidate = candidate_file(problem, folder)
        row = {"problem": name}
        for part, run, run_args in (("plain", plain, (problem, config)), ("judged", judged, (problem, candidate, config)),
                                    ("in_process", in_process, (problem, candidate, config))):
            try:
                row[part] = run(*run_args)
            except Exception as exc:  # noqa: BLE001 - one part failing must not cost the others
                row[part] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        j = row["judged"]
        if j.get("candidate_ms") and j.get("baseline_ms"):
            row["ratio_judged"] = round(j["candidate_ms"] / j["baseline_ms"], 3)
        if row["in_process"].get("candidate_ms") and j.get("baseline_ms"):
            row["ratio_in_process"] = round(row["in_process"]["candidate_ms"] / j["baseline_ms"], 3)
        rows.append(row)
        print(f"{name:20s} judged cand {j.get('candidate_ms')} base {j.get('baseline_ms')} "
              f"(x{row.get('ratio_judged')}) | in-process cand {row['in_process'].get('candidate_ms')} "
              f"(x{row.get('ratio_in_process')}) | plain {row['plain'].get('reference_ms')} ms", flush=True)
    record = {"date": time.strftime("%Y-%m-%d"), "args": vars(args), "seconds": round(time.monotonic() - start, 1),
              "problems": rows}
    write_json(out / "candidate_vs_baseline.json", record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
