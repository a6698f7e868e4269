"""The first hour on a GPU machine: the README example without an LLM, Ctrl-C after two stored
instances, then --resume; records times, exit codes and output lines.

    python bench/first_hour_gpu.py            # writes $OUT/first_hour_gpu.json when OUT is set

What it shows: on a GPU the no-LLM path prints live progress, Ctrl-C ends the run with exit 130,
the best instance so far on disk and the resume command, and the resumed run judges only the
instances not stored before (the JSON lists how many came from the store). Expect about two
minutes (six template instances, each a judge process with Triton compilation, plus baselines).
"""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "problems" / "scale_bias_gelu.py"


def stored(run_dir: Path) -> int:
    try:
        with sqlite3.connect(run_dir / "run.sqlite") as conn:
            return conn.execute("SELECT COUNT(*) FROM candidates WHERE action = 'tune'").fetchone()[0]
    except sqlite3.Error:
        return 0


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="kw-first-hour-"))
    run_dir = work / "kw-runs" / "ctrl-c"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    env = {k: v for k, v in env.items() if not k.startswith(("KW_LLM", "KERNELWRIGHT_LLM", "KW_CONFIG"))}
    command = [sys.executable, "-m", "kernelwright", "optimize", str(EXAMPLE), "--max-evals", "6",
               "--run-dir", str(run_dir)]
    started = time.monotonic()
    process = subprocess.Popen(command, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    while stored(run_dir) < 2 and process.poll() is None:
        time.sleep(0.1)
    stopped_at = time.monotonic() - started
    os.killpg(process.pid, signal.SIGINT)
    out, err = process.communicate(timeout=120)
    exited_after = time.monotonic() - started - stopped_at
    resumed_at = time.monotonic()
    resumed = subprocess.run([sys.executable, "-m", "kernelwright", "optimize", "--resume", str(run_dir), "--json"],
                             cwd=work, env=env, capture_output=True, text=True, timeout=600)
    record = {
        "first": {"exit_code": process.returncode, "ctrl_c_at_s": round(stopped_at, 1),
                  "exited_after_s": round(exited_after, 2), "stdout": out.splitlines(), "stderr": err.splitlines()},
        "resume": {"exit_code": resumed.returncode, "seconds": round(time.monotonic() - resumed_at, 1),
                   "outcome": json.loads(resumed.stdout) if resumed.returncode == 0 else resumed.stdout,
                   "stderr": resumed.stderr.splitlines()},
        "best_header": (run_dir / "best_model_new.py").read_text().split("\n\n")[0].splitlines()
        if (run_dir / "best_model_new.py").is_file() else None,
    }
    text = json.dumps(record, indent=2)
    print(text)
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "first_hour_gpu.json").write_text(text)
    return 0 if process.returncode == 130 and resumed.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
