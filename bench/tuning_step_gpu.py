"""The search's tuning step on a GPU, driven by hand-written answers (not model output).

Runs `kernelwright optimize` on level-1 ReLU (batch_size 512: a 0.8 GB input) with `--llm exchange`
and local evaluation, answering its three prompts with the hand-written answers in
tests/fixtures/cassettes/answers/tune_relu (a plan, a first version c1 with BLOCK_SIZE 256 and 4
warps, and the Templatizer's template of it), so the run judges c1, the template's default
instance and the tuner's configurations on this GPU. Nothing here is a model's work: it measures
the mechanism (does the default instance reproduce c1 within `tune_match`, what the tuner finds,
what the step costs in GPU-seconds), not an agent.

What it can and cannot say about "with and without the tuning step": these answers end the LLM
path at c1, so the path's best without the step is c1 (judged in this same run) and with it the
adopted instance, after `--evals` more evaluations. The comparison at the *same* evaluation
budget needs the model's answers for the evaluations the "without" run would spend on further
proposals; hand-written answers cannot stand in for them (see docs/optimize.md, "The tuning
step", for the settings of such a pair of exchange-driven runs).

    PYTHONPATH=. KW_KERNELBENCH=/path/to/kernelbench python bench/tuning_step_gpu.py [--evals 6] [--batch 5]

Since issue 33 the step measures its configurations in sweeps (`tune_sweep`, 32 by default: each
sweep one evaluation, its fastest then judged in full; only those are candidates here, the sweep's
record is `runs show RUN --ask ID`); `--set tune_sweep=1` measures one configuration per
evaluation as before, and `--set tune_seeds=false` starts without the seed cache.

Every `kernelwright optimize` call has its own limit and all of them together `--deadline-s`; on a
timeout what the run stored so far is still written. `--set NAME=VALUE` passes settings on (a CPU
smoke run: `TRITON_INTERPRET=1 ... --set judge.device=cpu --set batch_size=16 --set dim=1024`).
Writes $OUT/tuning_step_gpu.json (c1, every instance with its parameters, time and speedups, the
adopted one, the reproduction ratio, the job's cost) and $OUT/tuning_step_gpu.md, and keeps the
run folder under $OUT/run for `kernelwright runs show`.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.evidence_common import problem_path  # noqa: E402

ANSWERS = ROOT / "tests" / "fixtures" / "cassettes" / "answers" / "tune_relu"
SCRIPT = [("planner", "01_planner.md"), ("coder", "02_coder.md"), ("templatizer", "03_templatizer.md")]
PAUSED = 75


def optimize(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    process = subprocess.Popen([sys.executable, "-m", "kernelwright", "optimize", *args], cwd=ROOT, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:  # the run and its judges stop; what it stored is reported
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise Timeout(f"an optimize call ran past its {timeout:.0f} s") from exc
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def answer(exchange: Path, role: str, text: str) -> None:
    from kernelwright.llm.exchange import read_answer

    pending = [json.loads(p.read_text()) for p in sorted(exchange.glob("*.request.json"))
               if read_answer(exchange, p.name[: -len(".request.json")]) is None]
    if len(pending) != 1 or pending[0]["request"]["role"] != role:
        sys.exit(f"expected one pending {role} prompt in {exchange}, found {[p['request']['role'] for p in pending]}")
    (exchange / pending[0]["answer_file"]).write_text(text)


# judged quickly enough for a few minutes of GPU time; no ncu profiles (not what this measures)
FAST = ["batch_size=512", "judge.trials=3", "judge.rep_ms=100", "judge.timeout_s=60", "profile_evals=0"]


class Timeout(Exception):
    """An optimize call ran past its limit or the deadline."""


def run(out: Path, evals: int, batch: int, timeout: float, deadline: float, extra: list[str]) -> dict:
    run_dir = out / "run"
    settings = [*FAST, "drafts=1", "iterations=1", "parallel=1", "max_repairs=0", "skills_k=0",
                f"tune_evals={evals}", f"tune_batch={batch}", *extra]
    args = [str(problem_path("level1/19_ReLU.py")), "--llm", "exchange", "--strategy", "greedy",
            "--run-dir", str(run_dir), "--quiet", *(a for s in settings for a in ("--set", s))]
    started = time.monotonic()
    result: dict = {"settings": settings, "complete": False}
    try:
        for role, name in SCRIPT:
            paused = optimize(args, _limit(timeout, deadline, started))
            if paused.returncode != PAUSED:
                sys.exit(f"expected a pause for the {role}, got {paused.returncode}:\n{paused.stdout}\n{paused.stderr}")
            answer(run_dir / "exchange", role, (ANSWERS / name).read_text())
            args = ["--resume", str(run_dir), "--quiet"]
        done = optimize([*args, "--json"], _limit(timeout, deadline, started))
        if done.returncode != 0:
            sys.exit(f"the run failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        result.update(outcome=json.loads(done.stdout), complete=True)
    except Timeout as exc:
        result["stopped"] = str(exc)
    result.update(wall_s=round(time.monotonic() - started, 1),
                  candidates=candidates(run_dir) if (run_dir / "run.sqlite").exists() else [])
    return result


def _limit(timeout: float, deadline: float, started: float) -> float:
    left = deadline - (time.monotonic() - started)
    if left <= 1:
        raise Timeout(f"the deadline of {deadline:.0f} s was reached")
    return min(timeout, left)


def candidates(run_dir: Path) -> list[dict]:
    conn = sqlite3.connect(run_dir / "run.sqlite")
    conn.row_factory = sqlite3.Row
    rows = []
    for row in conn.execute("SELECT id, action, status, search_parent, node FROM candidates ORDER BY rowid"):
        node = json.loads(row["node"])
        result = node.get("eval") or {}
        rows.append({"id": row["id"], "action": row["action"], "status": row["status"],
                     "adopted": row["action"] == "tune" and row["search_parent"] is not None,
                     "params": (node.get("tuning") or {}).get("params"), "median_ms": result.get("median_ms"),
                     "iqr_ms": result.get("iqr_ms"), "speedup": result.get("speedup"), "device": result.get("device"),
                     "tuning": node.get("tuning") if row["id"] == "c1" else None})
    conn.close()
    return rows


def report(result: dict) -> str:
    rows = result["candidates"]
    c1 = next((r for r in rows if r["id"] == "c1"), None)
    head = [f"settings: {' '.join(result['settings'])}", f"wall: {result['wall_s']} s (three pauses included)"]
    if not result["complete"]:
        head.append(f"INCOMPLETE: {result.get('stopped')}; below is what the run stored (resume it with "
                    "`kernelwright optimize --resume RUN`)")
    if c1 is None:
        return "\n".join([*head, "c1 was not judged"]) + "\n"
    record = c1["tuning"] or {}
    default = next((r for r in rows if r["id"] == record.get("default_instance")), None)
    lines = ["| candidate | parameters | median ms | x eager | x torch.compile |", "|---|---|---|---|---|"]
    for r in (r for r in rows if r["action"] != "reference"):
        speed = r["speedup"] or {}
        params = ", ".join(f"{k}={v}" for k, v in (r["params"] or {}).items()) or "(as written)"
        mark = " (adopted)" if r["adopted"] else " (default instance)" if r["id"] == record.get("default_instance") else ""
        lines.append(f"| {r['id']}{mark} | {params} | {_num(r['median_ms'])} | {_num(speed.get('eager'))} | "
                     f"{_num(speed.get('compile_default'))} |")
    ratio = (default["median_ms"] / c1["median_ms"]) if default and default["median_ms"] and c1["median_ms"] else None
    adopted = next((r for r in rows if r["adopted"]), None)
    best = adopted or c1
    instances = [r for r in rows if r["action"] == "tune"]
    lines += ["", f"default instance / c1 time: {ratio:.3f}" if ratio else "default instance: not timed",
              f"outcome: {record.get('outcome')}", f"cost: {json.dumps(record.get('cost'))}"]
    if not result["complete"]:
        return "\n".join([*head, "", *lines]) + "\n"
    lines += ["", "LLM path of these hand-written answers (not a model's), best candidate:",
              f"- without the tuning step: c1, {_num(c1['median_ms'])} ms, 1 evaluation",
              f"- with it: {best['id']}, {_num(best['median_ms'])} ms, {1 + len(instances)} evaluations "
              f"(x{_num(_ratio(c1, best))} over c1)",
              "- the same evaluation budget without the step would need the model's further proposals: not measured here"]
    return "\n".join([*head, "", *lines]) + "\n"


def _ratio(before: dict, after: dict) -> float | None:
    if before["median_ms"] and after["median_ms"]:
        return before["median_ms"] / after["median_ms"]
    return None


def _num(value) -> str:
    return "-" if value is None else f"{value:.4g}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evals", type=int, default=6, help="tune_evals: instances of the tuning job")
    parser.add_argument("--batch", type=int, default=5, help="tune_batch: instances judged at once")
    parser.add_argument("--timeout-s", type=float, default=120, help="limit of each optimize call")
    parser.add_argument("--deadline-s", type=float, default=170, help="limit of all optimize calls together")
    parser.add_argument("--set", dest="extra", action="append", default=[], metavar="NAME=VALUE",
                        help="a further setting (repeatable; later ones win)")
    options = parser.parse_args()
    out = Path(os.environ.get("OUT", "out"))
    out.mkdir(parents=True, exist_ok=True)
    result = run(out, options.evals, options.batch, options.timeout_s, options.deadline_s, options.extra)
    (out / "tuning_step_gpu.json").write_text(json.dumps(result, indent=2))
    text = report(result)
    (out / "tuning_step_gpu.md").write_text(text)
    print(text)
    return 0 if result["complete"] else 1


if __name__ == "__main__":
    sys.exit(main())
