"""Seconds of Nsight Compute per candidate, and how much of each candidate the profile covers (issue 32, point 2).

    PYTHONPATH=. python bench/profile_speed.py [--cases judged,reference] [--references 63_Gemm_ReLU_Divide,...]
        [--before PATH] [--budget-s 540]

Two kinds of case, on level-2 KernelBench problems (read from ../shared/kernelbench):
- judged: the hand-written candidates of bench/candidates whose problem is in level 2, judged with
  the profile inline (`JudgeConfig(profile=True, baselines=())`), as a search's local evaluation
  judges: the timing stage writes `verdict.kernels`, the profile stage picks ncu's kernels from it;
- reference: a level-2 reference run as its own candidate (`ModelNew = Model`: PyTorch's kernels,
  cuBLAS/cuDNN and ATen elementwise ones, several per forward), its per-kernel shares recorded here by
  the judge's own code (`kernel_times.record`/`read`, the timing stage's names), then profiled with
  `profile_candidate(..., kernel_shares=...)` (the judge would not pass it: it does no work of its own).

Per case: the program alone (the profile runner's ncu mode without ncu, the faster of two runs:
interpreter, imports, compilation from the caches, warm-up, one forward), then from the profile's
`overhead_s`: the collection (`ncu_stage1`), its imports and the metric list (`ncu_query`; asked once
per device and ncu, then read from the cache folder), their sum (ncu seconds), the ncu overhead
(collection minus the program alone) and the whole profile; the share of the forward's GPU time
ncu profiled, kernels picked / left out / not reached, latency-bound kernels with stall hot spots,
and the share of the keys the findings read (`needs.keys_read`) that came back per profiled kernel.
A judged case's profile also gets the reference's (judge/refprofile.py): `reference s` is what getting
it took (collected by the problem's first judged case, read from the cache by the next ones).
Coverage: candidates profiled (status ok) over correct candidates.

`--before PATH`: a checkout of an earlier commit (e.g. `git worktree add /tmp/kw-before 2cd2c15`):
each case is profiled again by that tree's `profile_candidate` and by this one's, each in a
subprocess of its own tree, from the same shares where the version takes them, for the
before/after in one call on one machine (the second table).

Targets (issue 32): ncu overhead <= 8 s per candidate on a level-2 problem; coverage 100%.
Writes $OUT/profile_speed.json and prints the tables.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from evidence_common import REPO, correct_candidates, fmt, out_dir, print_table, problem_path, write_json  # noqa: E402

sys.path.insert(0, str(REPO))
REFERENCES = ("63_Gemm_ReLU_Divide", "9_Matmul_Subtract_Multiply_ReLU", "1_Conv2D_ReLU_BiasAdd",
              "23_Conv3d_GroupNorm_Mean", "29_Matmul_Mish_Mish")
NCU_STEPS = ("ncu_stage1", "ncu_stage2", "ncu_import", "ncu_query")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="judged,reference", help="judged, reference or both")
    parser.add_argument("--references", default=",".join(REFERENCES), help="level-2 problems run as candidates")
    parser.add_argument("--before", default="", help="a checkout of an earlier commit, profiled the same way")
    parser.add_argument("--budget-s", type=float, default=540.0, help="cases after this many seconds are skipped")
    return parser.parse_args(argv)


def judged_cases() -> list[dict]:
    return [{"case": c.label, "kind": "judged", "problem": c.problem, "candidate": c.path}
            for c in correct_candidates() if c.problem.parent.name == "level2"]


def reference_cases(names: list[str], folder: Path) -> list[dict]:
    cases = []
    for name in names:
        problem = problem_path(name)
        candidate = folder / f"{problem.stem}__reference.py"
        candidate.write_text(problem.read_text() + "\n\nModelNew = Model\n")
        cases.append({"case": candidate.stem, "kind": "reference", "problem": problem, "candidate": candidate})
    return cases


def plain_seconds(case: dict, folder: Path) -> float:
    """The program alone: the profile runner's ncu mode without ncu, the faster of two runs."""
    from kernelwright.judge.profiling import build_cache_python

    cmd = [build_cache_python(folder), "-m", "kernelwright.profile.runner", "--problem", str(case["problem"]),
           "--candidate", str(case["candidate"]), "--mode", "ncu", "--out", str(folder / "plain.json"),
           "--calls", "1", "--warmup", "3"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    times = []
    for _ in range(2):
        start = time.perf_counter()
        subprocess.run(cmd, env=env, capture_output=True, timeout=600, check=False)
        times.append(time.perf_counter() - start)
    return round(min(times), 3)


def recorded_shares(case: dict) -> dict:
    """The timing stage's per-kernel record of the case's forward, made by the judge's own code."""
    import torch

    from kernelwright.judge import kernel_times
    from kernelwright.problem import load_candidate, load_problem

    problem = load_problem(str(case["problem"]))
    model = problem.make_model(0, device="cuda", cls=load_candidate(str(case["candidate"])).ModelNew)
    inputs = problem.make_inputs(0, device="cuda")

    def forward():
        with torch.no_grad():
            return model(*inputs)

    for _ in range(3):
        forward()
    torch.cuda.synchronize()
    return kernel_times.read(kernel_times.record(forward, "cuda"))


def profile_case(case: dict, folder: Path) -> tuple[dict, dict | None, str]:
    """(the profile report, the kernel shares ncu's kernels came from, the verdict's status)."""
    if case["kind"] == "judged":
        from kernelwright.judge import JudgeConfig
        from kernelwright.judge.api import judge

        verdict = judge(case["problem"], case["candidate"], JudgeConfig(profile=True, baselines=()))
        return verdict.profile or {}, verdict.kernels or None, verdict.status
    from kernelwright.profile import ProfileConfig, profile_candidate

    shares = recorded_shares(case)
    config = ProfileConfig(artifacts_dir=str(folder / "artifacts"), cache_dir=str(folder.parent / "profile_cache"))
    return profile_candidate(case["problem"], case["candidate"], config, kernel_shares=shares).to_dict(), shares, "pass"


def profile_in_tree(case: dict, tree: str, shares: dict | None) -> dict:
    """The case profiled by the `profile_candidate` of checkout `tree` in a subprocess, with `shares`
    where that version takes them (its defaults otherwise): before and after, measured the same way."""
    script = ("import inspect, json, sys\nfrom kernelwright.profile import ProfileConfig, profile_candidate\n"
              "extra = {'kernel_shares': json.loads(sys.argv[3])} "
              "if 'kernel_shares' in inspect.signature(profile_candidate).parameters else {}\n"
              "print(json.dumps(profile_candidate(sys.argv[1], sys.argv[2], ProfileConfig(), **extra).to_dict()))\n")
    done = subprocess.run([sys.executable, "-c", script, str(case["problem"]), str(case["candidate"]),
                           json.dumps(shares)], env={**os.environ, "PYTHONPATH": tree}, capture_output=True,
                          text=True, timeout=900, check=False)
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"status": "bench error", "notes": [done.stderr[-400:]]}


