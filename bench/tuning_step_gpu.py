"""The search's tuning step on a GPU, driven by hand-written answers (not model output).

Runs `kernelwright optimize` on level-1 ReLU (batch_size 512: a 0.8 GB input) with `--llm exchange`
and local evaluation, answering its three prompts with the hand-written answers in
tests/fixtures/cassettes/answers/tune_relu (a plan, a first version c1 with BLOCK_SIZE 256 and 4
warps, and the Templatizer's template of it), so the run judges c1, the template's default
instance and the tuner's configurations on this GPU. Nothing here is a model's work: it measures
the mechanism (does the default instance reproduce c1 within `tune_match`, what the tuner finds,
what the step costs in GPU-seconds), not an agent.

    PYTHONPATH=. KW_KERNELBENCH=/path/to/kernelbench python bench/tuning_step_gpu.py [--evals 8] [--batch 4]

Writes $OUT/tuning_step_gpu.json (c1, every instance with its parameters, time and speedups, the
adopted one, the reproduction ratio, the job's cost) and $OUT/tuning_step_gpu.md, and keeps the
run folder under $OUT/run for `kernelwright runs show`.
"""
from __future__ import annotations

import argparse
import json
import os
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
    return subprocess.run([sys.executable, "-m", "kernelwright", "optimize", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def answer(exchange: Path, role: str, text: str) -> None:
    from kernelwright.llm.exchange import read_answer

    pending = [json.loads(p.read_text()) for p in sorted(exchange.glob("*.request.json"))
               if read_answer(exchange, p.name[: -len(".request.json")]) is None]
    if len(pending) != 1 or pending[0]["request"]["role"] != role:
        sys.exit(f"expected one pending {role} prompt in {exchange}, found {[p['request']['role'] for p in pending]}")
    (exchange / pending[0]["answer_file"]).write_text(text)


def run(out: Path, evals: int, batch: int, timeout: float) -> dict:
    run_dir = out / "run"
    args = [str(problem_path("level1/19_ReLU.py")), "--llm", "exchange", "--strategy", "greedy",
            "--run-dir", str(run_dir), "--quiet", "--set", "batch_size=512", "--set", "drafts=1",
            "--set", "iterations=1", "--set", "parallel=1", "--set", "max_repairs=0", "--set", "skills_k=0",
            "--set", f"tune_evals={evals}", "--set", f"tune_batch={batch}"]
    started = time.monotonic()
    for role, name in SCRIPT:
        paused = optimize(args, timeout)
        if paused.returncode != PAUSED:
            sys.exit(f"expected a pause for the {role}, got {paused.returncode}:\n{paused.stdout}\n{paused.stderr}")
        answer(run_dir / "exchange", role, (ANSWERS / name).read_text())
        args = ["--resume", str(run_dir), "--quiet"]
    done = optimize([*args, "--json"], timeout)
    if done.returncode != 0:
        sys.exit(f"the run failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return {"outcome": json.loads(done.stdout), "wall_s": round(time.monotonic() - started, 1),
            "candidates": candidates(run_dir)}


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
    c1 = next(r for r in rows if r["id"] == "c1")
    record = c1["tuning"] or {}
    default = next((r for r in rows if r["id"] == record.get("default_instance")), None)
    lines = ["| candidate | parameters | median ms | x eager | x torch.compile |", "|---|---|---|---|---|"]
    for r in rows[1:]:
        speed = r["speedup"] or {}
        params = ", ".join(f"{k}={v}" for k, v in (r["params"] or {}).items()) or "(c1 as written)"
        mark = " (adopted)" if r["adopted"] else " (default instance)" if r["id"] == record.get("default_instance") else ""
        lines.append(f"| {r['id']}{mark} | {params} | {_num(r['median_ms'])} | {_num(speed.get('eager'))} | "
                     f"{_num(speed.get('compile_default'))} |")
    ratio = (default["median_ms"] / c1["median_ms"]) if default and default["median_ms"] and c1["median_ms"] else None
    lines += ["", f"default instance / c1 time: {ratio:.3f}" if ratio else "default instance: not timed",
              f"outcome: {record.get('outcome')}", f"cost: {json.dumps(record.get('cost'))}",
              f"wall: {result['wall_s']} s (three pauses included)"]
    return "\n".join(lines) + "\n"


def _num(value) -> str:
    return "-" if value is None else f"{value:.4g}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evals", type=int, default=8, help="tune_evals: instances of the tuning job")
    parser.add_argument("--batch", type=int, default=4, help="tune_batch: instances judged at once")
    parser.add_argument("--timeout-s", type=float, default=420, help="limit of each optimize call")
    options = parser.parse_args()
    out = Path(os.environ.get("OUT", "out"))
    out.mkdir(parents=True, exist_ok=True)
    result = run(out, options.evals, options.batch, options.timeout_s)
    (out / "tuning_step_gpu.json").write_text(json.dumps(result, indent=2))
    text = report(result)
    (out / "tuning_step_gpu.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
