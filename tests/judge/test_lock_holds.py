"""How a passing candidate's evaluation takes the device lock (issue 14, judge throughput).

Every taking of the exclusive lock waits for every other worker's shared section to end, and the
seconds held exclusively are device time no other judge can use. The probe runs the judge's real
stages in one process (no sandbox) on the CPU with a lock that logs each taking, a timing module
whose measurement, energy meter and energy window log whether the lock is held, and a kernel-times
pass that logs the same; then checks the order the stages now promise:

- the timing repeats and the energy window in ONE exclusive hold (the meter opened before it,
  the runner's record of the timed calls read after it);
- all trials in one shared hold (per-trial holds were slower on the H100);
- `verdict.device_lock` counting the holds.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROBE = textwrap.dedent("""\
    import contextlib, json, sys, tempfile
    from pathlib import Path
    from kernelwright.judge import gpulock, timing
    from kernelwright.judge.request import make_request
    from kernelwright.judge.checker import link, timed_calls
    from kernelwright.judge.checker.main import evaluate
    from kernelwright.judge.checker.stages import time as time_stage
    from kernelwright.judge.checker.stages.context import ResultWriter
    from kernelwright.judge.config import JudgeConfig
    from kernelwright.judge.verdict import TimingStats

    log, held = [], []

    class Lock:
        waited_s = 0.0
        key, folder = "cpu", Path(tempfile.mkdtemp())

        @contextlib.contextmanager
        def _hold(self, kind):
            assert not held, f"{kind} asked for while {held} is held"  # not re-entrant across kinds
            held.append(kind)
            log.append(["take", kind])
            try:
                yield
            finally:
                held.pop()
                log.append(["give", kind])

        def shared(self):
            return self._hold("shared")

        def exclusive(self):
            return self._hold("exclusive")

    def state():
        return held[-1] if held else "none"

    def measure(self, _call=None, config=None, device=None):
        self.one(check=True)  # a real timed call, checked
        log.append(["repeat", state()])
        return TimingStats(0.1, 0.001, 0.1, 0.1, 0.1, 20, "wall_cpu"), []

    def open_energy_meter(ctx, timing_module, device):
        log.append(["open meter", state()])
        return "the meter"

    def measure_energy(ctx, runner_link, device, meter):
        log.append(["energy", state(), meter])
        return {"method": "nvml-energy", "joules": 0.5, "seconds": 0.2, "calls": 100, "avg_watts": 2.5,
                "samples": 10, "note": "", "power_joules": 0.5, "joules_per_call": 0.005, "available": True}

    real_report = link.RunnerLink.report

    def report(self):
        log.append(["report", state()])
        return real_report(self)

    gpulock.lock_for = lambda device, cache_dir=None: Lock()
    timed_calls.TimedCalls.measure = measure
    time_stage.open_energy_meter, time_stage.measure_energy = open_energy_meter, measure_energy
    link.RunnerLink.report = report
    config = JudgeConfig(device="cpu", baselines=(), trials=3, cache_dir=tempfile.mkdtemp(),
                         overrides={"batch_size": 2, "dim": 64})
    request = make_request(Path(sys.argv[1]), Path(sys.argv[2]), config, Path(tempfile.mkdtemp()))
    verdict = evaluate(request, ResultWriter(request, ""), {"timing": timing}, [])
    print(json.dumps({"status": verdict.status, "error": verdict.error, "log": log, "trials": len(verdict.trials),
                      "device_lock": verdict.device_lock, "energy": verdict.energy}))
    """)


def run_probe(tmp_path: Path, kernelbench: Path) -> dict:
    problem = kernelbench / "level1" / "19_ReLU.py"
    candidate = ROOT / "bench" / "candidates" / "19_ReLU__triton.py"
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", PROBE, str(problem), str(candidate)], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def holds(log: list, kind: str) -> list[list]:
    """What happened inside each hold of `kind`, in order."""
    found, current = [], None
    for entry in log:
        if entry == ["take", kind]:
            current = []
        elif entry == ["give", kind]:
            found.append(current)
            current = None
        elif current is not None:
            current.append(entry[0])
    return found


def test_a_passing_candidate_takes_the_device_exclusively_once_and_the_trials_shared_once(tmp_path, kernelbench):
    found = run_probe(tmp_path, kernelbench)
    assert found["status"] == "pass", found["error"]
    log = found["log"]
    # the timing repeats (each a real timed call), then the energy window: one hold
    assert holds(log, "exclusive") == [["repeat", "repeat", "energy"]]
    assert ["open meter", "none"] in log and ["energy", "exclusive", "the meter"] in log
    assert ["report", "none"] in log  # the runner's record of the timed calls, read after the hold
    # the reference, ModelNew's construction, the trials (the first with the output-cache refill)
    assert len(holds(log, "shared")) == 1 + 1 + 1 and found["trials"] == 3
    lock = found["device_lock"]
    assert lock["exclusive"]["holds"] == 1 and lock["shared"]["holds"] == 3
    assert lock["exclusive"]["held_s"] >= 0 and set(lock["shared"]) == {"holds", "held_s"}
    # the energy record is the meter's, fields unchanged
    assert found["energy"]["joules_per_call"] == 0.005 and found["energy"]["method"] == "nvml-energy"


@pytest.mark.gpu
def test_on_the_gpu_a_passing_triton_candidate_holds_the_device_exclusively_once(tmp_path, kernelbench):
    """The real judge (sandboxed worker, real lock, NVML, torch.profiler): energy and kernel times
    still measured, with one exclusive hold where the repeats agree at once."""
    from kernelwright.judge import JudgeConfig, judge

    config = JudgeConfig(trials=3, baselines=(), overrides={"batch_size": 16}, cache_dir=str(tmp_path))
    verdict = judge(kernelbench / "level1" / "19_ReLU.py", ROOT / "bench" / "candidates" / "19_ReLU__triton.py",
                    config)
    assert verdict.status == "pass", verdict.error
    assert verdict.energy["available"] and verdict.energy["joules_per_call"] > 0, verdict.energy
    assert verdict.kernels["available"] and verdict.kernels["kernels"], verdict.kernels
    taken, note = verdict.device_lock["exclusive"]["holds"], verdict.timing.note
    if "agreeing repeats of 2" in note:
        assert taken == 1, note
    else:  # the device is given back for the pause before each later repeat
        assert taken in (2, 3), (taken, note)
    assert verdict.device_lock["shared"]["holds"] == 1 + 1 + 1
