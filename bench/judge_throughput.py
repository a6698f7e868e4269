"""How fast the judge gets through candidates, and how far its timings can be trusted.

    PYTHONPATH=. python bench/judge_throughput.py [--n 8] [--n-triton 16] [--budget-s 540]
        [--compile-workers 16] [--per-gpu 4] [--sections triton,repeat_spread,ncu_agreement,cuda_cold,cuda_cached]

1. Throughput, in candidates judged per GPU-minute (wall time of the batch, the GPU held
   throughout), through `JudgePool(config, compile_workers=N, per_gpu=P).judge_many(...)`:
   Triton (N distinct kernels), CUDA cold (empty build cache: N distinct extensions, made by
   varying a harmless constant in the ReLU candidate so their hashes differ), CUDA cached (the same
   N again). Targets: >= 60 Triton/min, >= 30 CUDA/min with parallel compile. The median seconds
   per stage (verdict.stage_seconds) say where a candidate's time goes. Evaluations are forked
   from the fork server (judge/scheduling/forkserver.py); section triton_cold judges the same Triton batch
   with every evaluation started cold (a fresh interpreter), for the warm start's saving; section
   triton_steady times the batch on a pool that has already judged two other candidates (fork
   server started, the problem's memory measured), as in a search that keeps its pool.
   Per section it also reports, as means per candidate, the device lock's holds and seconds held
   (verdict.device_lock; the exclusive seconds bound throughput at 60 / seconds per minute) and
   the seconds of each stage (verdict.stage_seconds).
2. Repeat spread: the same candidate judged 5 times, each in its own process (through the pool:
   the processes overlap, their timings take turns); (max - min) / median of the medians.
   Target <= 2%.
3. Agreement with Nsight Compute: timing.measure's median against ncu's gpu__time_duration.sum
   (caches flushed, clocks not locked, as timing.measure runs) on kernels of >= 50 µs.
   Target within 3%.
Sections run in the order given and are skipped once --budget-s is spent. Writes
$OUT/judge_throughput.json.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from evidence_common import CANDIDATES, REPO, fmt, out_dir, print_table, problem_path, write_json

RELU = "19_ReLU"
SMALL_RELU = {"batch_size": 64}  # 25M elements: ~70 µs of memory traffic, seconds of input generation less
NCU_CASES = ("relu_64M", "matmul_fp32_4096", "softmax_4096x16384", "sum_dim1_16x4096x4095", "matmul_bf16_8192",
             "scale_256MiB")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=8, help="CUDA candidates per throughput batch")
    parser.add_argument("--n-triton", type=int, default=16, help="Triton candidates in their batch")
    parser.add_argument("--budget-s", type=float, default=540.0)
    parser.add_argument("--compile-workers", type=int, default=16)
    parser.add_argument("--per-gpu", type=int, default=4, help="evaluations at once on one GPU")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sections", default="triton,repeat_spread,ncu_agreement,cuda_cold,cuda_cached",
                        help="also: triton_cold (the Triton batch started cold, no fork server), triton_steady "
                             "(the batch on a pool that already judged two candidates: fork server up)")
    parser.add_argument("--device", default="cuda", help="cpu: a smoke test of this script (Triton only, no ncu)")
    return parser.parse_args()


def variants(backend: str, count: int, folder: Path) -> list[Path]:
    """`count` copies of the ReLU candidate that differ only in a harmless constant."""
    source = (CANDIDATES / f"{RELU}__{backend}.py").read_text()
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        if backend == "cuda":
            text = source.replace('CUDA_SRC = r"""', f'CUDA_SRC = r"""\n#define KW_VARIANT {i}', 1)
        else:  # a different constant inside the jitted function: a different Triton cache key
            text = source.replace("    mask = offs < n\n", f"    mask = offs < n + 0 * {i}\n", 1)
        assert text != source, "the variant marker was not found in the candidate"
        path = folder / f"{RELU}__{backend}_v{i}.py"
        path.write_text(text)
        paths.append(path)
    return paths


def make_pool(config, args, warm: bool = True):
    from kernelwright.judge.scheduling.pool import JudgePool

    gpus = [] if args.device == "cpu" else None
    return JudgePool(config, compile_workers=args.compile_workers, per_gpu=args.per_gpu, gpus=gpus, cpu_workers=2,
                     warm=warm)


def throughput(label: str, paths: list[Path], config, args, warm: bool = True, primed: list[Path] = ()) -> dict:
    """`primed`: candidates judged first on the same pool and not counted (the steady state of a
    long-running pool, e.g. a search's: fork server started, the problem's memory measured)."""
    problem = problem_path(RELU)
    with make_pool(config, args, warm) as pool:
        if primed:
            pool.judge_many([(problem, p) for p in primed])
        start = time.perf_counter()
        verdicts = pool.judge_many([(problem, p) for p in paths])
        wall = time.perf_counter() - start
    passed = sum(v.passed for v in verdicts)
    cached = sum(bool(v.compile and v.compile.cached) for v in verdicts)
    compile_s = [v.compile.seconds for v in verdicts if v.compile]
    result = {"label": label, "n": len(paths), "passed": passed, "compile_cached": cached, "wall_s": wall,
              "per_gpu_minute": len(paths) / (wall / 60), "per_gpu": args.per_gpu,
              "median_compile_s": statistics.median(compile_s) if compile_s else None,
              "median_process_s": statistics.median(v.process.wall_s for v in verdicts if v.process),
              "median_stage_s": median_stages(verdicts),
              "mean_stage_s": mean_stages(verdicts), "lock": lock_means(verdicts),
              "starts": sorted({v.process.isolation.get("start", "").split(":")[0] for v in verdicts if v.process}),
              "errors": [v.error for v in verdicts if not v.passed][:3]}
    print(f"{label}: {result['per_gpu_minute']:.1f} candidates/GPU-minute ({len(paths)} in {wall:.0f} s, "
          f"{passed} passed, {cached} cached builds); median stage s {result['median_stage_s']}; "
          f"device lock per candidate {result['lock']}", flush=True)
    return result


def median_stages(verdicts) -> dict[str, float]:
    names = sorted({k for v in verdicts for k in v.stage_seconds})
    return {k: round(statistics.median(v.stage_seconds.get(k, 0.0) for v in verdicts), 2) for k in names}


def mean_stages(verdicts) -> dict[str, float]:
    """Mean seconds per candidate in each stage (a stage a verdict lacks counts 0)."""
    names = sorted({k for v in verdicts for k in v.stage_seconds})
    return {k: round(statistics.fmean(v.stage_seconds.get(k, 0.0) for v in verdicts), 3) for k in names}


def lock_means(verdicts) -> dict[str, float | None]:
    """Per candidate, the mean device-lock holds and seconds held by kind (verdict.device_lock), and
    the throughput the exclusive seconds alone would allow (candidates per minute, one GPU)."""
    means: dict[str, float | None] = {}
    for kind in ("exclusive", "shared"):
        records = [(v.device_lock or {}).get(kind, {}) for v in verdicts]
        means[f"{kind}_s"] = round(statistics.fmean(r.get("held_s", 0.0) for r in records), 3) if records else None
        means[f"{kind}_holds"] = round(statistics.fmean(r.get("holds", 0) for r in records), 2) if records else None
    exclusive = means.get("exclusive_s")
    means["exclusive_bound_per_minute"] = round(60.0 / exclusive, 1) if exclusive else None
    return means


def repeat_spread(path: Path, config, args) -> dict:
    with make_pool(config, args) as pool:
        verdicts = pool.judge_many([(problem_path(RELU), path)] * args.repeats)
    medians = [v.timing.median_ms for v in verdicts if v.timing]
    if len(medians) < 2:
        return {"medians_ms": medians, "spread": None, "errors": [v.error for v in verdicts if v.error][:2]}
    spread = (max(medians) - min(medians)) / statistics.median(medians)
    print(f"repeat spread over {len(medians)} processes: {spread:.2%} (medians {medians})", flush=True)
    return {"medians_ms": medians, "spread": spread, "energy_mj_per_call": [
        round(v.energy["joules_per_call"] * 1e3, 4) for v in verdicts
        if v.energy and v.energy.get("joules_per_call") is not None]}


def ncu_agreement(deadline: float) -> dict:
    ncu = shutil.which("ncu") or next((p for p in ("/usr/local/cuda/bin/ncu",) if Path(p).exists()), None)
    if not ncu:
        return {"error": "ncu not found"}
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    script = str(REPO / "bench" / "ncu_cases.py")
    remaining = lambda: max(5.0, deadline - time.perf_counter())  # noqa: E731 - never past the budget
    measured = json.loads(subprocess.run([sys.executable, script, "measure"], capture_output=True, text=True,
                                         env=env, timeout=remaining(), check=True).stdout.strip().splitlines()[-1])
    result = {}
    for case in NCU_CASES:
        if time.perf_counter() > deadline:
            result[case] = {"skipped": "budget"}
            continue
        calls, warm = 13, 3
        command = [ncu, "--metrics", "gpu__time_duration.sum", "--csv", "--cache-control", "all",
                   "--clock-control", "none", "--nvtx", "--nvtx-include", "kw_calls/",
                   sys.executable, script, "run", case, str(calls)]
        try:
            done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=remaining())
        except subprocess.TimeoutExpired:
            result[case] = {"skipped": "budget (ncu still running)"}
            continue
        durations = _ncu_durations_ms(done.stdout)
        if not durations or len(durations) % calls:
            result[case] = {"error": f"{len(durations)} kernels for {calls} calls", "tail": done.stdout[-500:] + done.stderr[-500:]}
            continue
        per_call = len(durations) // calls
        sums = [sum(durations[i * per_call:(i + 1) * per_call]) for i in range(warm, calls)]
        ncu_ms, ours = statistics.median(sums), measured[case]["median_ms"]
        result[case] = {"ncu_ms": ncu_ms, "measure_ms": ours, "kernels_per_call": per_call,
                        "diff_pct": (ours - ncu_ms) / ncu_ms * 100}
        print(f"ncu {case}: ncu {ncu_ms:.4f} ms, timing.measure {ours:.4f} ms ({result[case]['diff_pct']:+.1f}%)",
              flush=True)
    return result


def _ncu_durations_ms(text: str) -> list[float]:
    """gpu__time_duration.sum of each profiled kernel, in launch order, in milliseconds."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return []
    durations = []
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(row["Metric Value"].replace(",", ""))
        unit = row.get("Metric Unit", "nsecond")
        durations.append(value * {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3}.get(unit, 1e-6))
    return durations


