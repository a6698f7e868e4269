"""timed.py: a candidate and its baselines are timed by one function, with the same arguments.

Issue 14: the reference judged as its own candidate read 1.2-2.1x slower than the same program
timed as the eager baseline, and the two were timed by separate code. The probe below runs the
judge's real stages (in one process, without the sandbox) and the baseline's real measurement,
with `timed.time_model` replaced by a recorder, and compares what each passed.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernelwright.judge import timed
from kernelwright.judge.verdict import REJECT, WARN, Flag, TimingStats

ROOT = Path(__file__).resolve().parents[2]

# hand-written tiny problems in KernelBench format whose reference is a Triton kernel (so the
# reference passes as its own candidate): forward only, and forward + backward
FORWARD = textwrap.dedent("""\
    import torch
    import torch.nn as nn
    import triton
    import triton.language as tl

    @triton.jit
    def relu_scale_kernel(x_ptr, g_ptr, out_ptr, n, scale, BACKWARD: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        if BACKWARD:
            g = tl.load(g_ptr + offs, mask=mask)
            y = tl.where(x > 0, g * scale, 0.0)
        else:
            y = tl.maximum(x, 0.0) * scale
        tl.store(out_ptr + offs, y, mask=mask)

    def launch(x, g, backward, scale):
        out = torch.empty_like(x)
        relu_scale_kernel[(triton.cdiv(x.numel(), 256),)](x, g, out, x.numel(), scale, BACKWARD=backward, BLOCK=256)
        return out

    class ReluScale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, scale):
            ctx.save_for_backward(x)
            ctx.scale = scale
            return launch(x.contiguous(), x, False, scale)

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return launch(x, grad.contiguous(), True, ctx.scale), None

    class Model(nn.Module):
        def __init__(self, scale):
            super().__init__()
            self.scale = scale

        def forward(self, x):
            return ReluScale.apply(x, self.scale)

    def get_inputs():
        return [torch.randn(16, 32)]

    def get_init_inputs():
        return [2.0]
    """)
BACKWARD = FORWARD + "\nKW_BACKWARD = True\n"

# runs in a fresh process: the judge's stages leave guards installed in the process that ran them
PROBE = textwrap.dedent("""\
    import json, sys, tempfile
    from pathlib import Path
    import torch
    from kernelwright.judge import baseline, timed, timing
    from kernelwright.judge.request import make_request
    from kernelwright.judge.config import JudgeConfig
    from kernelwright.judge.checker.main import evaluate
    from kernelwright.judge.checker.stages.context import ResultWriter

    problem, candidate = sys.argv[1], sys.argv[2]
    seen = []
    real = timed.time_model

    def recorder(call, config, device, measure, hold=None, **rest):
        seen.append({"config": config.to_dict(), "device": device, "measure": getattr(measure, "__qualname__", ""),
                     "hold": hold is not None, "refill": hasattr(call, "refill")})
        return real(call, config, device, measure, hold=hold, **rest)

    timed.time_model = recorder
    config = JudgeConfig(device="cpu", baselines=(), trials=2, energy_ms=0, warmup_ms=1.0, rep_ms=5.0, min_reps=3,
                         max_reps=20, cache_dir=tempfile.mkdtemp())
    request = make_request(problem, candidate, config, Path(tempfile.mkdtemp()))
    verdict = evaluate(request, ResultWriter(request, ""), {"timing": timing}, [])
    baseline.time_baseline(problem, {}, JudgeConfig.from_dict(request.config), "cpu", "eager")
    print(json.dumps({"status": verdict.status, "error": verdict.error, "seen": seen,
                      "note": verdict.timing.note if verdict.timing else None}))
    """)


def probe(tmp_path: Path, source: str) -> dict:
    problem = tmp_path / "tiny_problem.py"
    problem.write_text(source)
    candidate = tmp_path / "tiny_candidate.py"
    candidate.write_text(source + "\n\nclass ModelNew(Model):\n    pass\n")
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", PROBE, str(problem), str(candidate)], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("source", [FORWARD, BACKWARD], ids=["forward", "forward+backward"])
def test_candidate_and_baseline_are_timed_by_one_repeat_rule_with_the_same_arguments(tmp_path, source):
    """The candidate by the checker's timed calls (fresh inputs written before each call's clock
    starts, a sample checked), its baseline by timing.measure with the same flush-then-refill
    before each call: one repeat rule, the same parameters, the device held exclusively."""
    found = probe(tmp_path, source)
    assert found["status"] == "pass", found["error"]
    candidate, base = found["seen"]  # the time stage's call, then the baseline's
    assert candidate["config"] == base["config"]  # same timing parameters (warm-up, reps, flush, graphs)
    assert candidate["device"] == base["device"] == "cpu"
    assert candidate["measure"] == "TimedCalls.measure" and base["measure"] == "measure"
    assert base["refill"]  # the baseline's inputs are written anew before each timed call, as the candidate's
    assert candidate["hold"] and base["hold"]  # both with the device held exclusively
    note = found["note"] or ""
    assert ("repeats" in note or "noisy" in note) and "timed calls checked" in note
    assert ("forward + backward" in note) == (source is BACKWARD)


def stats(median: float, iqr: float) -> TimingStats:
    return TimingStats(median, iqr, median, median, median, 20, "wall_cpu")


def test_time_model_keeps_the_picked_repeats_flags_and_any_rejection():
    script = iter([(stats(1.0, 0.5), [Flag("noisy_timing", "info", "wide")]),
                   (stats(0.50, 0.01), [Flag("side_stream", WARN, "a")]),
                   (stats(0.52, 0.01), [Flag("side_stream", REJECT, "b")])])
    held = []

    class Hold:
        def __enter__(self):
            held.append("in")

        def __exit__(self, *exc):
            held.append("out")

    result = timed.time_model(lambda: None, None, "cpu", lambda *_: next(script), hold=Hold, sleep=lambda _: None)
    assert result.steady and result.stats.median_ms == 0.50 and len(result.repeats) == 3
    assert held == ["in", "out"] * 2  # held across repeats 1-2, released for the pause before the third
    assert sorted((f.code, f.severity) for f in result.flags) == [("side_stream", REJECT), ("side_stream", WARN)]


def test_model_call_runs_forward_without_autograd():
    import torch

    model = torch.nn.Linear(4, 4)
    out = timed.model_call(model, [torch.randn(2, 4)], None, 0)()
    assert not out.requires_grad


class RecordingHold:
    """A stand-in for the device's exclusive lock that logs when it is taken and given back."""

    def __init__(self, log: list):
        self.log = log

    def __call__(self):
        return self

    def __enter__(self):
        self.log.append("take")

    def __exit__(self, *exc):
        self.log.append("give")