def coverage(profile: dict) -> dict:
    """What the profile covered: GPU time, kernels, hot spots, the findings' keys."""
    from kernelwright.profile import needs

    selection = profile.get("selection") or {}
    kernels = profile.get("kernels") or []
    latency = [k for k in kernels if k.get("bottleneck") == "latency"]
    keys = set(needs.keys_read())
    return {"covered": selection.get("covered"), "source": selection.get("source"),
            "picked": len(selection.get("picked") or []), "left_out": len(selection.get("left_out") or []),
            "missed": len(selection.get("missed") or []), "launches": selection.get("launch_count"),
            "hotspots": f"{sum(bool(k.get('hotspots')) for k in latency)}/{len(latency)}",
            "keys_back": min((len(keys & set(k.get("numbers") or {})) / len(keys) for k in kernels), default=None)}


def seconds(profile: dict, plain: float) -> dict:
    spent = profile.get("overhead_s") or {}
    ncu = round(sum(spent.get(k, 0.0) for k in NCU_STEPS), 3)
    collections = [spent[k] for k in ("ncu_stage1", "ncu_stage2") if k in spent]
    overhead = round(sum(collections) - len(collections) * plain, 3) if collections else None
    return {"plain_s": plain, "ncu_s": ncu, "ncu_overhead_s": overhead, "collect_s": spent.get("ncu_stage1"),
            "import_s": spent.get("ncu_import"), "query_s": spent.get("ncu_query"),
            "timeline_s": spent.get("timeline"), "total_s": spent.get("total"),
            "reference_s": spent.get("reference")}  # the reference's profile: collected, or read from the cache


