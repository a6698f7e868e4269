"""A round of 24 candidates on 6 problems judged as one queue on one GPU, timed per stage, with profile
coverage (issue 32, point 4: at most 120 s on one H100, every correct candidate profiled).

    PYTHONPATH=. python bench/round_speed.py [--candidates DIR] [--per-problem 4] [--suites 2]
        [--profile-budget 300] [--limit-s 540] [--before PATH] [--warm]

The round: 6 problems (those of --candidates, default bench/candidates: KernelBench levels 1 and 2,
a CUDA and a Triton candidate each), --per-problem candidates each (the first recorded one (CUDA),
the reference run as a candidate, `ModelNew = Model`, the other recorded ones (Triton), then the last
again with a comment that makes it another candidate: another verdict, while Triton's own cache keeps
its compilation), split over --suites evals folders as
suites write them (a request per candidate, `"profile": true`, priority = its number in the problem,
so each problem's first candidate is judged first), all judged by ONE runner:
`python -m kernelwright.judge.scheduling.batch A B --profile-budget P` (baselines in its lane,
candidates, then the profile pass), under --limit-s.

Reported ($OUT/round_speed.json and a table): the round's wall seconds (the runner's, start to last
verdict and to last profile, from its log), the time of the first and last verdict, per stage the
seconds summed over the verdicts (`stage_seconds`: compile, reference, check, time, baselines,
kernels, profile, wait_gpu, admission_wait, ...), the baselines measured vs read from the cache,
and coverage: candidates profiled (profile status ok) / correct candidates, with the reference
profiles collected vs reused (`profile.reference.origin`). The judge's cache (baselines, CUDA
builds, reference outputs and profiles, the ncu metric list) is a fresh folder per round (cold, as a
first round: the CUDA candidates are built in it) unless --warm (the judge's own cache: a later round).

`--before PATH`: the same round judged first by the checkout at PATH (its own batch runner, a fresh
copy of the folders and its own cold cache), then by this one: before/after in one call. A checkout
without repeatable --batch still takes several folders through the module's command line
(`kernelwright.judge.batch` in a checkout from before judge/scheduling/).
Writes $OUT/round_speed.json.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from evidence_common import CANDIDATES, REPO, fmt, out_dir, print_table, problem_path, write_json  # noqa: E402

sys.path.insert(0, str(REPO))
PROBLEMS = ("19_ReLU", "23_Softmax", "47_Sum_reduction_over_a_dimension", "1_Square_matrix_multiplication_",
            "63_Gemm_ReLU_Divide", "9_Matmul_Subtract_Multiply_ReLU")
_LOG = re.compile(r"^\[\s*([\d.]+) s\] (.*)$")
_VERDICT = re.compile(r"^\S+: \w+ \(")  # the runner's line for a verdict written: "NAME: pass (done)"


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--candidates", type=Path, default=CANDIDATES, help="folder of PROBLEM__NAME.py candidates")
    parser.add_argument("--problems", default=",".join(PROBLEMS), help="problem stems (KernelBench file names)")
    parser.add_argument("--per-problem", type=int, default=4)
    parser.add_argument("--suites", type=int, default=2, help="evals folders the requests are split over")
    parser.add_argument("--profile-budget", type=float, default=300.0)
    parser.add_argument("--limit-s", type=float, default=540.0, help="the runner is stopped after this many seconds")
    parser.add_argument("--before", default="", help="a checkout of an earlier commit, judged the same way first")
    parser.add_argument("--warm", action="store_true", help="use the judge's cache (baselines measured before)")
    return parser.parse_args(argv)


def round_requests(args: argparse.Namespace, root: Path) -> list[Path]:
    """Write the round's requests into `root`/suite_<i>/evals; the folders."""
    from kernelwright.judge.scheduling.batch_folder import write_request
    from kernelwright.profile.reference import reference_source

    folders = [root / f"suite_{i}" / "evals" for i in range(args.suites)]
    for number, stem in enumerate(p for p in args.problems.split(",") if p):
        problem = problem_path(stem)
        recorded = [p.read_text() for p in sorted(args.candidates.glob(f"{stem}__*.py"))]
        pool = recorded[:1] + [reference_source(problem.read_text())] + recorded[1:]
        for index in range(args.per_problem):
            source = pool[index] if index < len(pool) else \
                pool[-1] + f"\n# round_speed: candidate {index} (another candidate: another verdict)\n"
            folder = folders[number % args.suites]
            write_request(folder, f"{stem}__c{index}", problem, source, profile=True, priority=index)
    return folders


def record_device(folders: list[Path]) -> None:
    """device.json in every folder before the clock starts (a runner records it on first contact,
    measuring the peaks once per device, about a minute cold: not part of a round), with the judge's
    own cache, where the peaks are usually measured already."""
    from kernelwright.judge.target import DEVICE_FILE

    subprocess.run([sys.executable, "-m", "kernelwright.judge.target", str(folders[0])], env={
        **os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, timeout=900, check=False)
    for folder in folders[1:]:
        if (folders[0] / DEVICE_FILE).is_file():
            shutil.copy(folders[0] / DEVICE_FILE, folder / DEVICE_FILE)


def judge_round(tree: str, folders: list[Path], args: argparse.Namespace, cache: Path) -> dict:
    """One runner of checkout `tree` over `folders`; its wall time and log lines."""
    env = {**os.environ, "PYTHONPATH": tree, "KW_CACHE_DIR": str(cache)}
    module = "kernelwright.judge.scheduling.batch" if (Path(tree) / "kernelwright/judge/scheduling/batch.py").is_file() \
        else "kernelwright.judge.batch"  # a checkout from before judge/scheduling/
    cmd = [sys.executable, "-m", module, *map(str, folders),
           "--profile-budget", str(args.profile_budget)]
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.limit_s, check=False)
        output, code = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:
        output, code = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or ""), "timeout"
    return {"wall_s": round(time.perf_counter() - start, 1), "exit": code, "log": output.splitlines()[-80:]}


