"""What a budget of judge evaluations measures: the arithmetic the autopilot, the CLI and the
Templatizer's prompt share (tune/budget.py)."""
from kernelwright.tune.budget import SPACE_PER_CONFIGURATION, TuneBudget, sweep_budget


def test_a_sweep_and_its_winners_judgement_are_two_evaluations():
    assert sweep_budget(None, 16) is None
    assert sweep_budget(6, 16) == 48 and sweep_budget(7, 16) == 49  # an odd evaluation judges one more
    assert sweep_budget(5, 0) == 5 and sweep_budget(5, 1) == 5  # no sweep: one configuration each


def test_the_budget_says_how_many_configurations_and_how_large_a_space():
    plan = TuneBudget(evaluations=4, sweep=10)
    assert plan.sweeping and plan.configurations == 20 and plan.space == 20 * SPACE_PER_CONFIGURATION
    single = TuneBudget(evaluations=3)
    assert not single.sweeping and single.configurations == 3
    assert TuneBudget(evaluations=0, sweep=8).configurations == 0 and TuneBudget(0).space == 1
