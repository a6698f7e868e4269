"""Probe: can a Landlock-confined process open a CUDA IPC handle of another process's cuMemAlloc?
And the reverse (a confined exporter, an unconfined importer)?"""
import base64
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from kernelwright.judge import cudaipc, mps

folder = Path(tempfile.mkdtemp(prefix="kw-judge-ipcprobe"))
server = mps.start(folder / "mps")
os.environ.update(mps.client_env(server))
torch.empty(1, device="cuda")
block = cudaipc.alloc(4096)
handle = base64.b64encode(cudaipc.export(block.ptr)).decode()
CHILD = r"""
import base64, os, sys
from pathlib import Path
import torch
from kernelwright.judge import cudaipc
from kernelwright.judge.confine import confine
scratch, pipe, mode, handle = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
(scratch / "runner").mkdir(exist_ok=True)
if mode != "open":
    report = confine(scratch, [scratch / "runner", Path(pipe)], scope_signals=mode == "scoped")
torch.empty(1, device="cuda")
try:
    ptr = cudaipc.open_handle(base64.b64decode(handle))
    print(mode, "opened", hex(ptr), flush=True)
except Exception as exc:
    print(mode, "FAILED", exc, flush=True)
"""
for mode in ("open", "scoped", "unscoped"):
    done = subprocess.run([sys.executable, "-c", CHILD, str(folder), str(server.pipe), mode, handle],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ))
    print(done.stdout.strip(), done.stderr[-300:].strip(), flush=True)
mps.stop(server)
