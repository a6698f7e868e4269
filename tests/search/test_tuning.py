"""The tuning step inside the search, driven through the pure engine with hand-written answers.

Nothing here is model output: the Templatizer's answers are templates written for the tests
(the relu kernel of search_scripts with BLOCK and num_warps exposed), and every verdict is an
EvalResult the test makes up, with a time that depends on the instance's BLOCK so the tuner has
something to find.
"""
from __future__ import annotations

import ast
import json
import re

import pytest

from search_scripts import KERNEL, code_text, completion, plan_text, problem

from kernelwright.search.asks import CompletionAsk, EvaluationAsk, result_from_dict, result_to_dict
from kernelwright.search.budget import Limits
from kernelwright.search.core import Engine
from kernelwright.search.results import EvalResult
from kernelwright.search.settings import ADDED_LATER, Settings

TEMPLATE = KERNEL.replace('''relu_kernel[(triton.cdiv(x.numel(), {block}),)](x, out, x.numel(), BLOCK={block})''',
                          '''relu_kernel[(triton.cdiv(x.numel(), KW_PARAMS["BLOCK"]),)](
            x, out, x.numel(), BLOCK=KW_PARAMS["BLOCK"], num_warps=KW_PARAMS["num_warps"])''')
TEMPLATE = TEMPLATE.replace("\n\n@triton.jit", '''

KW_TUNE = {
    "params": {"BLOCK": [64, 128, 256, 512, 1024], "num_warps": [1, 2, 4]},
    "constraints": ["BLOCK >= num_warps * WARP_SIZE"],
    "defaults": {"BLOCK": 128, "num_warps": 4},
}
KW_PARAMS = dict(KW_TUNE["defaults"])


@triton.jit''', 1)
assert "KW_PARAMS[\"BLOCK\"]" in TEMPLATE and "KW_TUNE" in TEMPLATE
GOOD = f"The kernel as a template.\n\n```python\n{TEMPLATE}```\n"
FEASIBLE = 14  # 15 configurations, one of them (BLOCK=64, 4 warps) with BLOCK < num_warps * 32


def timed(ms: float, reference_ms: float = 1.0) -> EvalResult:
    return EvalResult(status="pass", stage="done", outcome="faster" if ms < reference_ms else "slower",
                      speedup={"eager": reference_ms / ms}, median_ms=ms, baseline_ms={"eager": reference_ms},
                      trials_passed=2, trials_total=2, device="cpu", device_s=0.5, judge_s=2.0)


def wrong() -> EvalResult:
    return EvalResult(status="fail", stage="check", outcome="wrong", error="trial 1 failed: max abs error 0.5",
                      trials_passed=0, trials_total=2, device="cpu", device_s=0.1, judge_s=1.0)


def instance_ms(code: str) -> float:
    """The made-up time of a template instance: faster with larger blocks and fewer warps; the
    candidate itself (BLOCK=128, 4 warps, no KW_PARAMS) takes 0.8 ms, its default instance 0.84."""
    params = re.search(r"^KW_PARAMS = (\{.*?\})", code, re.M)
    if params is None:
        return 0.8
    values = ast.literal_eval(params.group(1))
    return 0.8 * 128 / values["BLOCK"] + 0.01 * values["num_warps"]


class Answers:
    """Planner, Coder and Templatizer answers in order; evaluations from `judge`."""

    def __init__(self, templatizer=(GOOD,), judge=None, codes=None):
        self.templatizer = list(templatizer)
        self.codes = list(codes or [code_text(128)])  # the Coder's answers in turn, the last one repeated
        self.judge = judge or (lambda ask: timed(instance_ms(ask.code)))
        self.log: list[tuple[str, object]] = []

    def answer(self, ask):
        if isinstance(ask, EvaluationAsk):
            result = self.judge(ask)
        elif ask.agent == "planner":
            result = completion(plan_text("one pass relu"))
        elif ask.agent == "coder":
            result = completion(self.codes.pop(0) if len(self.codes) > 1 else self.codes[0])
        elif ask.agent == "templatizer":
            result = completion(self.templatizer.pop(0) if len(self.templatizer) > 1 else self.templatizer[0])
        else:
            raise AssertionError(f"unexpected ask {ask}")
        self.log.append((ask.id, result))
        return result

    def run(self, engine: Engine, steps: int = 10_000) -> list:
        asked = []
        while not engine.done and steps:
            ask = engine.ask()[0]
            asked.append(ask)
            engine.tell(ask.id, self.answer(ask))
            steps -= 1
        return asked


