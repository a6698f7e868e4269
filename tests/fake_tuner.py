"""A stand-in for the template tuner (`tune.autopilot.optimize_without_llm`) that behaves as the real
one does where the autotune driver is concerned: it asks `stop()` before each instance, replays
through the run's cache (stored instances come back as cache hits) and proposes instances that
depend on its budget (auto picks exhaustive or TPE by the budget, so another --max-evals proposes
other instances). No judge runs: each instance it "judges" gets a hand-written passing verdict."""
from __future__ import annotations

import random
import threading

from kernelwright.tune import autopilot
from kernelwright.tune.evaluate import Measurement

BLOCKS = [16, 32, 64, 128, 256, 512, 1024, 2048]
TIME_MS = {16: 9.0, 32: 8.0, 64: 2.0, 128: 1.0, 256: 6.0, 512: 5.0, 1024: 4.0, 2048: 3.0}
BASELINE_MS = 0.5


def verdict(ms: float) -> dict:
    return {"status": "pass", "stage": "done", "device": "cpu", "rules": "kernelbench",
            "timing": {"median_ms": ms, "iqr_ms": 0.0, "mean_ms": ms, "min_ms": ms, "max_ms": ms, "n": 3,
                       "method": "wall_cpu"},
            "speedup": {"eager": BASELINE_MS / ms}}


class FakeTuner:
    """`optimize_without_llm` replaying through the run's cache; which instances it proposes
    depends on its budget, as the real auto strategy's do. `hold`: an event each judged instance
    waits for (at most `hold_s` seconds), so a test decides how long judging takes."""

    hold: threading.Event | None = None
    hold_s = 60.0

    def __init__(self):
        self.judged: list[int] = []  # BLOCK of every instance judged (not answered by the cache)

    def __call__(self, problem_path, *, budget_evals, on_result, stop, cache, **kwargs):
        order = list(BLOCKS)
        random.Random(budget_evals).shuffle(order)
        for index, block in enumerate(order[:budget_evals]):
            if stop():
                break
            params = {"BLOCK": block}
            hit = cache.get("template-hash", params, "cpu", {"n": 64})
            if hit is None:
                self.judged.append(block)
                if self.hold is not None:
                    self.hold.wait(self.hold_s)
                measurement = Measurement(params, "pass", time_ms=TIME_MS[block], method="wall_cpu",
                                          verdict=verdict(TIME_MS[block]))
                cache.put("template-hash", params, "cpu", {"n": 64}, measurement.to_dict())
            else:
                measurement = Measurement.from_dict(hit)
                measurement.cached = True
            on_result(autopilot.AutopilotStep(index, params, f"# instance BLOCK={block}\n", measurement, "pointwise"))
        return autopilot.AutopilotResult("relu_x2", True, "template pointwise: judged", "pointwise")
