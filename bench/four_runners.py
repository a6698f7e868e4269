"""Four batch runners sharing one GPU on the largest shared level-1 problems: no OOM verdict.

    PYTHONPATH=. python bench/four_runners.py [--runners 4] [--problems 4] [--per-problem 2]
        [--limit-s 240] [--device cuda|cpu]

Issue 14's target: several judge processes on one GPU must not turn each other's memory into
out-of-memory verdicts. Each runner admits jobs through its own pool's memory admission and the
GPU's admission ledger shared by every judge process (judge/scheduling/admission.py, judge/scheduling/ledger.py).

1. Picks the `--problems` largest shared level-1 problems by input bytes that the template
   library covers (bench/template_candidates.py, rule `largest`: sizes read on the meta device,
   no problem named here), at full KernelBench size, and writes `--per-problem` correct candidates
   of each (the library's default instance, then other feasible block sizes) as batch requests.
2. Splits the requests over `--runners` folders (request j to folder j mod runners), records the
   device once into the first folder (not timed; `--no-peaks`: datasheet peaks, this bench reads no
   speed-of-light floor) and copies device.json to the others.
3. Starts `python -m kernelwright judge --batch FOLDER --profile-budget 0` for every folder at
   once, waits for all of them within `--limit-s` (a runner still running then is stopped: its
   missing verdicts are listed as not judged, not as OOMs).
4. Writes $OUT/four_runners.json and .md: every verdict's status, stage, outcome
   (judge/outcome.py), whether it is an out-of-memory verdict (admission.is_oom) or was retried
   alone after one (flag oom_retried_alone), its measured peak GPU memory and its admission wait;
   each runner's exit code and wall time; the claim's result: PASS (every request has a verdict
   and none is an OOM), FAIL (some verdict is an OOM) or INCOMPLETE (no OOM, but not every
   request was judged within the limit).

`--device cpu` is a smoke test of this script (TRITON_INTERPRET=1, the judge's CPU sizes, two
correctness trials, no timing, no GPU memory at all): its numbers are not the target and say
nothing about OOMs.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from evidence_common import REPO, out_dir, print_table, write_json  # noqa: E402
from template_candidates import prepare  # noqa: E402

GIB = 1 << 30


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runners", type=int, default=4)
    parser.add_argument("--problems", type=int, default=4)
    parser.add_argument("--per-problem", type=int, default=2, help="candidates of each problem")
    parser.add_argument("--limit-s", type=float, default=240.0, help="wall-clock limit for the runners together")
    parser.add_argument("--device", default="cuda", help="cuda, or cpu for a smoke test of this script")
    parser.add_argument("--work", type=Path, default=None, help="working folder (default: under $OUT)")
    return parser.parse_args()


def write_requests(manifest: dict, folders: list[Path], device: str) -> list[dict]:
    """One batch request per candidate, request j into folder j mod len(folders)."""
    from kernelwright.judge.scheduling.batch_folder import write_request

    requests, j = [], 0
    for index in range(max(len(p["candidates"]) for p in manifest["problems"])):
        for problem in manifest["problems"]:
            if index >= len(problem["candidates"]):
                continue
            candidate = problem["candidates"][index]
            folder = folders[j % len(folders)]
            name = Path(candidate["path"]).stem
            config = {"device": device, "overrides": problem["overrides"]}
            if device == "cpu":  # the smoke test: correctness only (CPU timings say nothing here)
                config.update(time=False, trials=2)
            write_request(folder, name, Path(problem["path"]), Path(candidate["path"]).read_text(), config)
            requests.append({"name": name, "folder": str(folder), "problem": Path(problem["path"]).stem,
                             "input_bytes": problem["input_bytes"], "params": candidate["params"]})
            j += 1
    return requests


def record_device(folders: list[Path], device: str) -> float:
    """device.json into the first folder (measured once, not timed with the runners), copied to the
    others: the runners then start judging at once."""
    from kernelwright.judge.target import DEVICE_FILE

    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "kernelwright.judge.target", str(folders[0]), "--device", device,
                    "--no-peaks"], capture_output=True, text=True, timeout=900)
    if (folders[0] / DEVICE_FILE).is_file():
        for folder in folders[1:]:
            shutil.copy(folders[0] / DEVICE_FILE, folder / DEVICE_FILE)
    return time.monotonic() - started


def run_runners(folders: list[Path], device: str, limit_s: float, logs: Path) -> list[dict]:
    """Start one batch runner per folder at once; wait for all within `limit_s`; stop the rest."""
    logs.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **({"TRITON_INTERPRET": "1"} if device == "cpu" else {})}
    started = time.monotonic()
    runners = []
    for index, folder in enumerate(folders):
        log = open(logs / f"runner{index}.log", "w")
        command = [sys.executable, "-m", "kernelwright", "judge", "--batch", str(folder), "--device", device,
                   "--profile-budget", "0"]
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=REPO,
                                   env=env)
        runners.append({"runner": index, "folder": str(folder), "process": process, "log": log})
    while any(r["process"].poll() is None for r in runners) and time.monotonic() - started < limit_s:
        for r in runners:
            if "wall_s" not in r and r["process"].poll() is not None:
                r["wall_s"] = round(time.monotonic() - started, 1)
        time.sleep(0.5)
    results = []
    for r in runners:
        stopped = r["process"].poll() is None
        if stopped:
            _stop(r["process"])
        r["log"].close()
        results.append({"runner": r["runner"], "folder": r["folder"], "exit_code": r["process"].returncode,
                        "stopped_at_limit": stopped, "wall_s": r.get("wall_s", round(time.monotonic() - started, 1))})
    return results


def _stop(process: subprocess.Popen) -> None:
    """This bench's runner, its process group: SIGTERM, then SIGKILL."""
    for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def verdict_row(request: dict) -> dict:
    from kernelwright.judge.scheduling.admission import OOM_RETRIED, is_oom, oom_line, peak_of
    from kernelwright.judge.scheduling.batch_folder import VERDICT_SUFFIX
    from kernelwright.judge.outcome import outcome
    from kernelwright.judge.verdict import Verdict

    path = Path(request["folder"]) / f"{request['name']}{VERDICT_SUFFIX}"
    row = {**request, "judged": path.is_file()}
    if not row["judged"]:
        return row
    verdict = Verdict.from_json(path.read_text())
    peak = peak_of(verdict)
    found = outcome(verdict)
    return {**row, "status": verdict.status, "stage": verdict.stage, "outcome": found.text(),
            "oom": is_oom(verdict), "oom_line": oom_line(verdict),
            "oom_retried_alone": any(f.code == OOM_RETRIED for f in verdict.flags),
            "flags": sorted({f.code for f in verdict.flags}), "peak_gib": round(peak / GIB, 2) if peak else None,
            "admission_wait_s": verdict.stage_seconds.get("admission_wait", 0.0),
            "stage_seconds": verdict.stage_seconds}


