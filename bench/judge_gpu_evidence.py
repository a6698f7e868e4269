"""Judge candidates of bench/candidates on the GPU through the judge's pool and print what it found.

    PYTHONPATH=. python bench/judge_gpu_evidence.py [--set correct|adversarial|all] [--only a,b]
        [--sizes bench|full] [--baselines eager,compile_default] [--budget-s 540] [--per-gpu 4]
        [--compile-workers 16] [--name evidence] [--rules kernelbench,library,strict]

Correct candidates (`<problem>__cuda.py`, `<problem>__triton.py`) should pass, with timings,
speedups over torch eager / torch.compile and their percentage of the speed-of-light floor.
Adversarial candidates (`adversarial/*.py`, each naming its hack, problem and expected flags) should
all fail. Everything goes through `JudgePool` as the product runs it: CUDA extensions precompiled
in parallel with CUDA hidden, then up to --per-gpu sandboxed evaluations at once on the GPU, taking
turns for timing (the device lock). A CUDA verdict with `compile.cached` true shows the evaluation
found the precompiled build. After --budget-s the script stops waiting, lists what did not finish
and exits (its workers die with it). Writes $OUT/<name>.json (verdicts with stage times,
environment, peaks) after every verdict. With several `--rules`, every candidate is judged under each
rule set (in the order given, so the first set's verdicts come first when the budget is short).
"""
from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures import as_completed
from pathlib import Path

from evidence_common import (Candidate, adversarial_candidates, correct_candidates, flag_summary, fmt, out_dir,
                             overrides_for, print_table, write_json)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", default="all",
                        help="comma-separated: correct, adversarial, red_team, legit, all (every one of them)")
    parser.add_argument("--sizes", choices=("bench", "full"), default="bench",
                        help="bench: inputs trimmed to about 1 GB keeping the critical dimensions; full: KernelBench sizes")
    parser.add_argument("--baselines", default="eager,compile_default")
    parser.add_argument("--budget-s", type=float, default=540.0)
    parser.add_argument("--compile-workers", type=int, default=16)
    parser.add_argument("--per-gpu", type=int, default=4, help="evaluations at once on the GPU")
    parser.add_argument("--trials", type=int, default=None, help="default: JudgeConfig's")
    parser.add_argument("--only", default="", help="comma-separated substrings of candidate names (any)")
    parser.add_argument("--name", default="judge_evidence", help="output file stem under $OUT")
    parser.add_argument("--device", default="cuda", help="cpu: a smoke test of this script (sizes shrunk)")
    parser.add_argument("--rules", default="kernelbench", help="comma-separated rule sets; each candidate under each")
    return parser.parse_args()


def make_config(candidate: Candidate, args, cache_dir: Path, rules: str = "kernelbench"):
    from kernelwright.judge import JudgeConfig

    config = JudgeConfig(device=args.device, overrides=overrides_for(candidate.problem, args.sizes), rules=rules,
                         baselines=tuple(b for b in args.baselines.split(",") if b), cache_dir=str(cache_dir),
                         timeout_s=180.0, compile_timeout_s=400.0)
    if args.trials:
        config.trials = args.trials
    return config


def allowed(candidate: Candidate, rules: str) -> bool:
    """A legit candidate that names its rule sets (`# rules: kernelbench`) is judged under those only."""
    import re

    named = re.search(r"^# rules: (.*)$", candidate.path.read_text(), re.M)
    return candidate.backend != "legit" or not named or rules in named.group(1).split(",")


def verdict_row(candidate: Candidate, verdict) -> list[str]:
    timing = verdict.timing
    caught = "" if candidate.backend != "adversarial" else ("caught" if not verdict.passed else "MISSED")
    expected = [f for f in candidate.expect_flags if f != "correctness"]
    seen = {f.code for f in verdict.flags}
    if candidate.backend == "adversarial" and expected:
        caught += " (flag seen)" if seen & set(expected) else " (other reason)"
    extension = verdict.compile is not None and verdict.compile.backend in ("cuda", "cpp")
    built = "-" if not extension else ("hit" if verdict.compile.cached else f"{verdict.compile.seconds:.0f}s")
    energy = (verdict.energy or {}).get("joules_per_call")
    return [candidate.problem.stem[:34], candidate.label[-34:] if candidate.backend == "adversarial" else candidate.backend,
            verdict.rules or "-", verdict.status, caught, flag_summary(verdict)[:60], fmt(timing.median_ms if timing else None, ".4f"),
            fmt(verdict.speedup.get("eager"), ".2f"), fmt(verdict.speedup.get("compile_default"), ".2f"),
            fmt(verdict.floor.pct_of_floor if verdict.floor else None, ".1f"), fmt(energy * 1e3 if energy else None, ".3f"),
            built, f"{verdict.process.wall_s:.0f}" if verdict.process else "-", stage_summary(verdict)]