def make(limits=None, seed=0, **settings) -> Engine:
    # one configuration per evaluation and no seed cache: the tuning step as before sweeps (test_tuning_sweeps.py)
    values = {"drafts": 1, "parallel": 1, "iterations": 1, "max_repairs": 0, "tune_evals": 6, "tune_sweep": 1,
              "tune_seeds": False, **settings}
    return Engine(problem(), values.pop("strategy", "greedy"), limits or Limits(),
                  Settings(strategy=settings.get("strategy", "greedy"), **values), rng_seed=seed)


def instances(engine: Engine) -> list:
    return [n for n in engine.tree if n.action == "tune"]


def test_a_new_best_is_templatized_checked_tuned_and_its_fastest_instance_adopted():
    engine = make()
    asked = Answers().run(engine)
    kinds = [a.agent if isinstance(a, CompletionAsk) else "eval" for a in asked]
    assert kinds == ["planner", "coder", "eval", "templatizer"] + ["eval"] * 6
    templatize = asked[3]
    text = templatize.request.messages[-1].content
    assert "BLOCK=128" in text and "KW_TUNE" in text  # the candidate's code and the format
    assert "at most 6 configurations" in text  # the tuning budget
    default = asked[4]
    assert "KW_PARAMS = {'BLOCK': 128, 'num_warps': 4}" in default.code
    judged = instances(engine)
    assert len(judged) == 6 and len({n.code for n in judged}) == 6
    assert all(n.parent_id == "c1" and n.tuning["of"] == "c1" for n in judged)
    adopted = [n for n in judged if n.search_parent is not None]
    assert len(adopted) == 1 and adopted[0].search_parent == "c1"
    best = adopted[0]
    assert engine.best() is best and best.speedup() > engine.tree["c1"].speedup()
    others = [n for n in judged if n is not best]
    assert all(n.search_parent is None for n in others)
    assert best.tuned.startswith("parameters tuned:") and "BLOCK=" in best.tuned
    original = engine.tree["c1"]
    assert original.tuned.startswith("parameters tuned: BLOCK in {64, 128, 256, 512, 1024}")
    record = original.tuning
    assert record["best"] == best.id and record["feasible"] == FEASIBLE and record["strategy"] == "tpe"
    assert record["cost"] == {"evaluations": 6, "templatizer_calls": 1, "device_s": 3.0, "judge_s": 12.0,
                              "device_label": "CPU-seconds", "pruned_before": 1, "pruned_after": 0}
    assert engine.snapshot()["tuning"] == {"jobs": 1, "active": 0, "calls": 1, "evals": 6, "device_s": 3.0,
                                           "judge_s": 12.0, "device_label": "CPU-seconds", "adopted": [best.id]}
    assert engine.budget.spend.evals == 7 and engine.budget.spend.calls == 3
    [entry] = [e for e in engine.trajectory.entries if e.action == "tune"]
    assert entry.outcome == "faster" and entry.candidate_id == best.id and entry.approach_key == "parameter tuning of c1"


def test_every_instance_is_a_configuration_the_constraints_allow():
    engine = make(tune_evals=FEASIBLE + 3)
    Answers().run(engine)
    judged = [n.tuning["params"] for n in instances(engine)]
    assert len(judged) == FEASIBLE  # exhaustive: the budget covers the space
    assert all(p["BLOCK"] >= p["num_warps"] * 32 for p in judged)
    assert engine.tree["c1"].tuning["strategy"] == "exhaustive"