def main() -> int:
    args = parse_args()
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    from kernelwright.judge import JudgeConfig

    started = time.perf_counter()
    deadline = started + args.budget_s
    out = out_dir()
    record: dict = {"args": vars(args), "sections": {}}
    with tempfile.TemporaryDirectory(prefix="kw_throughput_") as tmp:
        tmp = Path(tmp)
        cache = tmp / "cache"
        config = JudgeConfig(device=args.device, overrides=dict(SMALL_RELU), baselines=(), cache_dir=str(cache),
                             timeout_s=120.0, compile_timeout_s=400.0)
        cuda = variants("cuda", args.n, tmp)
        triton = variants("triton", args.n_triton, tmp)
        steps = {
            "triton": lambda: throughput("Triton", triton, config, args),
            "triton_cold": lambda: throughput("Triton cold start", triton, config, args, warm=False),
            "triton_steady": lambda: throughput("Triton, pool already running", triton, config, args,
                                                primed=variants("triton", 2, tmp / "primed")),
            "repeat_spread": lambda: repeat_spread(CANDIDATES / f"{RELU}__triton.py", config, args),
            "ncu_agreement": lambda: ncu_agreement(deadline),
            "cuda_cold": lambda: throughput("CUDA cold", cuda, config, args),
            "cuda_cached": lambda: throughput("CUDA cached", cuda, config, args),
            "cuda_steady": lambda: throughput("CUDA cached, pool already running", cuda, config, args,
                                              primed=cuda[:2]),
        }
        order = [name for name in args.sections.split(",") if name in steps]
        if args.device == "cpu":  # no CUDA extensions, no ncu without a GPU
            order = [name for name in order if name in ("triton", "triton_cold", "triton_steady", "repeat_spread")]
        for name in order:
            if time.perf_counter() > deadline:
                record["sections"][name] = {"skipped": "budget"}
                continue
            try:
                record["sections"][name] = steps[name]()
            except Exception as exc:  # noqa: BLE001 -- one failed section must not lose the others
                record["sections"][name] = {"error": f"{type(exc).__name__}: {exc}"}
            write_json(out / "judge_throughput.json", record)
    print_summary(record)
    write_json(out / "judge_throughput.json", record)
    return 0