def scripted(log: list, medians_iqrs):
    script = iter([stats(m, i) for m, i in medians_iqrs])

    def measure(*_):
        log.append("repeat")
        return next(script), []

    return measure


def test_a_steady_candidate_takes_the_device_once_for_its_repeats_and_its_energy():
    log: list = []
    result = timed.time_model(lambda: None, None, "cpu", scripted(log, [(1.0, 0.01), (1.02, 0.01)]),
                              hold=RecordingHold(log), sleep=log.append, then=lambda: log.append("energy"))
    assert result.steady and len(result.repeats) == 2
    assert log == ["take", "repeat", "repeat", "energy", "give"]


def test_the_device_is_given_back_for_the_pause_before_a_third_repeat_only():
    log: list = []
    rule = [(1.0, 0.5), (0.7, 0.01), (0.72, 0.01)]  # the first is too wide: a third repeat decides
    result = timed.time_model(lambda: None, None, "cpu", scripted(log, rule), hold=RecordingHold(log),
                              sleep=log.append, then=lambda: log.append("energy"))
    assert result.steady and result.stats.median_ms == 0.7
    assert log == ["take", "repeat", "repeat", "give", timed.REPEAT_PAUSE_S, "take", "repeat", "energy", "give"]


def test_a_noisy_candidate_still_gets_every_repeat_and_its_energy_in_a_hold():
    log: list = []
    rule = [(1.0, 0.01), (2.0, 0.01), (3.0, 0.01), (4.0, 0.01)]  # never agree: MAX_REPEATS, fastest kept
    result = timed.time_model(lambda: None, None, "cpu", scripted(log, rule), hold=RecordingHold(log),
                              sleep=log.append, then=lambda: log.append("energy"))
    assert not result.steady and result.stats.median_ms == 1.0 and len(result.repeats) == timed.MAX_REPEATS
    inside, depth = [], 0
    for entry in log:
        depth += {"take": 1, "give": -1}.get(entry, 0)
        if entry in ("repeat", "energy"):
            inside.append(depth == 1)
    assert all(inside) and len(inside) == timed.MAX_REPEATS + 1 and log[-1] == "give"
    assert log.count("take") == 3  # repeats 1-2, 3, 4 + energy


def test_the_device_is_given_back_when_the_candidate_raises_while_timed():
    log: list = []

    def measure(*_):
        raise RuntimeError("illegal memory access")

    with pytest.raises(RuntimeError):
        timed.time_model(lambda: None, None, "cpu", measure, hold=RecordingHold(log), then=lambda: log.append("x"))
    assert log == ["take", "give"]
