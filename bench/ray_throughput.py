"""A shared-problem suite judged through Ray, beside the local judge pool: candidates per minute.

    PYTHONPATH=. python bench/ray_throughput.py [--modes local,ray] [--per-gpu 4] [--repeat 1]
        [--baselines eager] [--budget-s 220] [--device cuda|cpu] [--limit N]

The suite is every hand-written candidate of bench/candidates (CUDA C++ and Triton ModelNews of
shared KernelBench problems, bench sizes). Each mode judges all of it with a cold cache of its own
(builds, baselines), so both pay the same compile and baseline work:

- `local`: `JudgePool(config, compile_workers=os.cpu_count(), per_gpu=P).judge_many(...)`, as
  `kernelwright optimize --eval local` judges;
- `ray`: `RayJudgePool(RayOptions(per_gpu=P))` on a local Ray instance started here (`ray.init()`
  with this machine's CPUs and GPUs), as `--eval ray` judges: one judge actor per GPU
  (`num_gpus=1`), CUDA extensions built first by one-CPU Ray tasks, up to P sandboxed evaluations
  at once in the actor, timing alone on the GPU.

Throughput is candidates judged per minute of wall time from the first submission to the last
verdict; Ray's start (cluster and actors) is reported on its own. Each verdict's `judged_on` (host,
GPU UUID, Ray node) is summarised. `--device cpu` is a smoke test of this script (Triton
candidates under the interpreter, shrunk sizes). Writes $OUT/ray_throughput.json.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from evidence_common import correct_candidates, fmt, out_dir, overrides_for, print_table, write_json


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modes", default="local,ray")
    parser.add_argument("--per-gpu", type=int, default=4, help="evaluations at once on one GPU (both modes)")
    parser.add_argument("--repeat", type=int, default=1, help="judge the suite this many times per mode")
    parser.add_argument("--baselines", default="eager")
    parser.add_argument("--budget-s", type=float, default=220.0, help="a mode that would start after this is skipped")
    parser.add_argument("--device", default="cuda", help="cpu: a smoke test (Triton candidates only, shrunk)")
    parser.add_argument("--limit", type=int, default=0, help="only the first N candidates (smoke tests)")
    return parser.parse_args()


def suite(args, cache: Path) -> list[tuple]:
    """(problem path, candidate path, config) for every candidate of the suite."""
    from kernelwright.judge import JudgeConfig

    jobs = []
    for candidate in correct_candidates():
        if args.device == "cpu" and candidate.backend != "triton":
            continue  # no CUDA toolchain without a GPU
        overrides = overrides_for(candidate.problem, "bench") if args.device != "cpu" else {}
        config = JudgeConfig(device=args.device, overrides=overrides, cache_dir=str(cache), timeout_s=180.0,
                             compile_timeout_s=400.0, baselines=tuple(b for b in args.baselines.split(",") if b))
        jobs += [(candidate.problem, candidate.path, config)] * args.repeat
    return jobs[:args.limit] if args.limit else jobs


def run_local(jobs, args) -> tuple[list, float]:
    from kernelwright.judge.scheduling.pool import JudgePool

    gpus = [] if args.device == "cpu" else None
    with JudgePool(jobs[0][2], compile_workers=os.cpu_count(), per_gpu=args.per_gpu, gpus=gpus,
                   cpu_workers=2) as pool:
        return pool.judge_many(jobs), 0.0


def run_ray(jobs, args) -> tuple[list, float]:
    from kernelwright.judge.scheduling.node import NodeJob
    from kernelwright.search.drivers.ray_pool import RayJudgePool, RayOptions

    node_jobs = [NodeJob(Path(p).read_text(), Path(p).name, Path(c).read_text(), Path(c).stem, config.to_dict())
                 for p, c, config in jobs]
    started = time.perf_counter()
    actors = None if args.device != "cpu" else 2
    pool = RayJudgePool(RayOptions(per_gpu=args.per_gpu, actors=actors))
    pool.start()
    start_s = time.perf_counter() - started
    print(f"ray: cluster and {len(pool.actors())} judge actor(s) up in {start_s:.1f} s: {pool.actors()}", flush=True)
    try:
        return pool.judge_many(node_jobs), start_s
    finally:
        pool.close()


def summary(mode: str, verdicts: list, wall: float, start_s: float) -> dict:
    judged = [v for v in verdicts if hasattr(v, "status")]
    where = sorted({_where(v) for v in judged})
    record = {
        "mode": mode, "n": len(verdicts), "passed": sum(v.passed for v in judged), "lost": len(verdicts) - len(judged),
        "wall_s": round(wall, 2), "per_minute": round(len(verdicts) / (wall / 60), 2), "start_s": round(start_s, 2),
        "cached_builds": sum(bool(v.compile and v.compile.cached) for v in judged),
        "median_process_s": round(statistics.median(v.process.wall_s for v in judged if v.process), 2) if judged else None,
        "judged_on": where, "errors": [f"{v.candidate}: {v.error}" for v in judged if not v.passed][:4],
    }
    print(f"{mode}: {record['per_minute']:.1f} candidates/minute ({record['n']} in {wall:.1f} s, "
          f"{record['passed']} passed, {record['cached_builds']} cached builds, start {start_s:.1f} s) on {where}",
          flush=True)
    return record


def _where(verdict) -> str:
    on = verdict.environment.get("judged_on") or {}
    gpus = ",".join(g.get("uuid", "")[:12] for g in on.get("gpus", [])) or verdict.environment.get("gpu", "cpu")
    node = (on.get("ray_node_id") or "")[:8]
    return f"{on.get('hostname') or verdict.environment.get('hostname', '?')}/{gpus}" + (f"/ray:{node}" if node else "")


def main() -> int:
    args = parse_args()
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    started = time.perf_counter()
    record: dict = {"args": vars(args), "modes": {}}
    runners = {"local": run_local, "ray": run_ray}
    for mode in [m for m in args.modes.split(",") if m in runners]:
        if time.perf_counter() - started > args.budget_s:
            record["modes"][mode] = {"skipped": "budget"}
            continue
        with tempfile.TemporaryDirectory(prefix=f"kw_{mode}_bench_") as cache:
            jobs = suite(args, Path(cache))
            begun = time.perf_counter()
            try:
                verdicts, start_s = runners[mode](jobs, args)
                record["modes"][mode] = summary(mode, verdicts, time.perf_counter() - begun - start_s, start_s)
            except Exception as exc:  # noqa: BLE001 - one failed mode must not lose the other
                record["modes"][mode] = {"error": f"{type(exc).__name__}: {exc}"}
                print(f"{mode}: {record['modes'][mode]['error']}", flush=True)
        write_json(out_dir() / "ray_throughput.json", record)
    rows = [[m, fmt(r.get("per_minute"), ".1f"), f"{r.get('passed', '-')}/{r.get('n', '-')}", fmt(r.get("wall_s"), ".1f"),
             fmt(r.get("start_s"), ".1f"), str(r.get("cached_builds", "-")), r.get("error") or r.get("skipped") or ""]
            for m, r in record["modes"].items()]
    print("\n=== shared-problem suite: local pool vs Ray ===")
    print_table(rows, ["mode", "candidates/min", "passed", "wall s", "start s", "cached builds", "note"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