def print_summary(record: dict) -> None:
    sections = record["sections"]
    rows = []
    for key, target in (("cuda_cold", 30), ("cuda_cached", 30), ("cuda_steady", 30), ("triton", 60),
                        ("triton_cold", 60), ("triton_steady", 60)):
        if key not in sections and key in ("triton_cold", "triton_steady", "cuda_steady"):
            continue
        s = sections.get(key, {})
        rows.append([key, fmt(s.get("per_gpu_minute"), ".1f"), f">= {target}/min", f"{s.get('passed', '-')}/{s.get('n', '-')}",
                     fmt(s.get("median_process_s"), ".1f"), s.get("error") or s.get("skipped") or ""])
    spread = sections.get("repeat_spread", {})
    rows.append(["repeat_spread", fmt(spread.get("spread") * 100 if spread.get("spread") is not None else None, ".2f") + "%",
                 "<= 2%", "", "", spread.get("error") or spread.get("skipped") or ""])
    for case, s in (sections.get("ncu_agreement") or {}).items():
        if isinstance(s, dict):
            rows.append([f"ncu {case}", fmt(s.get("diff_pct"), "+.2f") + "%", "within 3%", fmt(s.get("ncu_ms"), ".4f"),
                         fmt(s.get("measure_ms"), ".4f"), s.get("error") or s.get("skipped") or ""])
    print("\n=== judge throughput and timing trust ===")
    print_table(rows, ["measure", "value", "target", "passed / ncu ms", "proc s / ours ms", "note"])
    print_time_split(sections)


STAGES_SHOWN = ("reference", "compile", "check", "guards", "wait_gpu", "time", "energy", "kernels", "imports",
                "setup", "overhead")


def print_time_split(sections: dict) -> None:
    """Where a candidate's time goes, per throughput section: means per candidate of the device
    lock (holds, seconds held exclusively, the per-minute bound those seconds set) and of each stage."""
    rows = []
    for key, s in sections.items():
        lock, stages = s.get("lock"), s.get("mean_stage_s")
        if not isinstance(lock, dict) or not isinstance(stages, dict):
            continue
        rows.append([key, fmt(lock.get("exclusive_s"), ".3f"), fmt(lock.get("exclusive_holds"), ".2f"),
                     fmt(lock.get("exclusive_bound_per_minute"), ".1f"), fmt(lock.get("shared_s"), ".2f"),
                     fmt(lock.get("shared_holds"), ".1f")] + [fmt(stages.get(name), ".2f") for name in STAGES_SHOWN])
    if rows:
        print("\n=== per candidate (means): device lock and stage seconds ===")
        print_table(rows, ["section", "excl s", "excl holds", "excl-bound /min", "shared s", "shared holds",
                           *STAGES_SHOWN])


if __name__ == "__main__":
    raise SystemExit(main())
