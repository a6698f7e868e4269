"""GPU smoke test of the runner/checker judge: a few candidates through the real sandbox, printed.

    PYTHONPATH=. KW_DEBUG_STACKS=20 python bench/probes/judge_smoke.py red_team/lazy_thread.py ...

A stage ends after 60 s (timeout_s), so a hang comes back as a verdict whose stderr holds the
checker's and the runner's stacks (KW_DEBUG_STACKS)."""
import json
import os
import sys
import time
from pathlib import Path

from kernelwright.judge import JudgeConfig, judge

REPO = Path(__file__).resolve().parents[2]
PROBLEM = REPO / "examples" / "problems" / "row_softmax.py"
CANDS = [REPO / "examples" / "candidates" / "row_softmax.py"] + [REPO / "bench" / "candidates" / p for p in sys.argv[1:]]
CONFINE = not os.environ.get("KW_SMOKE_UNCONFINED")
for cand in CANDS:
    started = time.time()
    v = judge(PROBLEM, cand, JudgeConfig(baselines=("eager",), trials=5, confine=CONFINE, timeout_s=60,
                                         compile_timeout_s=120))
    t = v.timing
    print(json.dumps({"candidate": cand.name, "status": v.status, "wall": round(time.time() - started, 1),
                      "error": (v.error or "")[-700:],
                      "flags": [(f.code, f.severity, f.message[:160]) for f in v.flags if f.severity != "info"],
                      "timing": [t.median_ms, t.iqr_ms, t.n, t.method, t.note[:120]] if t else None,
                      "speedup": v.speedup, "timer": v.environment.get("timer"),
                      "mps": v.process.isolation.get("mps") if v.process else None,
                      "confinement": (v.process.isolation.get("filesystem") or "")[:200] if v.process else None,
                      "checker": v.process.isolation.get("checker", "")[:160] if v.process else None,
                      "stages": v.stage_seconds, "kernels": (v.kernels or {}).get("kernels", [])[:3],
                      "work_kernels": v.work.kernels if v.work else None,
                      "stderr": (v.process.stderr_tail[-6000:] if v.process and v.status != "pass" else "")}),
          flush=True)
