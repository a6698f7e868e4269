"""gpulock: correctness work overlaps, timing does not, and a waiting timer is not starved.

Each holder is a separate process (flock locks belong to open files, as in the judge's workers)
that appends "<name> start|end <time>" to a log; the tests read the intervals back.
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from kernelwright.judge.gpulock import DeviceLock, device_key, lock_for

REPO = Path(__file__).resolve().parents[3]
HOLDER = """
import sys, time
from kernelwright.judge.gpulock import DeviceLock
folder, kind, name, hold, log = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5]
lock = DeviceLock(sys.argv[6] if len(sys.argv) > 6 else "gpu-test", folder)
with getattr(lock, kind)():
    with open(log, "a") as fh:
        fh.write(f"{name} start {time.time()}\\n")
    time.sleep(hold)
    with open(log, "a") as fh:
        fh.write(f"{name} end {time.time()}\\n")
"""


def _start(tmp_path, kind, name, hold, key="gpu-test"):
    return subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "locks"), kind, name, str(hold),
                             str(tmp_path / "log"), key], env={"PYTHONPATH": str(REPO)})


def _intervals(tmp_path) -> dict[str, tuple[float, float]]:
    spans: dict[str, list[float]] = {}
    for line in (tmp_path / "log").read_text().splitlines():
        name, _, when = line.split()
        spans.setdefault(name, []).append(float(when))
    return {name: (times[0], times[1]) for name, times in spans.items()}


def _overlap(a, b) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def test_shared_holders_overlap_and_an_exclusive_one_runs_alone(tmp_path):
    procs = [_start(tmp_path, "shared", "check1", 0.8), _start(tmp_path, "shared", "check2", 0.8)]
    time.sleep(0.3)
    procs.append(_start(tmp_path, "exclusive", "timing", 0.4))
    for proc in procs:
        assert proc.wait(timeout=30) == 0
    spans = _intervals(tmp_path)
    assert _overlap(spans["check1"], spans["check2"])  # correctness needs no exclusivity
    assert not _overlap(spans["timing"], spans["check1"]) and not _overlap(spans["timing"], spans["check2"])


def test_a_waiting_timer_is_not_starved_by_later_readers(tmp_path):
    first = _start(tmp_path, "shared", "early_check", 0.8)
    time.sleep(0.3)
    timer = _start(tmp_path, "exclusive", "timing", 0.3)
    time.sleep(0.3)  # the timer now waits for early_check, holding the turnstile
    late = _start(tmp_path, "shared", "late_check", 0.2)
    for proc in (first, timer, late):
        assert proc.wait(timeout=30) == 0
    spans = _intervals(tmp_path)
    assert spans["timing"][0] >= spans["early_check"][1]
    assert spans["late_check"][0] >= spans["timing"][1]  # it waited behind the timer


def test_the_wait_for_the_lock_is_measured(tmp_path):
    holder = _start(tmp_path, "exclusive", "holder", 0.8)
    while not (tmp_path / "log").exists():  # until the holder has the lock
        time.sleep(0.02)
    lock = DeviceLock("gpu-test", tmp_path / "locks")
    with lock.shared():
        got_it = time.time()
    assert holder.wait(timeout=30) == 0
    assert got_it >= _intervals(tmp_path)["holder"][1]
    assert lock.waited_s > 0.3


def test_cpu_key_and_lock_folder_under_the_cache(tmp_path):
    assert device_key("cpu") == "cpu"
    lock = lock_for("cpu", tmp_path)
    assert isinstance(lock, DeviceLock) and lock.folder == tmp_path / "locks"


def test_each_gpu_has_its_own_lock_so_two_gpus_time_at_once(tmp_path, monkeypatch):
    """Several GPUs: the key names the physical GPU (its UUID), so timings on GPU 0 and GPU 1 hold
    different locks and run at once, while two timings on one GPU still take turns."""
    import types

    import torch

    props = {0: types.SimpleNamespace(uuid="aaaa-0"), 1: types.SimpleNamespace(uuid="bbbb-1")}
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: props[index])
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert device_key("cuda:0") == "gpu-aaaa-0" and device_key("cuda:1") == "gpu-bbbb-1" and device_key("cuda") == "gpu-aaaa-0"
    procs = [_start(tmp_path, "exclusive", "gpu0", 1.5, "gpu-aaaa-0"), _start(tmp_path, "exclusive", "gpu1", 1.5, "gpu-bbbb-1"),
             _start(tmp_path, "exclusive", "gpu0again", 1.5, "gpu-aaaa-0")]
    for proc in procs:
        proc.wait(30)
    spans = _intervals(tmp_path)
    assert _overlap(spans["gpu1"], spans["gpu0"]) or _overlap(spans["gpu1"], spans["gpu0again"])
    assert not _overlap(spans["gpu0"], spans["gpu0again"])
