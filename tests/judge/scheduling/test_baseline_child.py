"""The one baseline-measuring child both the baseline lane and the reference timing run: the command
line it is given is the one it parses, and each caller's reply (or its word for a device that cannot
be named) is its last line of stdout."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from kernelwright.judge.config import JudgeConfig
from kernelwright.judge.scheduling import baseline_child, baseline_lane, reference_timing
from kernelwright.judge.scheduling.baseline_lane import LaneTask

REPO = Path(__file__).resolve().parents[3]


def _task(tmp_path: Path, device: str) -> LaneTask:
    problem = tmp_path / "p.py"
    problem.write_text("")  # never loaded: the device cannot be named first
    return LaneTask("p.py", problem, {"N": 4}, JudgeConfig(device="cpu", cache_dir=str(tmp_path / "cache")), device)


def _last_line(command: list[str]) -> tuple[int, dict]:
    env = {**os.environ, "PATH": "/nonexistent", "PYTHONPATH": str(REPO)}  # no nvidia-smi: a GPU has no name
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    return done.returncode, json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("module,expected", [
    (baseline_lane, {"errors": {"lane": "cannot name 'cuda:7' without torch"}, "wanted": ["lane"]}),
    (reference_timing, {"unavailable": "cannot name the device 'cuda:7'"}),
])
def test_each_callers_child_parses_the_shared_command_and_says_why_it_measured_nothing(tmp_path, module, expected):
    command = baseline_child.command(module.MODULE, _task(tmp_path, "cuda:7"))
    assert command[1:3] == ["-m", module.MODULE] and json.loads(command[command.index("--overrides") + 1]) == {"N": 4}
    assert _last_line(command) == (1, expected)
