"""Ray stays optional: the judge and the search import without it, and `--eval ray` without it says
how to get it. Ray is hidden from a fresh interpreter (sys.modules), not replaced."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_judge_imports_no_ray_and_eval_ray_without_ray_says_how_to_get_it(tmp_path):
    code = ("import sys; sys.modules['ray'] = None\n"
            "import kernelwright.judge.scheduling.node, kernelwright.search.drivers.ray_eval as r\n"
            "assert 'ray' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
            "print(r.missing_ray_message('ray:auto'))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    assert 'pip install "kernelwright[ray]"' in done.stdout and "--eval ray:auto" in done.stdout

