"""Judge every candidate in bench/candidates on the GPU and print what the judge found.

    PYTHONPATH=. python bench/judge_gpu_evidence.py [--set correct|adversarial|all] [--sizes bench|full]
        [--baselines eager,compile_default] [--budget-s 540] [--compile-workers 16]

Correct candidates (`<problem>__cuda.py`, `<problem>__triton.py`) should pass, with timings,
speedups over torch eager / torch.compile and their percentage of the speed-of-light floor.
Adversarial candidates (`adversarial/*.py`, each naming its hack, problem and expected flags) should
all fail. CUDA extensions are first built in parallel with CUDA hidden (the documented precompile
path), then every candidate is judged one at a time by `kernelwright.judge.judge` in its own
sandboxed process. Stops starting new candidates after --budget-s and says which were skipped.
Writes $OUT/judge_evidence.json (verdicts, environment, peaks) and $OUT/judge_evidence.txt.
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from evidence_common import (Candidate, adversarial_candidates, correct_candidates, flag_summary, fmt, out_dir,
                             overrides_for, precompile, print_table, write_json)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", choices=("correct", "adversarial", "all"), default="all")
    parser.add_argument("--sizes", choices=("bench", "full"), default="bench",
                        help="bench: inputs trimmed to about 1 GB keeping the critical dimensions; full: KernelBench sizes")
    parser.add_argument("--baselines", default="eager,compile_default")
    parser.add_argument("--budget-s", type=float, default=540.0)
    parser.add_argument("--compile-workers", type=int, default=16)
    parser.add_argument("--trials", type=int, default=None, help="default: JudgeConfig's")
    parser.add_argument("--only", default="", help="substring filter on candidate names")
    parser.add_argument("--device", default="cuda", help="cpu: a smoke test of this script (sizes shrunk)")
    return parser.parse_args()


def make_config(candidate: Candidate, args, cache_dir: Path):
    from kernelwright.judge import JudgeConfig

    config = JudgeConfig(device=args.device, overrides=overrides_for(candidate.problem, args.sizes),
                         baselines=tuple(b for b in args.baselines.split(",") if b), cache_dir=str(cache_dir),
                         timeout_s=180.0, compile_timeout_s=400.0)
    if args.trials:
        config.trials = args.trials
    return config


def verdict_row(candidate: Candidate, verdict) -> list[str]:
    timing = verdict.timing
    caught = "" if candidate.backend != "adversarial" else ("caught" if not verdict.passed else "MISSED")
    expected = [f for f in candidate.expect_flags if f != "correctness"]
    seen = {f.code for f in verdict.flags}
    if candidate.backend == "adversarial" and expected:
        caught += " (flag seen)" if seen & set(expected) else " (other reason)"
    return [candidate.problem.stem[:34], candidate.label[-34:] if candidate.backend == "adversarial" else candidate.backend,
            verdict.status, caught, flag_summary(verdict)[:60], fmt(timing.median_ms if timing else None, ".4f"),
            fmt(verdict.speedup.get("eager"), ".2f"), fmt(verdict.speedup.get("compile_default"), ".2f"),
            fmt(verdict.floor.pct_of_floor if verdict.floor else None, ".1f"),
            f"{verdict.process.wall_s:.0f}" if verdict.process else "-"]


def main() -> int:
    args = parse_args()
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # Triton kernels run in its interpreter
    import torch

    from kernelwright.judge import judge
    from kernelwright.judge.env import environment
    from kernelwright.judge.peaks import ensure_peaks

    out = out_dir()
    cache_dir = Path.home() / ".cache" / "kernelwright"
    started = time.perf_counter()
    candidates = []
    if args.set in ("correct", "all"):
        candidates += correct_candidates()
    if args.set in ("adversarial", "all"):
        candidates += adversarial_candidates()
    candidates = [c for c in candidates if args.only in c.label]
    record = {"environment": environment(args.device), "args": vars(args), "verdicts": [], "skipped": []}
    if args.device.startswith("cuda") and torch.cuda.is_available():
        record["peaks"] = ensure_peaks("cuda", cache_dir=cache_dir).to_dict()
        torch.cuda.empty_cache()
    record["precompile_s"] = precompile(candidates, cache_dir, args.compile_workers) if args.device != "cpu" else {}
    print(f"precompiled {len(record['precompile_s'])} CUDA candidates in {time.perf_counter() - started:.0f} s: "
          f"{record['precompile_s']}", flush=True)
    rows = []
    for candidate in candidates:
        if time.perf_counter() - started > args.budget_s:
            record["skipped"].append(candidate.label)
            continue
        verdict = judge(candidate.problem, candidate.path, make_config(candidate, args, cache_dir))
        rows.append(verdict_row(candidate, verdict))
        record["verdicts"].append({"candidate": candidate.label, "backend": candidate.backend,
                                   "expect_pass": candidate.expect_pass, "expect_flags": candidate.expect_flags,
                                   "verdict": verdict.to_dict()})
        print(" | ".join(rows[-1]), flush=True)
        write_json(out / "judge_evidence.json", record)  # after each verdict: a timeout keeps what was done
    header = ["problem", "backend", "status", "adversarial", "flags", "median ms", "x eager", "x compile",
              "% floor", "wall s"]
    print("\n=== judge evidence ===")
    table = print_table(rows, header)
    summary = summarize(record)
    print(summary)
    (out / "judge_evidence.txt").write_text(table + "\n" + summary + "\n")
    write_json(out / "judge_evidence.json", record)
    return 0


def summarize(record: dict) -> str:
    correct = [v for v in record["verdicts"] if v["backend"] != "adversarial"]
    adversarial = [v for v in record["verdicts"] if v["backend"] == "adversarial"]
    passed = sum(v["verdict"]["status"] == "pass" for v in correct)
    caught = sum(v["verdict"]["status"] != "pass" for v in adversarial)
    lines = [f"correct candidates passing: {passed}/{len(correct)}; adversarial caught: {caught}/{len(adversarial)}"]
    if record["skipped"]:
        lines.append(f"skipped (budget): {', '.join(record['skipped'])}")
    peaks = record.get("peaks")
    if peaks:
        lines.append(f"peaks: copy {peaks['copy_gbps']} GB/s, TFLOP/s {peaks['tflops']} ({peaks['source']})")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
