"""The tuning step with sweeps (tune_sweep > 1) and seeds, driven through the pure engine (issue 33).

Nothing here is model output or a measurement: the Templatizer's answer is the hand-written
template of test_tuning.py, every verdict an EvalResult the test makes up and every sweep record a
judge.sweep.SweepResult it writes, with times that depend on the instance's parameters
(`instance_ms`); a sweep's time is made 10% lower than the full verdict's, so the test can tell
which one a node records.
"""
from __future__ import annotations

import json

import pytest

from search_scripts import completion, plan_text, code_text
from test_tuning import FEASIBLE, GOOD, instance_ms, make, timed, wrong

from kernelwright.judge.sweep import FAILED, NOT_RUN, OK, ConfigResult, SweepResult
from kernelwright.search.asks import (CompletionAsk, EvaluationAsk, SeedsAsk, SweepAsk, ask_from_dict,
                                      result_from_dict, result_to_dict)
from kernelwright.search.results import SeedsResult, SweepOutcome

SWEEP_FACTOR = 0.9  # a sweep's one repeat reads 10% faster than the full judgement (made up)


def sweep_of(ask: SweepAsk, fail=lambda params: False, unrun=()) -> SweepOutcome:
    """A made-up sweep record: each instance timed by `instance_ms`, those `fail` picks failed on
    their trial, the indices in `unrun` never reached."""
    configs = []
    for index, item in enumerate(ask.instances):
        if index in unrun:
            configs.append(ConfigResult(index, dict(item.params), NOT_RUN, reason="the runner died earlier"))
        elif fail(item.params):
            configs.append(ConfigResult(index, dict(item.params), FAILED, reason="trial 0: output differs"))
        else:
            configs.append(ConfigResult(index, dict(item.params), OK, time_ms=instance_ms(item.source) * SWEEP_FACTOR,
                                        calls=5, checked=5))
    record = SweepResult(configs=configs, method="wall_cpu", ended_early="the runner died" if unrun else "")
    return SweepOutcome(record, device="cpu", device_s=1.5, judge_s=4.0)


class Answers:
    """Planner, Coder, Templatizer, seeds, sweeps and evaluations, answered in order."""

    def __init__(self, judge=None, sweep=None, seeds=()):
        self.judge = judge or (lambda ask: timed(instance_ms(ask.code)))
        self.sweep = sweep or sweep_of
        self.seeds = list(seeds)
        self.log: list[tuple[str, object]] = []

    def answer(self, ask):
        if isinstance(ask, SweepAsk):
            result = self.sweep(ask)
        elif isinstance(ask, SeedsAsk):
            result = SeedsResult([dict(c) for c in self.seeds])
        elif isinstance(ask, EvaluationAsk):
            result = self.judge(ask)
        elif ask.agent == "planner":
            result = completion(plan_text("one pass relu"))
        elif ask.agent == "coder":
            result = completion(code_text(128))
        else:
            assert ask.agent == "templatizer", ask
            result = completion(GOOD)
        self.log.append((ask.id, result))
        return result

    def run(self, engine, pick=lambda asks: asks[0]) -> list:
        asked = []
        while not engine.done:
            ask = pick(engine.ask())
            asked.append(ask)
            engine.tell(ask.id, self.answer(ask))
        return asked


def kind(ask) -> str:
    if isinstance(ask, CompletionAsk):
        return ask.agent
    return ask.kind if isinstance(ask, (SweepAsk, SeedsAsk)) else "eval"


def tune_nodes(engine) -> list:
    return [n for n in engine.tree if n.action == "tune"]


