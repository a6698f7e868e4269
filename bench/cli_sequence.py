"""17 candidates of 4 problems judged one after another with the CLI, baselines cached: under 3 minutes?

    PYTHONPATH=. python bench/cli_sequence.py [--instances 5,4,4,4] [--target-s 180] [--device cuda|cpu]

Issue 14's target for a user (or an agent) judging candidates one by one with
`kernelwright judge PROBLEM CANDIDATE`: 17 candidates of 4 problems in under 180 s of wall time,
the problems' eager and torch.compile baselines already cached.

1. Picks 4 shared level-1 problems by a rule, not by name (bench/template_candidates.py, rule
   `families`: in file order, the first problem of each template family the built-in library has
   not covered yet, so the 4 exercise different kernels), at full KernelBench size, and writes
   `--instances` correct candidates of each (the library's default instance, then other feasible
   block sizes).
2. Runs `python -m kernelwright baseline PROBLEM --json` on each (not counted: the target says
   the baselines are cached; its seconds are recorded apart).
3. Runs `python -m kernelwright judge PROBLEM CANDIDATE --json` for the 17 candidates one after
   another (a problem's candidates together, as a search session judges them), each timed
   wall-clock around the whole command.
   By default each call goes through the user's judge daemon (kernelwright/judge/scheduling/daemon.py), the
   path a user gets: the first call starts it (and its fork server's imports), the later ones are
   forked warm from it. `--no-daemon` measures the old path (every call judges in its own
   process: KW_JUDGE_DAEMON=0). The daemons the calls used are stopped at the end.
4. Writes $OUT/cli_sequence.json and .md: each call's wall time, exit code, status, stage, the
   verdict's stage_seconds (imports, reference, check, time, baselines, overhead, ...), the time
   outside the worker (CLI start-up, sandbox, admission), whether its baselines came from the
   cache, whether it was served warm (forked from a fork server) and by which daemon (pid, its
   request number), and the total against the target: PASS (all 17 judged, every one passing,
   total under the target), FAIL otherwise (the reason is printed).

The baselines at full size take minutes: `--phase baselines --work DIR` then `--phase judge --work
DIR` splits the run in two commands (same machine, same judge cache: KW_CACHE_DIR).

`--device cpu` is a smoke test of this script (TRITON_INTERPRET=1, the judge's CPU sizes as --set,
two correctness trials, no timing and so no baselines): its numbers are not the target.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from evidence_common import REPO, out_dir, print_table, write_json  # noqa: E402
from template_candidates import prepare  # noqa: E402

CALL_LIMIT_S = 900
DAEMON_ENV: dict[str, str] = {}  # {"KW_JUDGE_DAEMON": "0"} with --no-daemon
JUDGE_ARGS: list[str] = []  # ["--config", FILE] with --config


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", default="5,4,4,4", help="candidates of each problem (one number per problem)")
    parser.add_argument("--target-s", type=float, default=180.0)
    parser.add_argument("--device", default="cuda", help="cuda, or cpu for a smoke test of this script")
    parser.add_argument("--work", type=Path, default=None, help="working folder (default: under $OUT); give the "
                        "same one to a `--phase baselines` call and the `--phase judge` call after it")
    parser.add_argument("--phase", choices=("all", "baselines", "judge"), default="all",
                        help="baselines: pick the problems, write the candidates and cache the baselines, then stop; "
                             "judge: the 17 timed calls on what an earlier baselines phase left in --work")
    parser.add_argument("--config", default=None, help="a kernelwright config file whose [judge] table every judge "
                        "call reads (`kernelwright judge --config FILE`)")
    parser.add_argument("--no-daemon", action="store_true", help="judge every call in its own process "
                        "(KW_JUDGE_DAEMON=0), the path before the judge daemon")
    return parser.parse_args()


def cli(*args: str, device: str) -> tuple[subprocess.CompletedProcess, float]:
    env = {**os.environ, **({"TRITON_INTERPRET": "1"} if device == "cpu" else {}), **DAEMON_ENV}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "kernelwright", *args], capture_output=True, text=True,
                          timeout=CALL_LIMIT_S, cwd=REPO, env=env)
    return done, time.monotonic() - started


def size_args(overrides: dict) -> list[str]:
    return [arg for name, value in overrides.items() for arg in ("--set", f"{name}={value}")]


def cache_baselines(problem: dict, device: str) -> dict:
    """`kernelwright baseline` on the problem (the judge then finds its baselines in the cache)."""
    if device == "cpu":
        return {"problem": Path(problem["path"]).stem, "skipped": "CPU smoke test: no timing, no baselines"}
    done, seconds = cli("baseline", problem["path"], "--json", "--device", device, *size_args(problem["overrides"]),
                        device=device)
    return {"problem": Path(problem["path"]).stem, "exit_code": done.returncode, "seconds": round(seconds, 1),
            "error": done.stderr.strip().splitlines()[-1:] if done.returncode else []}


def judge_call(problem: dict, candidate: dict, device: str) -> dict:
    args = ["judge", problem["path"], candidate["path"], "--json", "--device", device, *size_args(problem["overrides"]),
            *JUDGE_ARGS]
    if device == "cpu":
        args += ["--no-time", "--trials", "2"]
    done, seconds = cli(*args, device=device)
    row = {"problem": Path(problem["path"]).stem, "candidate": Path(candidate["path"]).stem,
           "params": candidate["params"], "exit_code": done.returncode, "wall_s": round(seconds, 2)}
    try:
        verdict = json.loads(done.stdout)
    except ValueError:
        return {**row, "status": "no verdict", "error": (done.stderr or done.stdout).strip()[-500:]}
    process = verdict.get("process") or {}
    baselines = verdict.get("baselines") or {}
    worker = process.get("wall_s")
    isolation = process.get("isolation") or {}
    daemon = isolation.get("daemon") or {}
    notes = [f.get("message", "") for f in verdict.get("flags") or [] if f.get("code") == "judge_note"]
    return {**row, "status": verdict.get("status"), "stage": verdict.get("stage"),
            "error": (verdict.get("error") or "")[-1500:], "stage_seconds": verdict.get("stage_seconds") or {},
            "worker_wall_s": worker, "outside_worker_s": round(seconds - worker, 2) if worker else None,
            "baselines_cached": baselines.get("cached"), "start": isolation.get("start", ""),
            "warm": isolation.get("start", "").startswith("warm"), "daemon_pid": daemon.get("pid"),
            "daemon_request": daemon.get("request"), "daemon_uptime_s": daemon.get("uptime_s"),
            "judge_notes": notes}


def stop_daemons(rows: list[dict]) -> list[int]:
    """End the daemons the calls used (SIGTERM: each stops its pool and fork server), so the run
    leaves nothing behind."""
    pids = sorted({r["daemon_pid"] for r in rows if r.get("daemon_pid")})
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
    return pids


def summary(rows: list[dict], target_s: float, expected: int) -> tuple[str, str, float]:
    total = sum(r["wall_s"] for r in rows)
    failed = [r["candidate"] for r in rows if r.get("status") != "pass"]
    if len(rows) < expected:
        return "FAIL", f"only {len(rows)} candidates of {expected} (the library covered fewer)", total
    if failed:
        return "FAIL", f"{len(failed)} candidate(s) did not pass: {', '.join(failed)}; total {total:.0f} s", total
    verdict = "PASS" if total < target_s else "FAIL"
    return verdict, f"{len(rows)} candidates judged one after another in {total:.0f} s (target < {target_s:.0f} s)", total


def daemon_summary(rows: list[dict], off: bool, stopped: list[int]) -> str:
    if off:
        return "off (--no-daemon: every call judged in its own process)"
    served = [r for r in rows if r.get("daemon_pid")]
    warm = sum(1 for r in rows if r.get("warm"))
    first = served[0].get("daemon_request") if served else None
    return (f"{len(served)} of {len(rows)} calls served by daemon(s) {stopped} (stopped at the end), {warm} forked warm"
            + (f"; the first call was request {first} of an already running daemon" if first and first > 1 else ""))


def stage_medians(rows: list[dict]) -> dict[str, float]:
    names = sorted({k for r in rows for k in r.get("stage_seconds", {})})
    medians = {n: round(statistics.median(r.get("stage_seconds", {}).get(n, 0.0) for r in rows), 2) for n in names}
    outside = [r["outside_worker_s"] for r in rows if r.get("outside_worker_s") is not None]
    if outside:
        medians["outside_worker"] = round(statistics.median(outside), 2)
    return medians


def write_markdown(path: Path, data: dict) -> None:
    lines = [f"# {data['claim']}: {data['result']}", "", data["summary"], "",
             f"Device: {data['device']}. Baselines cached beforehand (not counted): "
             + ", ".join(f"{b['problem']} {b.get('seconds', '-')} s" for b in data["baselines"]) + ".", "",
             f"Judge daemon: {data['daemon']}.", "",
             "| # | candidate | exit | status | wall s | worker s | outside worker s | baselines cached | warm (daemon pid, "
             "request) | slowest stages |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(data["calls"], 1):
        top = sorted((r.get("stage_seconds") or {}).items(), key=lambda kv: -kv[1])[:3]
        stages = ", ".join(f"{k} {v:.1f}" for k, v in top) or "-"
        lines.append(f"| {i} | {r['candidate']} | {r['exit_code']} | {r.get('status')} | {r['wall_s']} | "
                     f"{r.get('worker_wall_s', '-')} | {r.get('outside_worker_s', '-')} | {r.get('baselines_cached')} | "
                     f"{'yes' if r.get('warm') else 'no'} ({r.get('daemon_pid') or '-'}, {r.get('daemon_request') or '-'}) | "
                     f"{stages} |")
    lines += ["", "Median seconds per stage over the calls: "
              + ", ".join(f"{k} {v}" for k, v in data["stage_medians"].items()), ""]
    path.write_text("\n".join(lines) + "\n")


def main() -> int:
    args = parse_args()
    if args.no_daemon:
        DAEMON_ENV["KW_JUDGE_DAEMON"] = "0"
    if args.config:
        JUDGE_ARGS.extend(["--config", str(Path(args.config).resolve())])
    out = out_dir()
    work = args.work or out / "cli_sequence_work"
    work.mkdir(parents=True, exist_ok=True)
    counts = [int(c) for c in args.instances.split(",") if c.strip()]
    if args.phase == "judge" and (work / "manifest.json").is_file():
        manifest = json.loads((work / "manifest.json").read_text())
        baselines = json.loads((work / "baselines.json").read_text()) if (work / "baselines.json").is_file() else []
    else:
        manifest = prepare(work / "manifest.json", "families", counts, args.device)
        baselines = [cache_baselines(p, args.device) for p in manifest["problems"]]
        write_json(work / "baselines.json", baselines)
        if args.phase == "baselines":
            print(f"baselines cached: {baselines}")
            return 0
    rows: list[dict] = []
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(124))  # cut short (timeout): still stop the daemons
    try:
        for problem in manifest["problems"]:
            for candidate in problem["candidates"]:
                rows.append(judge_call(problem, candidate, args.device))
                r = rows[-1]
                print(f"{len(rows):2d}. {r['candidate']}: {r.get('status')} in {r['wall_s']:.1f} s"
                      f"{' (warm, daemon ' + str(r['daemon_pid']) + ')' if r.get('daemon_pid') else ''}", flush=True)
                write_json(out / "cli_sequence.calls.json", rows)  # kept when the run is cut short
    finally:
        stopped = stop_daemons(rows)
    result, text, total = summary(rows, args.target_s, sum(counts))
    data = {"claim": f"{sum(counts)} candidates of {len(counts)} problems judged one after another with the CLI "
                     f"in under {args.target_s:.0f} s (baselines cached)",
            "result": result, "summary": text, "total_s": round(total, 1), "target_s": args.target_s,
            "device": args.device, "problems": [{k: v for k, v in p.items() if k != "candidates"}
                                                for p in manifest["problems"]],
            "baselines": baselines, "calls": rows, "stage_medians": stage_medians(rows),
            "daemon": daemon_summary(rows, args.no_daemon, stopped),
            "note": "CPU smoke run: not the target" if args.device == "cpu" else ""}
    write_json(out / "cli_sequence.json", data)
    write_markdown(out / "cli_sequence.md", data)
    print_table([[r["candidate"], str(r.get("status")), f"{r['wall_s']:.1f}", str(r.get("outside_worker_s", "-"))]
                 for r in rows], ["candidate", "status", "wall s", "outside worker s"])
    print(f"\nmedian stage seconds: {data['stage_medians']}")
    print(f"{result}: {text}")
    return 0 if result == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
