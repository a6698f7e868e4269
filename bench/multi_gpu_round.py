"""Throughput scaling of one recorded round over 1, 2 and 4 GPUs of one host (issue 36, point 2: at
least 1.8x on 2 GPUs and 3.4x on 4; no verdict differs in status between GPU counts).

    PYTHONPATH=. python bench/multi_gpu_round.py [--gpus 1,2,4] [--per-problem 8] [--suites 2]
        [--per-gpu 4] [--cold] [--limit-s 540] [--cpu]

The round is round_speed.py's (its problems and recorded candidates; --per-problem candidates per
problem, the extra ones copies with a comment: other candidates, other verdicts), written afresh for
each GPU count and judged by ONE batch runner over the first N visible GPUs:
`python -m kernelwright.judge.scheduling.batch A B --gpus 0,..,N-1 --per-gpu P --profile-budget 0`
(no profiles: ncu holds its GPU alone and is not what scales here; the batch runner needs only
torch/triton/numpy, no wheels).

Caches: by default one judge cache for every round, filled first by a warm-up round on all the
GPUs (not reported): the measured rounds then judge with baselines, CUDA builds and reference
outputs in the cache, as a search's later rounds do, so what scales is the judging. `--cold`: a
fresh cache per round (each round builds and measures baselines again; the baseline lane runs
--baseline-lanes problems at once).

Reported ($OUT/multi_gpu_round.json and a table), per GPU count: the runner's wall seconds, its last
verdict (seconds from its start), verdicts per second and the speedup over the first count, how many
evaluations each GPU judged (`Verdict.gpu`), verdicts flagged `gpu_failed_rejudged`, and whether
every candidate's status equals the first count's (the differing ones are listed).

`--cpu`: a smoke of the script on a machine without a GPU: "N GPUs" become N CPU lanes
(`--cpu-workers N`), the verdicts are the interpreter's; nothing it prints is a GPU figure.
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import round_speed  # noqa: E402
from evidence_common import REPO, fmt, out_dir, print_table, write_json  # noqa: E402

GPU_FAILED = "gpu_failed_rejudged"
TARGETS = {2: 1.8, 4: 3.4}  # issue 36: throughput on N GPUs over one


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpus", default="1,2,4", help="GPU counts, each a round on the first N visible GPUs")
    parser.add_argument("--candidates", type=Path, default=round_speed.CANDIDATES)
    parser.add_argument("--problems", default=",".join(round_speed.PROBLEMS), help="problem stems")
    parser.add_argument("--per-problem", type=int, default=8, help="candidates per problem")
    parser.add_argument("--suites", type=int, default=2, help="evals folders the requests are split over")
    parser.add_argument("--per-gpu", type=int, default=None, help="evaluations at once per GPU (the pool's default: 4)")
    parser.add_argument("--baseline-lanes", type=int, default=None, help="the runner's --baseline-lanes (default: its own)")
    parser.add_argument("--limit-s", type=float, default=540.0, help="each runner is stopped after this many seconds")
    parser.add_argument("--cold", action="store_true", help="a fresh judge cache per round (no warm-up round)")
    parser.add_argument("--cpu", action="store_true", help="smoke on the CPU: N CPU lanes stand for N GPUs")
    args = parser.parse_args(argv)
    args.profile_budget = 0.0  # round_speed's requests ask for profiles; this bench measures judging
    args.counts = [int(n) for n in args.gpus.split(",") if n.strip()]
    return args


def runner_command(folders: list[Path], count: int, args: argparse.Namespace) -> list[str]:
    cmd = [sys.executable, "-m", "kernelwright.judge.scheduling.batch", *map(str, folders), "--profile-budget", "0"]
    if args.cpu:
        cmd += ["--cpu-workers", str(count)]
    else:
        cmd += ["--gpus", ",".join(str(i) for i in range(count))]
        if args.per_gpu:
            cmd += ["--per-gpu", str(args.per_gpu)]
    if args.baseline_lanes is not None:
        cmd += ["--baseline-lanes", str(args.baseline_lanes)]
    return cmd


def judge(folders: list[Path], count: int, args: argparse.Namespace, cache: Path) -> dict:
    """One runner over `folders` on `count` GPUs (CPU lanes with --cpu); its wall time and log."""
    import subprocess

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
           "KW_CACHE_DIR": str(cache)}
    if args.cpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    start = time.perf_counter()
    try:
        done = subprocess.run(runner_command(folders, count, args), env=env, capture_output=True, text=True,
                              timeout=args.limit_s, check=False)
        output, code = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:
        output, code = (exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""), "timeout"
    return {"wall_s": round(time.perf_counter() - start, 1), "exit": code, "log": output.splitlines()[-80:]}


def one_round(count: int, args: argparse.Namespace, scratch: Path, cache: Path | None, label: str) -> dict:
    from kernelwright.judge.scheduling.batch_folder import read_verdicts

    folders = round_speed.round_requests(args, scratch / label)
    if not args.cpu:
        round_speed.record_device(folders)  # device.json before the clock starts, as round_speed does
    run = judge(folders, count, args, cache or scratch / f"cache_{label}")
    result = round_speed.summary(folders, run)
    verdicts = [v for f in folders for v in read_verdicts(f).values()]
    per_gpu = collections.Counter(str((v.gpu or {}).get("index", "cpu")) for v in verdicts)
    result.update(gpus=count, per_gpu=dict(sorted(per_gpu.items())), log_tail=run["log"][-15:],
                  gpu_failed=sum(any(f.code == GPU_FAILED for f in v.flags) for v in verdicts),
                  verdicts_per_s=round(len(verdicts) / result["last_verdict_s"], 3) if result["last_verdict_s"] else None)
    return result


def compare(rounds: list[dict]) -> None:
    """Speedup over the first round and status differences from it, written into each round."""
    first = rounds[0]
    base = dict(s.rsplit(": ", 1) for s in first["statuses"])
    for r in rounds:
        mine = dict(s.rsplit(": ", 1) for s in r["statuses"])
        r["status_differs"] = sorted(f"{name}: {base.get(name)} -> {mine.get(name)}"
                                     for name in set(base) | set(mine) if base.get(name) != mine.get(name))
        ok = r["last_verdict_s"] and first["last_verdict_s"]
        r["speedup"] = round(first["last_verdict_s"] / r["last_verdict_s"], 2) if ok else None
        target = TARGETS.get(r["gpus"]) if first["gpus"] == 1 else None
        r["target"] = target
        r["meets_target"] = None if target is None or r["speedup"] is None else r["speedup"] >= target


def table(rounds: list[dict], cpu: bool) -> str:
    unit = "CPU lanes" if cpu else "GPUs"
    rows = [[r["gpus"], fmt(r["wall_s"], ".1f"), fmt(r["last_verdict_s"], ".1f"), fmt(r["verdicts_per_s"], ".3f"),
             fmt(r["speedup"], ".2f"), "-" if r["target"] is None else f"{r['target']} ({'met' if r['meets_target'] else 'NOT met'})",
             f"{r['correct']}/{r['verdicts']}", " ".join(f"{k}:{v}" for k, v in r["per_gpu"].items()), r["gpu_failed"],
             "same" if not r["status_differs"] else f"{len(r['status_differs'])} differ"] for r in rounds]
    return print_table(rows, [unit, "wall s", "last verdict s", "verdicts/s", "speedup", "target", "correct/verdicts",
                              "verdicts per GPU", "gpu_failed", "statuses vs first"])


def main(argv=None) -> int:
    args = parse_args(argv)
    device = "cpu (smoke: no GPU figure)"
    if not args.cpu:
        from kernelwright.judge.scheduling.pool import visible_gpus

        gpus = visible_gpus()
        if len(gpus) < max(args.counts):
            sys.exit(f"multi_gpu_round needs {max(args.counts)} GPUs, {len(gpus)} visible (or --cpu for a smoke)")
        import torch

        device = f"{len(gpus)} x {torch.cuda.get_device_name(0)}"
    rounds: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="kw_multi_gpu_") as tmp:
        scratch = Path(tmp)
        cache = None if args.cold else scratch / "cache"
        if cache is not None:  # warm-up on every GPU: builds, baselines, reference outputs into the shared cache
            warm = one_round(max(args.counts), args, scratch, cache, "warmup")
            print(f"warm-up round on {max(args.counts)}: {warm['wall_s']} s, {warm['verdicts']} verdicts", flush=True)
        for count in args.counts:
            rounds.append(one_round(count, args, scratch, cache, f"gpus_{count}"))
            print(f"{count}: last verdict at {rounds[-1]['last_verdict_s']} s", flush=True)
    compare(rounds)
    text = table(rounds, args.cpu)
    for r in rounds:
        for line in r["status_differs"]:
            print(f"  {r['gpus']}: {line}")
    write_json(out_dir() / "multi_gpu_round.json", {"device": device, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                                    "command": " ".join(["python", "bench/multi_gpu_round.py", *(argv or sys.argv[1:])]),
                                                    "args": {k: str(v) for k, v in vars(args).items()}, "rounds": rounds,
                                                    "table": text})
    return 0 if all(not r["status_differs"] for r in rounds) else 1


if __name__ == "__main__":
    sys.exit(main())