def test_each_batch_is_one_sweep_then_its_winner_judged_in_full():
    engine = make(tune_sweep=4, tune_evals=6)
    asked = Answers().run(engine)
    kinds = [kind(a) for a in asked]
    # the default instance alone, then per batch one sweep and one full judgement of its fastest;
    # the last evaluation left judges one configuration alone
    assert kinds == ["planner", "coder", "eval", "templatizer", "eval", "sweep", "eval", "sweep", "eval", "eval"]
    sweeps = [a for a in asked if isinstance(a, SweepAsk)]
    assert [len(s.instances) for s in sweeps] == [4, 4] and all(s.of == "c1" for s in sweeps)
    assert all(i.source == engine.tree["c1"].code or "KW_PARAMS = {" in i.source for s in sweeps for i in s.instances)
    for sweep in sweeps:  # the winner is the sweep's fastest instance, judged as a candidate of its own
        fastest = min(sweep.instances, key=lambda i: instance_ms(i.source))
        [winner] = [n for n in tune_nodes(engine) if n.tuning.get("sweep", {}).get("ask") == sweep.id]
        assert winner.code == fastest.source and winner.tuning["params"] == fastest.params
        assert winner.eval.median_ms == pytest.approx(instance_ms(fastest.source))  # the full verdict's time
        assert winner.tuning["sweep"]["time_ms"] == pytest.approx(instance_ms(fastest.source) * SWEEP_FACTOR)
    params = [dict(i.params) for s in sweeps for i in s.instances] + [n.tuning["params"] for n in tune_nodes(engine)]
    assert len({json.dumps(p, sort_keys=True) for p in params}) == 10  # 1 + 4 + 4 + 1 configurations, none twice
    assert len(tune_nodes(engine)) == 4  # only fully judged instances are nodes: default, two winners, one alone
    record = engine.tree["c1"].tuning
    assert record["cost"]["evaluations"] == 6 and engine.budget.spend.evals == 7
    assert record["cost"]["device_s"] == 4 * 0.5 + 2 * 1.5  # the instances' verdicts and the sweeps
    assert [s["configs"] for s in record["sweeps"]] == [4, 4] and record["budget"] == 12  # TuneBudget(6, 4)
    assert record["outcome"].startswith("tuned: 10 configuration(s) measured (8 in 2 sweep(s)")
    best = engine.tree[record["best"]]
    assert engine.best() is best and best.tuning.get("sweep")  # a sweep's winner, adopted on its full verdict


def test_the_templatizer_is_told_the_sweeps_and_what_the_budget_buys():
    engine = make(tune_sweep=4, tune_evals=6)
    asked = Answers().run(engine)
    [templatizer] = [a for a in asked if kind(a) == "templatizer"]
    text = templatizer.request.messages[-1].content
    assert "the tuner measures configurations in sweeps" in text and "up to 4 instances" in text
    assert "The budget is 6 evaluations: about 12 configurations" in text


def test_an_instance_that_fails_its_sweep_trial_is_skipped_and_never_judged():
    failing = lambda params: params["BLOCK"] == 1024  # noqa: E731 -- the fastest, if it counted
    engine = make(tune_sweep=20, tune_evals=3)  # default, one sweep of the other 13, its winner
    asked = Answers(sweep=lambda ask: sweep_of(ask, fail=failing)).run(engine)
    [sweep] = [a for a in asked if isinstance(a, SweepAsk)]
    assert len(sweep.instances) == FEASIBLE - 1
    assert all(n.tuning["params"]["BLOCK"] != 1024 for n in tune_nodes(engine))
    [winner] = [n for n in tune_nodes(engine) if n.tuning.get("sweep")]
    assert winner.tuning["params"] == {"BLOCK": 512, "num_warps": 1}  # the fastest that passed its trial
    assert engine.tree["c1"].tuning["sweeps"][0] == {"ask": sweep.id, "configs": FEASIBLE - 1,
                                                      "timed": FEASIBLE - 1 - 3, "skipped": 3, "ended_early": ""}
    assert engine.tree["c1"].tuning["strategy"] == "exhaustive"  # TuneBudget(3, 20) covers the space


def test_a_winner_that_fails_its_full_judgement_hands_over_to_the_runner_up():
    def judge(ask):  # the sweep's fastest (BLOCK=1024, one warp) is wrong when judged in full
        return wrong() if "KW_PARAMS = {'BLOCK': 1024, 'num_warps': 1}" in ask.code else timed(instance_ms(ask.code))

    engine = make(tune_sweep=20, tune_evals=4)
    Answers(judge=judge).run(engine)
    finalists = [n for n in tune_nodes(engine) if n.tuning.get("sweep")]
    assert [n.tuning["params"] for n in finalists] == [{"BLOCK": 1024, "num_warps": 1}, {"BLOCK": 1024, "num_warps": 2}]
    assert finalists[0].status == "fail" and finalists[1].status == "pass"
    assert engine.tree["c1"].tuning["best"] == finalists[1].id