def summary(folders: list[Path], run: dict) -> dict:
    """Per-stage seconds, first/last verdict, coverage, from the verdict files and the runner's log."""
    from kernelwright.judge.scheduling.batch_folder import read_verdicts

    verdicts = [v for f in folders for v in read_verdicts(f).values()]
    stages: dict[str, float] = {}
    for verdict in verdicts:
        for stage, seconds in (verdict.stage_seconds or {}).items():
            stages[stage] = round(stages.get(stage, 0.0) + float(seconds), 1)
    stamps = [(float(m.group(1)), m.group(2)) for line in run["log"] if (m := _LOG.match(line))]
    judged = [t for t, text in stamps if _VERDICT.match(text) and ": profiled (" not in text]
    profiled = [t for t, text in stamps if ": profiled (" in text]
    correct = [v for v in verdicts if v.passed]
    covered = [v for v in correct if (v.profile or {}).get("status") == "ok"]
    origins = [((v.profile or {}).get("reference") or {}).get("origin", "") for v in covered]
    baselines = [m.get("from_cache") for v in verdicts if v.baselines for m in (v.baselines.measured or {}).values()]
    return {"wall_s": run["wall_s"], "exit": run["exit"], "verdicts": len(verdicts), "correct": len(correct),
            "profiled": len(covered), "coverage": len(covered) / len(correct) if correct else None,
            "first_verdict_s": min(judged, default=None), "last_verdict_s": max(judged, default=None),
            "last_profile_s": max(profiled, default=None), "stage_seconds": stages,
            "baselines_measured": sum(b is False for b in baselines), "baselines_cached": sum(b is True for b in baselines),
            "reference_profiles": {"collected": sum(o.startswith("collected") for o in origins),
                                   "reused": sum(o.startswith("cached") for o in origins)},
            "statuses": sorted(f"{v.candidate}: {v.status}" for v in verdicts),
            "profiles": {v.candidate: _profile_said(v.profile) for v in correct},
            "log_tail": run["log"][-40:]}


def _profile_said(profile: dict | None) -> str:
    """A correct candidate's profile in one line: its status, its ncu seconds and, when it is not ok,
    why (its notes and notices)."""
    if not profile:
        return "none"
    said = f"{profile.get('status', '?')}; overhead_s {profile.get('overhead_s') or {}}"
    if profile.get("status") != "ok":
        why = list(profile.get("notes") or []) + [f.get("text", "") for f in profile.get("findings") or []
                                                   if f.get("kind") == "notice"]
        said += "; " + " | ".join(str(w) for w in why)[:700]
    return said


def one_round(tree: str, args: argparse.Namespace, scratch: Path, label: str) -> dict:
    root = scratch / label
    folders = round_requests(args, root)
    record_device(folders)
    cache = Path(os.environ.get("KW_CACHE_DIR", Path.home() / ".cache" / "kernelwright")) if args.warm \
        else scratch / f"cache_{label}"
    result = summary(folders, judge_round(tree, folders, args, cache))
    result["tree"] = tree
    return result


def table(rounds: dict[str, dict]) -> str:
    rows = []
    for label, r in rounds.items():
        s = r["stage_seconds"]
        rows.append([label, fmt(r["wall_s"], ".1f"), fmt(r["first_verdict_s"], ".1f"), fmt(r["last_verdict_s"], ".1f"),
                     fmt(r["last_profile_s"], ".1f"), f"{r['correct']}/{r['verdicts']}",
                     f"{r['profiled']}/{r['correct']}", f"{r['baselines_measured']}/{r['baselines_cached']}",
                     f"{r['reference_profiles']['collected']}/{r['reference_profiles']['reused']}",
                     " ".join(f"{k}={v:.0f}" for k, v in sorted(s.items(), key=lambda kv: -kv[1])[:8])])
    return print_table(rows, ["round", "wall s", "first verdict s", "last verdict s", "last profile s",
                              "correct/verdicts", "profiled/correct", "baselines measured/cached",
                              "reference profiles collected/reused", "stage seconds summed (top 8)"])


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        sys.exit("round_speed needs a CUDA GPU (and Nsight Compute for the profiles: ncu on PATH or KW_NCU)")
    rounds: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="kw_round_speed_") as tmp:
        if args.before:
            rounds["before"] = one_round(str(Path(args.before).resolve()), args, Path(tmp), "before")
            shutil.rmtree(Path(tmp) / "before", ignore_errors=True)
        rounds["after"] = one_round(str(REPO), args, Path(tmp), "after")
    text = table(rounds)
    print(text)
    write_json(out_dir() / "round_speed.json", {"device": torch.cuda.get_device_name(), "args": {
        k: str(v) for k, v in vars(args).items()}, "rounds": rounds, "table": text})
    return 0


if __name__ == "__main__":
    sys.exit(main())