def claim(rows: list[dict]) -> tuple[str, str]:
    ooms = [r["name"] for r in rows if r.get("oom")]
    missing = [r["name"] for r in rows if not r["judged"]]
    if ooms:
        return "FAIL", f"{len(ooms)} OOM verdict(s): {', '.join(ooms)}"
    if missing:
        return "INCOMPLETE", f"no OOM verdict among {len(rows) - len(missing)}, but {len(missing)} request(s) " \
                             f"not judged within the limit: {', '.join(missing)}"
    return "PASS", f"no OOM verdict among {len(rows)} verdicts"


def write_markdown(path: Path, data: dict) -> None:
    lines = [f"# Four batch runners sharing the GPU: {data['result']}", "", data["summary"], "",
             f"Device: {data['device']}; {data['runners']} runners, {len(data['verdicts'])} requests, "
             f"limit {data['limit_s']} s; runners' wall time {data['wall_s']} s (device recorded beforehand in "
             f"{data['record_device_s']} s, not counted).", ""]
    lines += ["| request | problem | inputs GiB | status | outcome | OOM | retried alone | peak GiB | "
              "admission wait s |", "|---|---|---|---|---|---|---|---|---|"]
    for r in data["verdicts"]:
        size = round(r["input_bytes"] / GIB, 2) if r.get("input_bytes") else "-"
        if not r["judged"]:
            lines.append(f"| {r['name']} | {r['problem']} | {size} | not judged | - | - | - | - | - |")
            continue
        lines.append(f"| {r['name']} | {r['problem']} | {size} | {r['status']} | {r['outcome']} | "
                     f"{'yes' if r['oom'] else 'no'} | {'yes' if r['oom_retried_alone'] else 'no'} | "
                     f"{r['peak_gib'] if r['peak_gib'] is not None else '-'} | {r['admission_wait_s']} |")
    lines += ["", "| runner | exit code | stopped at limit | wall s |", "|---|---|---|---|"]
    lines += [f"| {r['runner']} | {r['exit_code']} | {r['stopped_at_limit']} | {r['wall_s']} |" for r in data["runners_run"]]
    path.write_text("\n".join(lines) + "\n")


def main() -> int:
    args = parse_args()
    out = out_dir()
    work = args.work or out / "four_runners_work"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    counts = [args.per_problem] * args.problems
    manifest = prepare(work / "manifest.json", "largest", counts, args.device)
    folders = [work / f"runner{i}" for i in range(args.runners)]
    for folder in folders:
        folder.mkdir()
    requests = write_requests(manifest, folders, args.device)
    record_s = record_device(folders, args.device)
    started = time.monotonic()
    runs = run_runners(folders, args.device, args.limit_s, work / "logs")
    wall = time.monotonic() - started
    rows = [verdict_row(r) for r in requests]
    result, summary = claim(rows)
    data = {"claim": "four batch runners sharing the GPU on the largest shared level-1 problems: no OOM verdict",
            "result": result, "summary": summary, "device": args.device, "runners": args.runners,
            "limit_s": args.limit_s, "wall_s": round(wall, 1), "record_device_s": round(record_s, 1),
            "problems": [{k: v for k, v in p.items() if k != "candidates"} for p in manifest["problems"]],
            "verdicts": rows, "runners_run": runs,
            "note": "CPU smoke run: not the target" if args.device == "cpu" else ""}
    write_json(out / "four_runners.json", data)
    write_markdown(out / "four_runners.md", data)
    print_table([[r["name"], r.get("status", "not judged"), "yes" if r.get("oom") else "no",
                  "yes" if r.get("oom_retried_alone") else "no", str(r.get("peak_gib") or "-"),
                  str(r.get("admission_wait_s", "-"))] for r in rows],
                ["request", "status", "OOM", "retried alone", "peak GiB", "admission wait s"])
    print(f"\n{result}: {summary} (runners' wall time {wall:.0f} s)")
    return 0 if result == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
