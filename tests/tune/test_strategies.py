"""Search strategies on a synthetic objective, measured through the same tuning loop as real runs."""
import math

import pytest

from kernelwright.tune.evaluate import TableEvaluator
from kernelwright.tune.hardware import H100_SXM
from kernelwright.tune.prune import prune_space
from kernelwright.tune.strategies import TUNE_STRATEGIES, make_tune_strategy
from kernelwright.tune.template import config_key, parse_template
from kernelwright.tune.tuner import tune

# hand-written test template over two numeric parameters and one categorical
SOURCE = '''
KW_TUNE = {
    "params": {"X": {"pow2": [1, 128]}, "Y": {"range": [0, 7]}, "Z": ["a", "b"]},
    "constraints": ["X * (Y + 1) <= 512"],
    "defaults": {"X": 1, "Y": 0, "Z": "a"},
}
KW_PARAMS = dict(KW_TUNE["defaults"])
def use():
    return KW_PARAMS
'''


def objective(c):
    """A smooth bowl with its minimum 1.0 at X=32, Y=3, Z='b'; Y == 7 'fails to compile'."""
    if c["Y"] == 7:
        return None
    return 1.0 + (math.log2(c["X"]) - 5) ** 2 + 0.5 * (c["Y"] - 3) ** 2 + (0.0 if c["Z"] == "b" else 0.3)


@pytest.fixture(scope="module")
def setup():
    template = parse_template(SOURCE)
    report = prune_space(template, H100_SXM)
    table = {}
    for c in report.feasible:
        value = objective(c)
        table[config_key(c)] = {"status": "pass" if value is not None else "fail", "time_ms": value,
                                "error": None if value is not None else "synthetic failure"}
    return template, report, table


def test_space_is_pruned_by_the_constraint(setup):
    template, report, _ = setup
    assert all(c["X"] * (c["Y"] + 1) <= 512 for c in report.feasible)
    assert len(report.pruned) > 0 and report.total == template.space_size


@pytest.mark.parametrize("strategy", TUNE_STRATEGIES)
def test_budget_is_respected_with_distinct_feasible_configs(setup, strategy):
    template, report, table = setup
    evaluator = TableEvaluator(table)
    result = tune(template, evaluator, strategy=strategy, budget=12, prune=report, seed=1)
    keys = [config_key(t.params) for t in result.trials]
    assert len(keys) == 12 == evaluator.lookups
    assert len(set(keys)) == 12
    assert set(keys) <= set(table)


@pytest.mark.parametrize("strategy", ["exhaustive", "random"])
def test_full_budget_finds_the_optimum(setup, strategy):
    template, report, table = setup
    result = tune(template, TableEvaluator(table), strategy=strategy, prune=report, seed=3)
    assert len(result.trials) == len(report.feasible)
    assert result.best.params == {"X": 32, "Y": 3, "Z": "b"}
    curve = result.best_so_far()
    assert curve[-1] == 1.0 and all(a is None or b <= a for a, b in zip(curve, curve[1:], strict=False))


@pytest.mark.parametrize("strategy", ["tpe", "cmaes", "gp"])
def test_model_based_strategies_find_the_optimum_within_half_the_space(setup, strategy):
    template, report, table = setup
    budget = len(report.feasible) // 2
    found = []
    for seed in range(3):
        result = tune(template, TableEvaluator(table), strategy=strategy, budget=budget, prune=report, seed=seed)
        found.append(result.best.measurement.time_ms)
    assert min(found) == 1.0  # the optimum itself, for at least one seed
    assert max(found) <= 1.5  # and close to it for every seed


def test_failures_are_told_and_never_best(setup):
    template, report, table = setup
    result = tune(template, TableEvaluator(table), strategy="tpe", budget=20, prune=report, seed=0)
    assert all(t.params["Y"] != 7 for t in result.trials if t.measurement.ok)
    assert result.best.params["Y"] != 7


def test_seeded_first_configs_run_first(setup):
    template, report, table = setup
    first = [{"X": 32, "Y": 3, "Z": "b"}]
    result = tune(template, TableEvaluator(table), strategy="random", budget=3, prune=report, first=first)
    assert result.trials[0].params == first[0] and len({config_key(t.params) for t in result.trials}) == 3


def test_batches_of_asks(setup):
    template, report, table = setup
    result = tune(template, TableEvaluator(table), strategy="tpe", budget=10, prune=report, batch=4)
    assert len(result.trials) == 10


def test_unknown_strategy_is_a_clear_error(setup):
    _, report, _ = setup
    with pytest.raises(ValueError, match="unknown strategy"):
        make_tune_strategy("annealing", report.feasible, {"X": (1,)})


def test_auto_strategy_is_exhaustive_only_when_the_budget_covers_the_space(setup):
    template, report, table = setup
    full = tune(template, TableEvaluator(table), strategy="auto", prune=report)
    part = tune(template, TableEvaluator(table), strategy="auto", budget=10, prune=report)
    assert full.strategy == "exhaustive" and len(full.trials) == len(report.feasible)
    assert part.strategy == "tpe" and len(part.trials) == 10


def test_stop_ends_the_loop_between_evaluations(setup):
    template, report, table = setup
    told = []

    def stop():
        return len(told) >= 3

    result = tune(template, TableEvaluator(table), strategy="random", budget=10, prune=report, seed=0,
                  on_result=lambda trial: told.append(trial), stop=stop)
    assert len(result.trials) == 3 and len(told) == 3
    assert len(tune(template, TableEvaluator(table), strategy="random", budget=10, prune=report,
                    stop=lambda: True).trials) == 0
