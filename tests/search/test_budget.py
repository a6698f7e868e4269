"""Budgets: calls and evaluations are hard limits, tokens, dollars and time stop new work."""
from __future__ import annotations

import pytest

from search_scripts import Script, failed, passed, problem

from kernelwright.search.asks import CompletionAsk, EvaluationAsk
from kernelwright.search.budget import Limits
from kernelwright.search.core import Engine
from kernelwright.search.settings import Settings


def engine(strategy="mcts", limits=None, **settings) -> Engine:
    values = {"drafts": 2, "parallel": 3, "iterations": 50, "generations": 10, **settings}
    return Engine(problem(), strategy, limits or Limits(), Settings(strategy=strategy, **values))


def flaky(cid, code, n):
    return failed() if n % 2 else passed(1.0 + n / 20)


def drive_checking(e: Engine, limits: Limits) -> Script:
    """Answer everything, checking after each step that asks made stay within the hard limits."""
    script = Script(flaky)
    while not e.done:
        assert e.budget.spend.calls <= (limits.max_calls or 10**9)
        assert e.budget.spend.evals <= (limits.max_evals or 10**9)
        script.run(e, steps=1)
    return script


@pytest.mark.parametrize("strategy", ["greedy", "beam", "mcts"])
def test_call_limit_is_never_exceeded_and_every_candidate_is_judged(strategy):
    limits = Limits(max_calls=9)
    e = engine(strategy, limits)
    script = drive_checking(e, limits)
    assert script.calls <= 9 and e.done and e.stop_reason.startswith("budget")
    coded = [n for n in e.tree if n.code and n.id != "c0"]
    assert coded and all(n.eval is not None for n in coded)  # calls reserved: no code left unjudged


@pytest.mark.parametrize("strategy", ["greedy", "beam", "mcts"])
def test_evaluation_limit_is_never_exceeded(strategy):
    limits = Limits(max_evals=5)
    e = engine(strategy, limits)
    script = drive_checking(e, limits)
    assert script.evals == 5
    assert "evaluation budget" in e.stop_reason


def test_token_and_dollar_limits_stop_new_work():
    e = engine("greedy", Limits(max_tokens=700))  # each scripted answer costs 150 tokens
    script = Script(flaky)
    script.run(e)
    assert 700 <= e.budget.spend.tokens < 700 + 3 * 2 * 150  # in-flight jobs may finish their path
    assert "token budget" in e.stop_reason
    e = engine("greedy", Limits(max_usd=0.004))
    Script(flaky).run(e)
    assert "dollar budget" in e.stop_reason


def test_time_limit_uses_the_elapsed_time_the_driver_tells():
    e = engine("greedy", Limits(max_minutes=0.1), parallel=1)  # 6 s; the script tells 1 s per answer
    script = Script(flaky)
    script.run(e)
    assert 6 <= e.budget.spend.elapsed_s <= 6 + 4
    assert "time budget" in e.stop_reason


def test_raising_a_limit_continues_the_search():
    e = engine("greedy", Limits(max_evals=2), parallel=1)
    script = Script(lambda *a: passed(1.5))
    script.run(e)
    assert e.done and len(e.tree) == 3
    e.set_limits(Limits(max_evals=4))
    assert not e.done and e.ask()
    script.run(e)
    assert len(e.tree) == 5 and e.budget.spend.evals == 4


def test_repairs_do_not_eat_the_calls_reserved_by_other_jobs():
    # three parallel jobs each need planner + coder; repairs may only use what is left over
    limits = Limits(max_calls=7)
    e = engine("mcts", limits, drafts=3, parallel=3, max_repairs=5)
    script = Script(lambda *a: failed())
    asked = []
    while not e.done:
        ask = e.ask()[0]
        asked.append(ask)
        e.tell(ask.id, script.answer(ask))
    coders = [a for a in asked if isinstance(a, CompletionAsk) and a.agent == "coder"]
    evaluations = [a for a in asked if isinstance(a, EvaluationAsk)]
    assert len(coders) == 3 and len(evaluations) == 4  # every draft judged, one repair fits
    assert sum(isinstance(a, CompletionAsk) for a in asked) == 7


def test_zero_budget_asks_nothing():
    e = engine("mcts", Limits(max_calls=0))
    assert e.done and e.ask() == [] and "budget" in e.stop_reason


def test_limits_reject_negative_values():
    with pytest.raises(ValueError, match="max_calls"):
        Limits(max_calls=-1)
    assert Limits(max_calls=3).merged(Limits(max_evals=2)) == Limits(max_calls=3, max_evals=2)
