"""Probe: can a Landlock-confined process (as the runner is confined) be an MPS client?"""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from kernelwright.judge import mps

folder = Path(tempfile.mkdtemp(prefix="kw-judge-mpsprobe"))
server = mps.start(folder / "mps")
print("mps:", server.active, server.note, flush=True)
CHILD = r"""
import os, sys
from pathlib import Path
from kernelwright.judge.confine import confine
scratch, pipe, scope = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "1"
(scratch / "runner").mkdir(exist_ok=True)
report = confine(scratch, [scratch / "runner", pipe], scope_signals=scope)
print("confined:", report.active, report.scoped, flush=True)
import torch
try:
    print("cuda:", torch.ones(4, device="cuda").sum().item(), flush=True)
except Exception as exc:
    print("cuda failed:", type(exc).__name__, str(exc)[:300], flush=True)
"""
for scope in ("1", "0"):
    env = {**os.environ, **mps.client_env(server)}
    done = subprocess.run([sys.executable, "-c", CHILD, str(folder), str(server.pipe), scope], env=env,
                          capture_output=True, text=True, timeout=120)
    print(f"scope_signals={scope}:", done.stdout.strip().replace("\n", " | "), done.stderr[-400:], flush=True)
mps.stop(server)