def test_configurations_a_dying_runner_never_reached_go_into_the_next_sweep_once():
    calls = []

    def sweep(ask):
        calls.append([dict(i.params) for i in ask.instances])
        return sweep_of(ask, unrun={2, 3} if len(calls) == 1 else set())

    engine = make(tune_sweep=4, tune_evals=6)
    Answers(sweep=sweep).run(engine)
    assert len(calls) == 2 and calls[1][:2] == calls[0][2:]  # sent again first, before new ones


def test_seeds_are_asked_when_the_template_arrives_and_measured_right_after_the_defaults():
    seeds = [{"BLOCK": 512, "num_warps": 2}, {"BLOCK": 4096, "num_warps": 1}]  # the second is outside the domain
    engine = make(tune_sweep=4, tune_evals=6, tune_seeds=True)
    asked = Answers(seeds=seeds).run(engine)
    kinds = [kind(a) for a in asked]
    assert kinds[3:6] == ["templatizer", "seeds", "eval"]
    [ask] = [a for a in asked if isinstance(a, SeedsAsk)]
    assert "KW_TUNE" in ask.template and ask.device == "cpu" and ask.limit == 3  # a quarter of 12 configurations
    first = next(a for a in asked if isinstance(a, SweepAsk))
    assert first.instances[0].params == {"BLOCK": 512, "num_warps": 2}
    assert first.instances[1].params == {"BLOCK": 128, "num_warps": 1}  # moved into the space: BLOCK's default
    assert first.template == ask.template and first.device == "cpu"  # the driver records the sweep as seeds
    judged = [a for a in asked if isinstance(a, EvaluationAsk) and a.job_id == "tune1"]
    assert judged and all(a.seed is not None and a.seed.template == ask.template and a.seed.device == "cpu"
                          and "KW_PARAMS = " + repr(a.seed.params) in a.code for a in judged)  # full verdicts too
    assert engine.tree["c1"].tuning["seeds"] == [{"BLOCK": 512, "num_warps": 2}, {"BLOCK": 128, "num_warps": 1}]


def stored(result):
    return result_from_dict(json.loads(json.dumps(result_to_dict(result))))


def test_sweep_and_seeds_asks_and_results_round_trip_through_the_log():
    engine = make(tune_sweep=4, tune_evals=6, tune_seeds=True)
    answers = Answers(seeds=[{"BLOCK": 512, "num_warps": 2}])
    asked = answers.run(engine)
    for ask in asked:
        assert ask_from_dict(json.loads(json.dumps(ask.to_dict()))).to_dict() == ask.to_dict()
    for _, result in answers.log:
        assert result_to_dict(stored(result)) == result_to_dict(result)


@pytest.mark.parametrize("cut", [4, 5, 6, 8, 10])
def test_a_resumed_run_asks_the_same_configurations(cut):
    """What a resume does, seeds and sweeps included: a fresh engine told the stored results asks
    the open ones again, the same ids and instances, although the seed cache would now answer
    otherwise (the seeds are a stored result, never read again)."""
    original = make(seed=3, tune_sweep=4, tune_evals=6, tune_seeds=True)
    answers = Answers(seeds=[{"BLOCK": 512, "num_warps": 2}])
    snapshots = []
    while not original.done:
        snapshots.append([a.to_dict() for a in original.ask()])
        ask = original.ask()[0]
        original.tell(ask.id, answers.answer(ask))
    replayed = make(seed=3, tune_sweep=4, tune_evals=6, tune_seeds=True)
    for ask_id, result in answers.log[:cut]:
        replayed.tell(ask_id, stored(result))
    assert [a.to_dict() for a in replayed.ask()] == snapshots[cut]
    for ask_id, result in answers.log[cut:]:
        replayed.tell(ask_id, stored(result))
    assert replayed.done
    assert [n.to_dict() for n in replayed.tree] == [n.to_dict() for n in original.tree]
    assert replayed.snapshot() == original.snapshot()


def test_a_sweep_in_flight_beside_its_predecessors_winner():
    engine = make(tune_sweep=4, tune_evals=6)
    answers = Answers()
    seen = []
    while not engine.done:
        asks = engine.ask()
        seen.append(sorted(kind(a) for a in asks if a.job_id.startswith("tune")))
        engine.tell(asks[0].id, answers.answer(asks[0]))
    assert ["eval", "sweep"] in seen  # the second sweep is judged while the first one's winner is
    assert all(k.count("sweep") <= 1 for k in seen)  # one sweep at a time