def test_the_tuning_share_of_the_evaluation_budget_is_kept():
    engine = make(limits=Limits(max_evals=10), tune_share=0.5, tune_evals=8)
    Answers().run(engine)
    assert len(instances(engine)) == 5 and engine.snapshot()["tuning"]["evals"] == 5
    assert engine.budget.spend.evals == 6


def test_results_told_together_tune_their_fastest_and_expansions_leave_the_share_to_it():
    # three drafts judged in one batch, the fastest told last: the tuning starts on it once the
    # whole batch is heard, and it reserves its evaluations before improvements are started, so a
    # 6-evaluation run spends 3 on drafts and its tune_share (3) on tuning, none given away
    def judge(ask):
        params = re.search(r"^KW_PARAMS = ", ask.code, re.M)
        return timed(instance_ms(ask.code) if params else {"c1": 0.9, "c2": 0.85, "c3": 0.8}[ask.candidate_id])

    engine = make(limits=Limits(max_evals=6), drafts=3, parallel=3, iterations=3, plan=False, tune_share=0.5,
                  tune_evals=3, tune_batch=2)
    answers = Answers(judge=judge, codes=[code_text(128), code_text(256), code_text(512)])
    rounds = []
    while not engine.done:
        asks = engine.ask()
        rounds.append(sorted(a.agent if isinstance(a, CompletionAsk) else f"eval {a.candidate_id}" for a in asks))
        engine.tell_many([(a.id, answers.answer(a)) for a in asks])
    assert rounds[:3] == [["coder"] * 3, ["eval c1", "eval c2", "eval c3"], ["templatizer"]]
    assert engine.tree["c3"].tuning["job"] == "tune1" and not engine.tree["c1"].tuning
    assert [n.tuning["of"] for n in instances(engine)] == ["c3"] * 3
    assert engine.snapshot()["tuning"]["evals"] == 3 and engine.budget.spend.evals == 6


def test_no_tuning_when_the_share_leaves_less_than_two_evaluations():
    engine = make(limits=Limits(max_evals=10), tune_share=0.1)
    asked = Answers().run(engine)
    assert not any(getattr(a, "agent", "") == "templatizer" for a in asked) and not instances(engine)


def test_the_setting_turns_it_off_and_runs_stored_before_it_keep_it_off():
    engine = make(tune=False)
    asked = Answers().run(engine)
    assert len(asked) == 3 and engine.done and not engine.tree["c1"].tuning
    stored_before = {k: v for k, v in Settings().to_dict().items() if not k.startswith("tune")}
    assert Settings.from_stored(stored_before).tune is False
    assert Settings.from_stored({**stored_before, "tune": True}).tune is True
    assert set(ADDED_LATER) <= set(Settings().to_dict())


def test_an_unusable_template_is_asked_again_then_the_job_ends_cleanly():
    engine = make(parse_retries=1)
    asked = Answers(templatizer=["no code here", "still none"]).run(engine)
    templatizer = [a for a in asked if getattr(a, "agent", "") == "templatizer"]
    assert len(templatizer) == 2
    retry = templatizer[1].request.messages
    assert retry[-2].content == "no code here" and "KW_TUNE" in retry[-1].content  # the parser's feedback
    assert engine.done and not instances(engine)
    record = engine.tree["c1"].tuning
    assert record["outcome"].startswith("not tuned: the Templatizer's answer was unusable")
    assert record["cost"]["templatizer_calls"] == 2 and record["cost"]["evaluations"] == 0
    [entry] = [e for e in engine.trajectory.entries if e.action == "tune"]
    assert entry.outcome == "rejected" and entry.candidate_id == "tune1"
    assert engine.best().id == "c1" and engine.tree["c1"].tuned == ""


