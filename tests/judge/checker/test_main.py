"""checker/main.py is imported torch-free: the supervisor imports it in the checker child before the
child's set-up and confinement, and torch loads only in step 1 (`load_judge_modules`). The link and
the stages that bring torch are imported by the functions that run them (issue 38 point 3)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

_IMPORT = r"""
import sys
from kernelwright.judge.checker import main
print("torch" in sys.modules, "triton" in sys.modules)
main.load_judge_modules([])
print("torch" in sys.modules)
"""


def test_the_checker_loads_torch_only_in_step_1():
    done = subprocess.run([sys.executable, "-c", _IMPORT], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO), "KW_PARENT_PID": ""})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False", "True"], done.stdout + done.stderr