def stage_summary(verdict) -> str:
    """The stages that took a second or more, largest first."""
    big = sorted(((v, k) for k, v in verdict.stage_seconds.items() if v >= 1.0), reverse=True)
    return " ".join(f"{k}={v:.0f}" for v, k in big[:5]) or "-"


HEADER = ["problem", "backend", "rules", "status", "adversarial", "flags", "median ms", "x eager", "x compile",
          "% floor", "mJ/call", "build", "wall s", "stages >= 1 s"]


def main() -> int:
    args = parse_args()
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # Triton kernels run in its interpreter
    import torch

    from kernelwright.judge.env import environment
    from kernelwright.judge.peaks import ensure_peaks
    from kernelwright.judge.scheduling.pool import JudgePool

    out = out_dir()
    cache_dir = Path.home() / ".cache" / "kernelwright"
    started = time.perf_counter()
    sets = {s.strip() for s in args.set.split(",")}
    sets = {"correct", "adversarial", "red_team", "legit"} if "all" in sets else sets
    candidates = []
    if "correct" in sets:
        candidates += correct_candidates()
    if "adversarial" in sets:
        candidates += adversarial_candidates()
    if "red_team" in sets:
        candidates += adversarial_candidates("red_team")
    if "legit" in sets:
        candidates += adversarial_candidates("legit", "legit")
    wanted = [w for w in args.only.split(",") if w]
    candidates = [c for c in candidates if not wanted or any(w in c.label for w in wanted)]
    record = {"environment": environment(args.device), "args": vars(args), "verdicts": [], "skipped": []}
    if args.device.startswith("cuda") and torch.cuda.is_available():
        record["peaks"] = ensure_peaks("cuda", cache_dir=cache_dir).to_dict()
        torch.cuda.empty_cache()
    pool = JudgePool(compile_workers=args.compile_workers, per_gpu=args.per_gpu,
                     gpus=[] if args.device == "cpu" else None, cpu_workers=2)
    rule_sets = [r.strip() for r in args.rules.split(",") if r.strip()]
    futures = {pool.submit(c.problem, c.path, make_config(c, args, cache_dir, rules), name=f"{c.label}@{rules}"):
               (c, rules) for rules in rule_sets for c in candidates if allowed(c, rules)}
    rows = []
    try:
        for future in as_completed(futures, timeout=max(1.0, args.budget_s - (time.perf_counter() - started))):
            (candidate, _), verdict = futures[future], future.result()
            rows.append(verdict_row(candidate, verdict))
            record["verdicts"].append({"candidate": candidate.label, "backend": candidate.backend, "rules": verdict.rules,
                                       "expect_pass": candidate.expect_pass, "expect_flags": candidate.expect_flags,
                                       "verdict": verdict.to_dict()})
            print(" | ".join(rows[-1]), flush=True)
            write_json(out / f"{args.name}.json", record)  # after each verdict: a timeout keeps what was done
    except FutureTimeout:
        record["skipped"] = sorted(f"{c.label}@{rules}" for f, (c, rules) in futures.items() if not f.done())
    record["wall_s"] = round(time.perf_counter() - started, 1)
    print(f"\n=== {args.name} ===")
    table = print_table(rows, HEADER)
    summary = summarize(record)
    print(summary)
    write_json(out / f"{args.name}.json", record)
    (out / f"{args.name}.txt").write_text(table + "\n" + summary + "\n")
    os._exit(0)  # do not wait for evaluations still running past the budget: they die with us


def summarize(record: dict) -> str:
    correct = [v for v in record["verdicts"] if v["backend"] != "adversarial"]  # legit ones too: they must pass
    adversarial = [v for v in record["verdicts"] if v["backend"] == "adversarial"]
    passed = sum(v["verdict"]["status"] == "pass" for v in correct)
    caught = sum(v["verdict"]["status"] != "pass" for v in adversarial)
    cuda = [v for v in correct if v["backend"] == "cuda" and v["verdict"].get("compile")]
    hits = sum(bool(v["verdict"]["compile"].get("cached")) for v in cuda)
    lines = [f"correct candidates passing: {passed}/{len(correct)}; adversarial caught: {caught}/{len(adversarial)}; "
             f"CUDA builds found precompiled: {hits}/{len(cuda)}; wall {record.get('wall_s')} s"]
    for rules in sorted({v.get("rules") or "" for v in adversarial}):
        mine = [v for v in adversarial if (v.get("rules") or "") == rules]
        missed = [v["candidate"] for v in mine if v["verdict"]["status"] == "pass"]
        lines.append(f"adversarial under {rules or '?'}: caught {len(mine) - len(missed)}/{len(mine)}"
                     + (f"; MISSED: {', '.join(missed)}" if missed else ""))
    if record["skipped"]:
        lines.append(f"not finished within the budget: {', '.join(record['skipped'])}")
    peaks = record.get("peaks")
    if peaks:
        lines.append(f"peaks: copy {peaks['copy_gbps']} GB/s, TFLOP/s {peaks['tflops']} ({peaks['source']})")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