def run_case(case: dict, folder: Path, before: str) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    profile, shares, status = profile_case(case, folder)
    plain = plain_seconds(case, folder)
    row = {"case": case["case"], "kind": case["kind"], "status": status, "profile": profile.get("status"),
           **seconds(profile, plain), **coverage(profile), "selection": profile.get("selection"), "shares": shares,
           "findings": [f.get("text") for f in profile.get("findings") or []][:6],
           "reference": (profile.get("reference") or {}).get("origin")}
    if before:  # both in a subprocess of their tree, from the same shares: the same method
        row["before"] = {"profile": (old := profile_in_tree(case, before, shares)).get("status"), **seconds(old, plain)}
        row["after"] = {"profile": (new := profile_in_tree(case, str(REPO), shares)).get("status"),
                        **seconds(new, plain), **coverage(new)}
    return row


def tables(rows: list[dict]) -> str:
    done = [r for r in rows if "error" not in r and "skipped" not in r]
    text = print_table([[r["case"], r["status"], r["profile"], fmt(r["plain_s"]), fmt(r["collect_s"]), fmt(r["ncu_s"]),
                         fmt(r["ncu_overhead_s"]), fmt(r["total_s"]), fmt(r["reference_s"]), fmt(r["covered"], ".0%"),
                         f"{r['picked']}/{r['left_out']}/{r['missed']}", str(r["launches"]), r["hotspots"],
                         fmt(r["keys_back"], ".0%")] for r in done],
                       ["case", "verdict", "profile", "program s", "collect s", "ncu s", "ncu overhead s", "profile s",
                        "reference s",
                        "GPU time profiled", "picked/left/missed", "launches", "hot spots", "keys back"])
    before = [r for r in done if "before" in r]
    if before:
        text += "\n\n" + print_table([[r["case"], fmt(r["before"]["ncu_s"]), fmt(r["after"]["ncu_s"]),
                                       fmt(r["before"]["ncu_overhead_s"]), fmt(r["after"]["ncu_overhead_s"]),
                                       fmt(r["before"]["total_s"]), fmt(r["after"]["total_s"])] for r in before],
                                     ["case", "ncu s before", "ncu s after", "overhead before", "overhead after",
                                      "profile s before", "profile s after"])
    correct = [r for r in done if r["status"] == "pass"]
    profiled = [r for r in correct if r["profile"] == "ok"]
    line = f"\ncoverage: {len(profiled)}/{len(correct)} correct candidates profiled"
    print(line)
    return text + line


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        sys.exit("profile_speed needs a CUDA GPU and Nsight Compute (ncu on PATH or KW_NCU)")
    start, rows = time.perf_counter(), []
    with tempfile.TemporaryDirectory(prefix="kw_profile_speed_") as tmp:
        kinds = args.cases.split(",")
        cases = (judged_cases() if "judged" in kinds else []) + \
            (reference_cases([n for n in args.references.split(",") if n], Path(tmp)) if "reference" in kinds else [])
        for case in cases:
            if time.perf_counter() - start > args.budget_s:
                rows.append({"case": case["case"], "skipped": "time budget spent"})
                continue
            print(f"[{time.perf_counter() - start:6.1f} s] {case['case']} ...", flush=True)
            try:
                rows.append(run_case(case, Path(tmp) / case["case"], args.before))
            except Exception as exc:  # noqa: BLE001 -- one broken case must not lose the others
                rows.append({"case": case["case"], "error": f"{type(exc).__name__}: {exc}"})
    text = tables(rows)
    write_json(out_dir() / "profile_speed.json", {"device": torch.cuda.get_device_name(), "rows": rows,
                                                  "table": text, "seconds": round(time.perf_counter() - start, 1)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
