"""What the judge's integrity costs per candidate, and that it holds (issue 20).

    PYTHONPATH=. python bench/judge_integrity.py [--device cpu|cuda] [--pairs 4] [--reference PATH]
        [--parts attacks,overhead,triton,cuda,profile]

1. Overhead: the same legitimate candidate judged alternately with confinement on and off
   (`JudgeConfig.confine`), `--pairs` times each (warm baseline cache); the judge's wall time per
   candidate and the parts the integrity machinery adds (supervisor preparation, Landlock rules,
   clean-up of the process tree, the trusted-file snapshots around the run). With `--reference`
   (another kernelwright checkout, e.g. one made with `git worktree add /tmp/kw-before <commit>`)
   the same candidate is also judged by that checkout, in its own process, for the end-to-end
   difference to the judge before these changes.
2. Attacks: tests/judge/integrity_attacks.py's attacker (write outside, into the package -- a copy
   --, into a cached baseline, into the supervisor's record; read another scratch; signal the
   supervisor; leave a setsid child and a daemon) between two judgements of the legitimate
   candidate: what each attack got, what was killed, and the legitimate candidate's median time
   before and after.
3. GPU only: a Triton candidate compiled in the candidate's own cache (cold each evaluation) against
   a shared warm cache, a CUDA extension built by the trusted builder (cold, then a cache hit), and
   a profiled (ncu) candidate under confinement.

Writes $OUT/judge_integrity.json (or ./judge_integrity.json) and prints a summary.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "judge"))

from integrity_attacks import LEGIT, PROBLEM, alive, attacker, children, outcomes, package_copy  # noqa: E402

from kernelwright.judge import JudgeConfig  # noqa: E402
from kernelwright.judge.request import SourceText
from kernelwright.judge.api import judge, trusted_files, worker_env  # noqa: E402

CUDA = SourceText(r'''
# hand-written bench candidate: y = 2x + 1 as a CUDA extension
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SOURCE = """
__global__ void affine(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i] + 1.0f;
}
torch::Tensor run(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    int n = xc.numel();
    affine<<<(n + 255) / 256, 256>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
ext = load_inline("kw_bench_affine", cpp_sources="torch::Tensor run(torch::Tensor x);", cuda_sources=SOURCE,
                  functions=["run"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.run(x)
''', "cuda_affine")


def config_for(args, cache: Path, **extra) -> JudgeConfig:
    return JudgeConfig(device=args.device, trials=2, rules="kernelbench", baselines=("eager",),
                       warmup_ms=5.0, rep_ms=50.0, min_reps=10, energy_ms=0.0, cache_dir=str(cache), **extra)


def timed_judge(candidate, config, **kwargs):
    started = time.perf_counter()
    verdict = judge(PROBLEM, candidate, config, **kwargs)
    return verdict, time.perf_counter() - started


def parts(verdict) -> dict:
    """Seconds the integrity machinery spent inside the evaluation (from the verdict): the
    supervisor's interpreter start and imports, its preparation, fork and confinement (Landlock
    rules alone: confine_s), the clean-up of the process tree."""
    isolation = verdict.process.isolation if verdict.process else {}
    confinement = isolation.get("confinement", {})
    seconds = isolation.get("supervisor_seconds", {})
    return {"confine_s": confinement.get("seconds") if isinstance(confinement, dict) else None,
            "supervisor_startup_s": seconds.get("startup"), "prepare_s": seconds.get("prepare"),
            "fork_and_confine_s": seconds.get("fork_and_confine"), "clean_up_s": seconds.get("clean_up"),
            "overhead_s": verdict.stage_seconds.get("overhead"), "wall_s": verdict.process.wall_s}


def snapshot_seconds(config: JudgeConfig) -> float:
    files = trusted_files(config, worker_env(config, "cpu"))
    started = time.perf_counter()
    files.changes(files.snapshot(), files.snapshot())
    return time.perf_counter() - started


def overhead(args, cache: Path) -> dict:
    rows = {"confined": [], "unconfined": []}
    judge(PROBLEM, LEGIT, config_for(args, cache))  # warm: baseline cached, bytecode compiled
    for _ in range(args.pairs):
        for name, confine in (("confined", True), ("unconfined", False)):
            verdict, wall = timed_judge(LEGIT, config_for(args, cache, confine=confine))
            assert verdict.passed, verdict.error
            rows[name].append({"judge_s": round(wall, 3), **parts(verdict)})
    result = {name: summarize(values) for name, values in rows.items()}
    result["trusted_snapshots_s"] = round(snapshot_seconds(config_for(args, cache)), 4)
    if args.reference:
        result["reference_checkout"] = reference_walls(args, cache)
    return result


def summarize(rows: list[dict]) -> dict:
    keys = rows[0].keys()
    return {"n": len(rows), **{f"median_{k}": round(statistics.median(r[k] for r in rows if r[k] is not None), 4)
                               for k in keys if any(r[k] is not None for r in rows)}, "runs": rows}


_REFERENCE = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from integrity_attacks import LEGIT, PROBLEM
from kernelwright.judge import JudgeConfig
from kernelwright.judge.api import judge
config = JudgeConfig(**json.loads(sys.argv[2]))
walls = []
for i in range(int(sys.argv[3]) + 1):
    started = time.perf_counter()
    verdict = judge(PROBLEM, LEGIT, config)
    assert verdict.status == "pass", verdict.error
    if i:
        walls.append(round(time.perf_counter() - started, 3))
print(json.dumps(walls))
"""


def reference_walls(args, cache: Path) -> dict:
    settings = config_for(args, cache / "reference").to_dict()
    settings.pop("confine")
    done = subprocess.run([sys.executable, "-c", _REFERENCE, str(REPO / "tests" / "judge"), json.dumps(settings),
                           str(args.pairs)], capture_output=True, text=True, timeout=1800,
                          env={**os.environ, "PYTHONPATH": str(Path(args.reference).resolve())})
    if done.returncode != 0:
        return {"error": done.stderr[-2000:]}
    walls = json.loads(done.stdout.strip().splitlines()[-1])
    return {"checkout": str(args.reference), "n": len(walls), "median_judge_s": statistics.median(walls),
            "runs": walls}


def attacks(args, root: Path) -> dict:
    package_copy(root / "pkg")
    other = root / "scratch" / "kw-judge-other"
    other.mkdir(parents=True)
    (other / "secret.txt").write_text("another candidate's kernel")
    config = config_for(args, root / "cache")
    env, scratch = {"PYTHONPATH": str(root / "pkg")}, root / "scratch"
    before, _ = timed_judge(LEGIT, config, env=env, scratch_root=scratch)
    candidate = attacker(root / "outside.txt", root / "cache" / "baselines", other / "secret.txt")
    attacked, _ = timed_judge(candidate, config, env=env, scratch_root=scratch)
    after, _ = timed_judge(LEGIT, config, env=env, scratch_root=scratch)
    pids = children(attacked.process.stdout_tail)
    return {
        "attacker_status": attacked.status, "confined": attacked.process.confined,
        "confinement": attacked.process.isolation.get("filesystem"),
        "outcomes": outcomes(attacked.process.stdout_tail),
        "children": pids, "children_alive_after": [p for p in pids if alive(p)],
        "killed_processes": attacked.process.killed_processes,
        "legit_before": {"status": before.status, "median_ms": before.timing.median_ms if before.timing else None,
                         "eager_ms": before.baselines.eager.median_ms if before.baselines and before.baselines.eager else None},
        "legit_after": {"status": after.status, "median_ms": after.timing.median_ms if after.timing else None,
                        "eager_ms": after.baselines.eager.median_ms if after.baselines and after.baselines.eager else None,
                        "baseline_cached": bool(after.baselines and after.baselines.cached),
                        "flags": [f"{f.code}:{f.severity}" for f in after.flags]},
        "outside_written": (root / "outside.txt").exists(),
    }


def triton_cache(args, cache: Path) -> dict:
    """Triton in the candidate's own cache (cold every evaluation, as the judge runs it) against a
    shared one, warm after its first run (the judge before issue 20; only unconfined can share)."""
    result = {}
    shared = {"TRITON_CACHE_DIR": str(cache / "triton-shared")}
    for name, confine, env in (("own_cache", True, None), ("shared_cache", False, shared)):
        runs = []
        for _ in range(2):
            verdict, wall = timed_judge(LEGIT, config_for(args, cache, confine=confine), env=env)
            runs.append({"status": verdict.status, "judge_s": round(wall, 3), "error": verdict.error,
                         "check_s": verdict.stage_seconds.get("check")})
        result[name] = runs
    return result


def cuda_builds(args, cache: Path) -> dict:
    result = {}
    for label in ("cold", "warm"):
        verdict, wall = timed_judge(CUDA, config_for(args, cache, compile_timeout_s=500.0))
        result[label] = {"status": verdict.status, "judge_s": round(wall, 3), "error": verdict.error,
                         "compile": verdict.compile.__dict__ if verdict.compile else None}
    return result


def profile_confined(args, cache: Path) -> dict:
    verdict, wall = timed_judge(LEGIT, config_for(args, cache, profile=True))
    profile = verdict.profile or {}
    return {"status": verdict.status, "judge_s": round(wall, 3), "profile_status": profile.get("status"),
            "findings": [f.get("message", f) if isinstance(f, dict) else f for f in profile.get("findings", [])][:5],
            "capabilities": verdict.process.isolation.get("confinement", {}).get("capabilities")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--reference", default="", help="another kernelwright checkout to compare with")
    parser.add_argument("--parts", default="attacks,overhead,triton,cuda,profile",
                        help="which parts to run (triton, cuda and profile need a GPU)")
    args = parser.parse_args()
    parts_wanted = set(args.parts.split(","))
    if not args.device.startswith("cuda"):
        parts_wanted -= {"triton", "cuda", "profile"}
    out = Path(os.environ.get("OUT") or ".")
    out.mkdir(parents=True, exist_ok=True)
    report: dict = {"device": args.device, "date": time.strftime("%Y-%m-%d %H:%M"), "python": sys.version.split()[0]}
    with tempfile.TemporaryDirectory(prefix="kw-integrity-bench-") as tmp:
        root = Path(tmp)
        steps = {"attacks": lambda: attacks(args, root / "attacks"), "overhead": lambda: overhead(args, root / "cache"),
                 "triton": lambda: triton_cache(args, root / "cache"), "cuda": lambda: cuda_builds(args, root / "cache"),
                 "profile": lambda: profile_confined(args, root / "cache")}
        for name, step in steps.items():
            if name in parts_wanted:
                report[name] = step()
                print(json.dumps({name: report[name]}, indent=1, default=str)[:6000], flush=True)
                (out / "judge_integrity.json").write_text(json.dumps(report, indent=1, default=str))
    print(f"wrote {out / 'judge_integrity.json'}")


if __name__ == "__main__":
    main()