def test_constraints_that_exclude_the_defaults_are_refused():
    bad = GOOD.replace('"BLOCK >= num_warps * WARP_SIZE"', '"BLOCK >= 256"')
    engine = make(parse_retries=0)
    Answers(templatizer=[bad]).run(engine)
    assert "exclude its own defaults" in engine.tree["c1"].tuning["outcome"] and not instances(engine)


def test_a_default_instance_that_fails_gets_the_templatizer_asked_again_with_the_judges_report():
    calls = {"n": 0}

    def judge(ask):
        if "KW_PARAMS = {" in ask.code:
            calls["n"] += 1
            if calls["n"] == 1:
                return wrong()  # the first template's default instance
        return timed(instance_ms(ask.code))

    engine = make(parse_retries=1)
    asked = Answers(judge=judge).run(engine)
    templatizer = [a for a in asked if getattr(a, "agent", "") == "templatizer"]
    assert len(templatizer) == 2
    second = templatizer[1].request.messages[-1].content
    assert "did not behave like the original" in second and "does not reproduce c1" in second
    judged = instances(engine)
    assert judged[0].status == "fail" and judged[0].search_parent is None
    assert engine.tree["c1"].tuning["default_instance"] == judged[1].id  # the second template's
    assert engine.tree["c1"].tuning["cost"]["evaluations"] == 6


def test_a_default_instance_much_slower_than_the_candidate_does_not_reproduce_it():
    def judge(ask):
        return timed(5.0) if "KW_PARAMS = {" in ask.code else timed(0.8)

    engine = make(parse_retries=0)
    Answers(judge=judge).run(engine)
    record = engine.tree["c1"].tuning
    assert "passes but takes 5 ms against 0.8 ms" in record["outcome"] and record["best"] is None
    assert len(instances(engine)) == 1


def test_no_instance_faster_than_the_candidate_adopts_nothing_and_says_so():
    engine = make()
    Answers(judge=lambda ask: timed(0.8 if "KW_PARAMS = {'BLOCK': 128, 'num_warps': 4}" in ask.code
                                    or "KW_PARAMS" not in ask.code else 1.6)).run(engine)
    assert all(n.search_parent is None for n in instances(engine))
    assert "None was faster than this candidate's own values" in engine.tree["c1"].tuned
    [entry] = [e for e in engine.trajectory.entries if e.action == "tune"]
    assert entry.outcome == "slower"


def test_planners_see_the_tuning_in_progress_then_its_result():
    """Tuning runs beside the search: a planner asked meanwhile reads it under "In progress"; one
    asked after it (here the tuning's asks are answered first) reads "parameters tuned"."""
    engine = make(iterations=3)
    answers, asked = Answers(), []
    while not engine.done:
        ask = min(engine.ask(), key=lambda a: not a.job_id.startswith("tune"))
        asked.append(ask)
        engine.tell(ask.id, answers.answer(ask))
    planners = [a.request.messages[-1].content for a in asked if getattr(a, "agent", "") == "planner"]
    assert len(planners) == 3
    assert "`parameter tuning of c1`: c1 is being made a template" in planners[1]  # asked with the Templatizer
    assert "Parameters tuned:" not in planners[1]
    last = planners[2]
    adopted = engine.tree["c1"].tuning["best"]
    assert f"# Candidate to improve (`{adopted}`)" in last  # greedy expands the tuned child, the best so far
    assert "Parameters tuned: this is the fastest of 6 judged configurations of c1's" in last
    assert "changing them by hand is no" in last
    assert f"`parameter tuning of c1` ({adopted}): worked" in last  # the "Already tried" digest


