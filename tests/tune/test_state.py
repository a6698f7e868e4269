"""TunerState: the tuning loop as ask/tell, deterministic, with tune()'s budget and `first` rules."""
from __future__ import annotations

import pytest

from kernelwright.tune.evaluate import Measurement
from kernelwright.tune.hardware import H100_SXM
from kernelwright.tune.state import TunerState
from kernelwright.tune.template import config_key, parse_template

SOURCE = '''import torch.nn as nn

KW_TUNE = {
    "params": {"BLOCK": [64, 128, 256, 512, 1024], "num_warps": [1, 2, 4, 8]},
    "constraints": ["BLOCK >= num_warps * WARP_SIZE"],
    "defaults": {"BLOCK": 128, "num_warps": 4},
}
KW_PARAMS = dict(KW_TUNE["defaults"])


class ModelNew(nn.Module):
    def forward(self, x):
        return x * KW_PARAMS["BLOCK"]
'''
TEMPLATE = parse_template(SOURCE)


def ms(config) -> float:  # a made-up landscape: best at BLOCK 512, 2 warps
    return abs(config["BLOCK"] - 512) / 100 + abs(config["num_warps"] - 2) + 1.0


def drive(state: TunerState, batch: int = 1) -> list[dict]:
    asked = []
    while configs := state.ask(batch):
        asked += configs
        for config in configs:
            state.tell(config, Measurement(config, "pass", time_ms=ms(config)))
    return asked


def make(**kw) -> TunerState:
    return TunerState(TEMPLATE, limits=H100_SXM, **{"first": [TEMPLATE.defaults], **kw})


def test_the_defaults_come_first_then_the_strategy_within_the_budget():
    state = make(strategy="tpe", budget=6, seed=3)
    asked = drive(state)
    assert asked[0] == TEMPLATE.defaults and len(asked) == 6 and len({config_key(c) for c in asked}) == 6
    assert all(c["BLOCK"] >= c["num_warps"] * 32 for c in asked)  # only feasible configurations
    assert state.done and state.strategy == "tpe" and state.result().best.measurement.time_ms == min(map(ms, asked))


def test_the_same_seed_and_tells_give_the_same_asks_and_another_seed_other_ones():
    runs = [drive(make(strategy="tpe", budget=8, seed=s), batch=b) for s, b in [(1, 1), (1, 1), (2, 1), (1, 3)]]
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]
    assert runs[3][0] == TEMPLATE.defaults and len(runs[3]) == 8


def test_auto_is_exhaustive_when_the_budget_covers_the_feasible_space():
    state = make(strategy="auto", budget=100)
    asked = drive(state)
    assert state.strategy == "exhaustive" and len(asked) == len(state.prune.feasible) == state.budget
    assert len(state.prune.pruned) == 20 - len(asked)


def test_a_pruned_default_is_reported_and_never_asked():
    state = TunerState(TEMPLATE, limits=H100_SXM, strategy="exhaustive", budget=4, first=[{"BLOCK": 64, "num_warps": 4}])
    assert "BLOCK >= num_warps * WARP_SIZE" in state.pruned_reason({"BLOCK": 64, "num_warps": 4})
    assert state.pruned_reason(TEMPLATE.defaults) is None
    assert {"BLOCK": 64, "num_warps": 4} not in drive(state)


def test_failures_and_post_compile_prunes_are_told_as_no_value():
    state = make(strategy="exhaustive", budget=3)
    first, = state.ask()
    state.tell(first, Measurement(first, "pruned", error="kernel spills registers (12)"))
    second, = state.ask()
    state.tell(second, Measurement(second, "fail", error="wrong"))
    assert state.result().best is None and state.prune.after_compile[0].reason.startswith("kernel spills")
    with pytest.raises(ValueError, match="was not asked"):
        state.tell(first, Measurement(first, "pass", time_ms=1.0))


def test_outstanding_configurations_count_against_the_budget():
    state = make(strategy="random", budget=3)
    assert len(state.ask(5)) == 3 and state.ask(1) == [] and not state.done
