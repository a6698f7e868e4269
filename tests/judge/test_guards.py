"""Hack guards, one by one, in-process (the end-to-end versions are in test_verdicts.py)."""
from __future__ import annotations

import subprocess
import sys
import time

import torch

from kernelwright.judge import guards
from kernelwright.judge.verdict import REJECT, WARN


def test_snapshot_sees_replaced_timers_and_restores_them():
    snapshot = guards.IdentitySnapshot.take(guards.guarded_targets())
    original_perf, original_elapsed = time.perf_counter, torch.cuda.Event.elapsed_time
    try:
        time.perf_counter = lambda: 0.0
        torch.cuda.Event.elapsed_time = lambda self, end: 0.001
        changed = snapshot.changes()
        assert {"time.perf_counter", "torch.cuda.Event.elapsed_time"} <= set(changed)
        snapshot.restore(changed)
        assert time.perf_counter is original_perf and torch.cuda.Event.elapsed_time is original_elapsed
        assert snapshot.changes() == []
    finally:
        time.perf_counter, torch.cuda.Event.elapsed_time = original_perf, original_elapsed


def test_snapshot_sees_methods_added_to_tensor_and_removes_them():
    snapshot = guards.IdentitySnapshot.take(guards.guarded_targets())
    try:
        torch.Tensor.kw_sneaky = lambda self: True
        assert "torch.Tensor.kw_sneaky" in snapshot.changes()
        snapshot.restore(["torch.Tensor.kw_sneaky"])
        assert not hasattr(torch.Tensor, "kw_sneaky")
    finally:
        if hasattr(torch.Tensor, "kw_sneaky"):
            del torch.Tensor.kw_sneaky


def test_snapshot_is_quiet_when_nothing_changed():
    snapshot = guards.IdentitySnapshot.take(guards.guarded_targets())
    torch.relu(torch.randn(4)) + 1  # ordinary torch use must not look like tampering
    assert snapshot.changes() == []


def test_precision_flag_on_tf32_switch():
    guards.set_full_precision(False)
    before = guards.precision_state()
    try:
        torch.backends.cuda.matmul.allow_tf32 = True
        flag = guards.precision_flag(before, guards.precision_state(), allow_tf32=False)
        assert flag is not None and flag.severity == REJECT and "allow_tf32" in flag.message
        assert guards.precision_flag(before, guards.precision_state(), allow_tf32=True).severity == WARN
    finally:
        guards.set_full_precision(False)
    assert guards.precision_flag(before, guards.precision_state(), allow_tf32=False) is None


def test_dynamo_flag_follows_the_frame_counter():
    from torch._dynamo.utils import counters

    before = guards.dynamo_frames()
    assert guards.dynamo_flag(before) is None
    counters["frames"]["total"] += 1
    try:
        flag = guards.dynamo_flag(before)
        assert flag is not None and flag.code == "torch_op" and flag.severity == REJECT
        assert flag.check == "dynamo_use"
    finally:
        counters["frames"]["total"] -= 1


def test_compile_tracker_counts_torch_compile_by_any_name():
    tracker = guards.CompileTracker().install()
    try:
        compiled = getattr(torch, "com" + "pile")(lambda x: x + 1, backend="eager")
        assert "torch.compile" in tracker.calls and callable(compiled)
        flag = guards.dynamo_flag(guards.dynamo_frames(), tracker.calls)
        assert flag is not None and "torch.compile" in flag.message
    finally:
        tracker.uninstall()
    assert not hasattr(torch.compile, "__wrapped__")


def test_malloc_perturb_poisons_fresh_cpu_allocations():
    """In a child process (perturbation is process-wide): torch.empty then holds poison bytes."""
    code = ("import torch; from kernelwright.judge import guards, check\n"
            "assert guards.enable_malloc_perturb()\n"
            "guards.poison_allocator('cpu', [4096 * 4])\n"
            "print(check.poisoned_count(torch.empty(4096)), check.poisoned_count(torch.empty(1 << 20)))")
    env = {k: v for k, v in __import__("os").environ.items() if k != "MALLOC_PERTURB_"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["4096", str(1 << 20)]


def test_flag_messages_name_the_problem():
    assert "0" in guards.mutation_flag([0]).message and guards.mutation_flag([0]).code == "input_mutation"
    assert guards.output_cache_flag("stale").code == "output_cache"
    assert "3 output elements" in guards.uninitialized_flag(3).message
    assert "time.perf_counter" in guards.monkeypatch_flag(["time.perf_counter"], "during a trial").message