def test_top_k_also_tunes_a_candidate_that_is_not_the_best():
    speeds = iter([0.5, 0.9])  # c1 fast, the second draft slower but second best

    def judge(ask):
        return timed(next(speeds)) if "KW_PARAMS" not in ask.code else timed(5.0)

    for top, tuned in [(1, {"c1"}), (2, {"c1", "c3"})]:
        speeds = iter([0.5, 0.9])
        engine = make(drafts=2, iterations=2, tune_top=top, parse_retries=0)
        Answers(judge=judge, codes=(code_text(128), code_text(256))).run(engine)  # two different drafts
        assert {n.id for n in engine.tree if n.tuning.get("job") and n.action != "tune"} == tuned, top


def test_mcts_backs_up_the_adopted_instance():
    engine = make(strategy="mcts", iterations=1)
    Answers().run(engine)
    adopted = engine.tree[engine.tree["c1"].tuning["best"]]
    assert adopted.visits == 1 and engine.tree["c1"].visits == 2 and engine.tree["c0"].visits == 2


def stored(result):
    return result_from_dict(json.loads(json.dumps(result_to_dict(result))))


@pytest.mark.parametrize("cut", [4, 5, 7, 9])
def test_a_run_replayed_from_its_log_mid_tuning_asks_exactly_what_was_outstanding(cut):
    """What a resume does: a fresh engine told the stored results asks the open ones again, the
    same ids and the same code (the tuner's proposals included), and nothing already answered."""
    original = make(seed=5, iterations=2)
    answers = Answers()
    snapshots = []
    while not original.done:
        snapshots.append([a.to_dict() for a in original.ask()])
        ask = original.ask()[0]
        original.tell(ask.id, answers.answer(ask))
    replayed = make(seed=5, iterations=2)
    for ask_id, result in answers.log[:cut]:
        replayed.tell(ask_id, stored(result))
    assert [a.to_dict() for a in replayed.ask()] == snapshots[cut]
    for ask_id, result in answers.log[cut:]:
        replayed.tell(ask_id, stored(result))
    assert replayed.done
    assert [n.to_dict() for n in replayed.tree] == [n.to_dict() for n in original.tree]
    assert replayed.snapshot() == original.snapshot()


@pytest.mark.parametrize("batch", [1, 3])
def test_the_default_instance_goes_alone_then_tune_batch_instances_at_once(batch):
    engine = make(tune_batch=batch, tune_evals=6)
    answers = Answers()
    in_flight = []
    while not engine.done:
        tuning = [a for a in engine.ask() if isinstance(a, EvaluationAsk) and a.job_id.startswith("tune")]
        in_flight.append(len(tuning))
        ask = engine.ask()[0]
        engine.tell(ask.id, answers.answer(ask))
    assert max(in_flight) == batch and len(instances(engine)) == 6
    first = in_flight.index(1)
    assert in_flight[first + 1] == min(batch, 5)  # after the default instance: a batch at once


def test_an_instance_the_compiler_says_spills_is_pruned_and_never_adopted():
    """Resource pruning after compiling, as the judge evaluator does it: the verdict's compiler
    report (hand-written here) says the BLOCK=1024 instances spill, so the fastest of them is
    skipped and the best instance that fits is adopted."""
    def judge(ask):
        result = timed(instance_ms(ask.code))
        if "'BLOCK': 1024" in ask.code:
            result.median_ms, result.speedup = 0.01, {"eager": 100.0}  # fastest, if it counted
            result.resources = [{"name": "relu_kernel", "registers": 255, "spills": 48, "shared_bytes": 0,
                                 "threads": 128}]
        return result

    engine = make(tune_evals=FEASIBLE + 1)  # exhaustive: every configuration is judged
    Answers(judge=judge).run(engine)
    spilled = [n for n in instances(engine) if n.tuning["params"]["BLOCK"] == 1024]
    assert spilled and all(n.status == "skipped" and "spills registers" in n.reason for n in spilled)
    adopted = engine.tree[engine.tree["c1"].tuning["best"]]
    assert adopted.tuning["params"]["BLOCK"] == 512 and engine.best() is adopted
    assert engine.tree["c1"].tuning["cost"]["pruned_after"] == len(spilled)
