"""What one profile works with: the configuration, and the run state shared by its steps.

`ProfileConfig` is what the judge passes; `ProfileRun` carries the work folder, the deadline, the
report under construction and the evidence gathered so far, and builds the runner command lines
every step executes.
"""
from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .executor import LocalExecutor
from .hot import MAX_LAUNCHES, SelectionLimits
from .hotspots import HotSpot
from .report import ProfileReport
from .resources import ResourceReport
from .sass import SassSummary

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder holding `kernelwright/`


@dataclass
class ProfileConfig:
    use_ncu: bool = True  # False: timeline, resources and SASS only (e.g. where ncu is forbidden)
    ncu_path: str | None = None
    sass: bool = True
    warmup: int = 3
    calls: int = 3  # forwards recorded by the torch profiler
    ncu_calls: int = 1  # forwards run under ncu
    max_kernels: int = MAX_LAUNCHES  # --launch-count: at most this many kernel launches are replayed by ncu
    hot_kernels: int = 3  # ncu profiles at most this many kernels (hot.py)...
    min_share: float = 0.05  # ...each taking at least this share of the GPU time (the hottest always)...
    cover: float = 0.8  # ...until those picked take this share of it
    source_counters: bool = False  # hot spots from the SourceCounters section (SASS patching) instead of PC sampling
    cache_dir: str | None = None  # keeps what ncu lists per device (`querycache`); None: this process only
    timeout_s: float = 300.0  # per subprocess
    budget_s: float = 900.0  # whole profile; later steps are skipped once it is spent
    energy_seconds: float = 1.0  # 0 disables the energy measurement
    max_findings: int = 6
    seed: int = 0
    overrides: dict = field(default_factory=dict)
    shrink: bool = False
    device: str = "cuda"
    artifacts_dir: str | None = None  # keep CSVs, cubins and SASS listings here (else a temp dir)
    python: str = sys.executable
    env: dict = field(default_factory=dict)  # extra environment for the candidate processes

    def to_dict(self) -> dict:
        return asdict(self)

    def limits(self) -> SelectionLimits:
        return SelectionLimits(self.hot_kernels, self.min_share, self.cover, self.max_kernels, self.ncu_calls)

    @classmethod
    def from_dict(cls, data: dict) -> "ProfileConfig":
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


class ProfileRun:
    """State of one profile: config, work folder, deadline, report under construction."""

    def __init__(self, config: ProfileConfig, work: Path, report: ProfileReport, problem: Path, candidate: Path,
                 executor=None):
        self.config, self.work, self.report = config, work, report
        self.executor = executor or LocalExecutor()  # starts the candidate's runs and ncu (`executor.py`)
        self.problem, self.candidate = problem, candidate
        self.deadline = time.perf_counter() + config.budget_s
        self.resources: dict[str, ResourceReport] = {}  # compiler symbol -> resources
        self.sass: dict[str, SassSummary] = {}  # compiler symbol -> instruction mix
        self.hotspots: dict[str, list[HotSpot]] = {}  # ncu kernel name -> stall hot spots
        self.triton: list[dict] = []  # compiled Triton kernels the runner found
        self.binaries: list[str] = []  # extension .so files the candidate loaded
        self.reports: dict[str, str] = {}  # ncu stage -> the report file it wrote

    def remaining(self) -> float:
        return self.deadline - time.perf_counter()

    def timeout(self) -> float:
        return max(1.0, min(self.config.timeout_s, self.remaining()))

    def spend(self, step: str, seconds: float) -> None:
        self.report.overhead_s[step] = round(self.report.overhead_s.get(step, 0.0) + seconds, 3)

    def env(self) -> dict:
        env = dict(os.environ)
        env.update(self.config.env)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PACKAGE_ROOT), env.get("PYTHONPATH", "")) if p)
        return env

    def runner_cmd(self, mode: str, out: Path, calls: int) -> list[str]:
        c = self.config
        cmd = [c.python, "-m", "kernelwright.profile.runner", "--problem", str(self.problem),
               "--candidate", str(self.candidate), "--mode", mode, "--out", str(out),
               "--artifacts", str(self.work), "--calls", str(calls), "--warmup", str(c.warmup),
               "--seed", str(c.seed), "--overrides", json.dumps(c.overrides), "--device", c.device]
        if mode == "timeline":
            cmd += ["--energy-seconds", str(c.energy_seconds)]
        return cmd + (["--shrink"] if c.shrink else [])


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
