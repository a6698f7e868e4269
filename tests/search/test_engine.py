"""The engine's job state machine: planner -> coder -> evaluation -> repairs, told by scripts."""
from __future__ import annotations

import pytest

from kernelwright.llm.types import Message
from search_scripts import (Script, code_text, completion, fail_always, failed, judge_failure, passed,
                            plan_text, problem)

from kernelwright.search.asks import CompletionAsk, EvaluationAsk
from kernelwright.search.budget import Limits
from kernelwright.search.core import Engine, EngineError
from kernelwright.search.results import AskFailure
from kernelwright.search.settings import Settings


def engine(strategy="greedy", limits=None, **settings) -> Engine:
    values = {"drafts": 1, "parallel": 1, "iterations": 3, "tune": False, **settings}  # tuning: test_tuning.py
    return Engine(problem(), strategy, limits or Limits(), Settings(strategy=strategy, **values))


def test_first_asks_are_planner_prompts_for_drafts():
    e = engine(drafts=2, parallel=2)
    asks = e.ask()
    # planners of one node are asked one at a time, so the second sees the first's plan
    assert [(type(a), a.agent) for a in asks] == [(CompletionAsk, "planner")]
    assert asks[0].request.role == "planner"
    assert "relu" in asks[0].request.messages[-1].content
    assert e.ask() == asks  # asking again changes nothing


def test_one_expansion_goes_planner_coder_evaluation():
    e = engine(iterations=1)
    plan = e.ask()[0]
    e.tell(plan.id, completion('```json\n{"steps": [{"region": "ModelNew.forward", "change": "one relu kernel"}],'
                               ' "approach": "one pass relu"}\n```'))
    code = e.ask()[0]
    assert code.agent == "coder"
    assert "one relu kernel" in code.request.messages[-1].content  # the plan reaches the Coder
    e.tell(code.id, completion(code_text(128)))
    evaluation = e.ask()[0]
    assert isinstance(evaluation, EvaluationAsk) and "BLOCK=128" in evaluation.code
    e.tell(evaluation.id, passed(1.5))
    assert e.done
    best = e.best()
    assert best.id == evaluation.candidate_id and best.speedup() == 1.5 and best.action == "draft"
    assert [entry.outcome for entry in e.trajectory.entries] == ["faster"]


def test_failed_candidate_gets_up_to_k_repairs_in_a_chain():
    e = engine(iterations=1, max_repairs=2)
    Script(fail_always).run(e)
    nodes = [n for n in e.tree if n.id != "c0"]
    assert [n.action for n in nodes] == ["draft", "repair", "repair"]
    assert [n.parent_id for n in nodes] == ["c0", nodes[0].id, nodes[1].id]  # each fixes the last
    assert all(n.search_parent == "c0" for n in nodes)  # all one expansion of the reference
    assert e.best() is None and e.done


def test_a_successful_repair_stops_the_chain():
    e = engine(iterations=1, max_repairs=3)
    script = Script(lambda cid, code, n: failed() if n == 1 else passed(2.0))
    script.run(e)
    assert [n.action for n in e.tree][1:] == ["draft", "repair"]
    assert e.best().action == "repair" and e.best().parent_id == "c1"
    assert [x.outcome for x in e.trajectory.entries] == ["wrong", "faster"]


def test_repairer_prompt_holds_the_failure_and_the_code():
    e = engine(iterations=1, max_repairs=1)
    asked = []
    script = Script(lambda cid, code, n: failed("output differs in 12 of 64 elements") if n == 1 else passed(1.1))
    while not e.done:
        ask = e.ask()[0]
        asked.append(ask)
        e.tell(ask.id, script.answer(ask))
    repair = next(a for a in asked if isinstance(a, CompletionAsk) and a.agent == "repairer")
    text = repair.request.messages[-1].content
    assert "output differs in 12 of 64 elements" in text and "relu_kernel" in text


def test_unusable_code_is_asked_again_with_the_parsers_feedback_then_recorded_invalid():
    e = engine(iterations=1, parse_retries=1, max_repairs=0)
    e.tell(e.ask()[0].id, completion(Script(fail_always).answer(e.ask()[0]).text))  # the plan
    first = e.ask()[0]
    e.tell(first.id, completion("I would write a kernel but here is no code."))
    retry = e.ask()[0]
    assert retry.agent == "coder" and retry.id != first.id
    assert retry.request.messages[-2] == Message("assistant", "I would write a kernel but here is no code.")
    assert retry.request.messages[-1].role == "user"  # the parser's feedback
    e.tell(retry.id, completion("still no code"))
    assert e.done
    node = e.tree["c1"]
    assert node.status == "invalid" and node.code is None and "no usable code" in node.reason
    assert e.trajectory.entries[-1].outcome == "rejected"


def test_a_failed_llm_call_ends_the_job_without_a_candidate():
    e = engine(iterations=1)
    e.tell(e.ask()[0].id, AskFailure("ProviderUnavailable", "503 after 5 retries"))
    assert e.done and len(e.tree) == 1


def test_a_judge_failure_is_not_repaired():
    e = engine(iterations=1, max_repairs=2)
    script = Script(lambda *a: judge_failure())
    script.run(e)
    assert [n.status for n in e.tree][1:] == ["fail"]
    assert "could not start" in e.tree["c1"].reason


def test_budget_exceeded_from_the_llm_layer_stops_new_jobs():
    e = engine(iterations=5, drafts=1)
    e.tell(e.ask()[0].id, AskFailure("BudgetExceeded", "dollars would be exceeded"))
    assert e.done and "LLM budget" in e.stop_reason


def test_telling_an_unknown_ask_is_an_error():
    e = engine()
    with pytest.raises(EngineError, match="not outstanding"):
        e.tell("a99", completion("x"))
    ask = e.ask()[0]
    e.tell(ask.id, completion(Script(fail_always).answer(ask).text))
    with pytest.raises(EngineError):
        e.tell(ask.id, completion("twice"))


def test_a_result_of_the_wrong_kind_is_an_error_and_changes_nothing():
    # e.g. a run replayed by a version whose asks differ: a completion stored for what is now an
    # evaluation ask must stop the replay with a clear error, not reach the evaluation's handler
    e = engine()
    ask = e.ask()[0]
    with pytest.raises(EngineError, match="asked for a completion; it cannot take a EvalResult"):
        e.tell(ask.id, passed(1.2))
    assert [a.id for a in e.ask()] == [ask.id]
    script = Script(lambda *a: passed(1.2))
    while not isinstance(e.ask()[0], EvaluationAsk):
        e.tell(e.ask()[0].id, script.answer(e.ask()[0]))
    evaluation = e.ask()[0]
    with pytest.raises(EngineError, match="asked for an evaluation; it cannot take a Completion"):
        e.tell(evaluation.id, completion("not a verdict"))
    e.tell(evaluation.id, passed(1.2))  # the right kind is still taken
    assert e.tree[evaluation.candidate_id].status == "pass"


def test_analyst_diagnosis_reaches_the_next_planner():
    e = engine(iterations=2, analyst=True)
    asked = []
    script = Script(lambda *a: passed(1.2))
    while not e.done:
        ask = e.ask()[0]
        asked.append(ask)
        e.tell(ask.id, script.answer(ask))
    agents = [a.agent for a in asked if isinstance(a, CompletionAsk)]
    assert agents == ["planner", "coder", "analyst", "planner", "coder"]  # drafts need no diagnosis
    second_plan = [a for a in asked if getattr(a, "agent", "") == "planner"][1]
    assert "launch overhead and bandwidth" in second_plan.request.messages[-1].content
    assert e.tree["c1"].bottleneck == "memory"


def test_parallel_planners_see_what_the_others_are_trying():
    e = engine(drafts=2, parallel=2, iterations=2)
    first = e.ask()[0]
    e.tell(first.id, completion(Script(fail_always).answer(first).text))
    planners = [a for a in e.ask() if a.agent == "planner"]
    assert len(planners) == 1  # the second draft's planner, asked only now
    assert "idea number" in planners[0].request.messages[-1].content  # the in-progress line


def test_skills_come_from_the_ranker_once_per_expansion():
    seen = []

    class Skill:
        name, title, body = ("test-skill", "A test skill",
                             "## When\nalways\n## Steps\n1. hand-written step\n## Pitfalls\n- hand-written pitfall")

    def rank(query, limit):
        seen.append((query, limit))
        return [Skill()]

    e = Engine(problem(), "greedy", Limits(), Settings(strategy="greedy", drafts=1, skills_k=2, iterations=1),
               skills=rank)
    planner = e.ask()[0]
    assert "hand-written step" in planner.request.messages[-1].content
    query, limit = seen[0]
    assert "relu" in query.text and query.op_kinds == ("elementwise",) and query.backend == "triton" and limit == 2
    e.tell(planner.id, completion(plan_text("one pass")))
    coder = e.ask()[0]
    # a Coder with a plan reads the Pitfalls of the planner's skills its plan does not cite
    assert coder.agent == "coder" and "hand-written pitfall" in coder.request.messages[-1].content
    assert len(seen) == 1  # the Coder reads the planner's ranking, not a new one


def test_temperature_setting_overrides_the_agents():
    e = engine(temperature=0.0)
    assert e.ask()[0].request.temperature == 0.0


def test_the_engine_and_strategies_import_no_io_layer():
    import subprocess
    import sys

    code = ("import sys, kernelwright.search.core, kernelwright.search.strategies\n"
            "print(sorted(m for m in ('rich', 'typer', 'sqlite3', 'kernelwright.store', 'kernelwright.judge')"
            " if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_plan_for_a_known_dead_end_is_sent_back_once():
    e = engine(iterations=3, drafts=1, max_repairs=0, parse_retries=1)
    same_idea = "```json\n" + '{"steps": [{"region": "ModelNew.forward", "change": "vectorize loads"}],' \
                ' "approach": "vectorize the loads"}' + "\n```"
    asked = []
    while not e.done:
        ask = e.ask()[0]
        asked.append(ask)
        if isinstance(ask, EvaluationAsk):
            e.tell(ask.id, failed())
        elif ask.agent == "planner":
            e.tell(ask.id, completion(same_idea))
        else:
            e.tell(ask.id, completion(code_text(64 * len(asked))))  # new code each time: judged each time
    planners = [a for a in asked if isinstance(a, CompletionAsk) and a.agent == "planner"]
    # jobs 1 and 2 try the idea and fail twice: a dead end; job 3's planner is told so and asked
    # again, and its second answer (the same idea) is let through
    assert "DEAD END" in e.trajectory.digest()
    assert len(planners) == 4
    assert "dead end" in planners[3].request.messages[-1].content
    assert planners[3].request.messages[-2].role == "assistant"
    assert [len(p.request.messages) for p in planners] == [2, 2, 2, 4]  # only the last is a re-ask
    assert planners[3].request.metadata["retry_of_parse_failure"]  # made by Agent.retry_request


def test_eval_result_condenses_a_verdict_with_its_profile():
    from kernelwright.judge.verdict import CompileResult, Flag, TrialResult, Verdict
    from kernelwright.search.results import EvalResult

    # hand-written verdicts (no judge ran): one failed at compile, one wrong, one correct and profiled
    broken = Verdict(problem="p", candidate="c1", status="fail", stage="compile",
                     compile=CompileResult(ok=False, errors=["c1.py:12: error: expected ';'"]))
    result = EvalResult.from_verdict(broken)
    assert result.outcome == "compile_error" and "expected ';'" in result.error and not result.passed
    wrong = Verdict(problem="p", candidate="c2", status="fail", stage="check",
                    trials=[TrialResult(0, 42, "signed", False, max_abs_err=0.5, message="differs")],
                    flags=[Flag("output_cache", "reject", "returned the previous call's tensor")])
    result = EvalResult.from_verdict(wrong)
    assert result.outcome == "rejected" and "max_abs_err=0.5" in result.error and "output_cache" in result.error
    fast = Verdict(problem="p", candidate="c3", status="pass", stage="done", speedup={"eager": 1.7},
                   trials=[TrialResult(0, 42, "given", True)],
                   profile={"bottleneck": "memory", "findings": [{"text": "DRAM at 91% of peak", "tags": ["vectorized-access"]}]})
    result = EvalResult.from_verdict(fast)
    assert (result.outcome, result.bottleneck, result.trials_passed) == ("faster", "memory", 1)
    assert result.findings == ["DRAM at 91% of peak [vectorized-access]"]
    assert result.summary() == "correct (1/1 trials), 1.70x vs eager"


@pytest.mark.parametrize("rules", ["kernelbench", "strict"])
def test_prompts_state_the_rule_set_of_the_run(rules):
    from dataclasses import replace

    e = Engine(replace(problem(), rules=rules), "greedy", Limits(), Settings(strategy="greedy", drafts=1, parallel=1))
    system = e.ask()[0].request.messages[0].content
    assert f"Rule set: `{rules}`" in system


def _two_first_versions(e):
    """Answer the engine until both first versions wait for the judge; returns their evaluation asks."""
    script = Script(fail_always)
    while True:
        asks = e.ask()
        if len(asks) == 2 and all(isinstance(a, EvaluationAsk) for a in asks):
            return asks
        completion_ask = next(a for a in asks if isinstance(a, CompletionAsk))
        e.tell(completion_ask.id, script.answer(completion_ask))


def test_results_told_together_are_all_heard_before_the_next_prompt():
    e = engine(strategy="greedy", drafts=2, parallel=2, iterations=4)
    first, second = _two_first_versions(e)
    e.tell_many([(first.id, passed(1.62)), (second.id, passed(2.15))])
    planners = [a for a in e.ask() if isinstance(a, CompletionAsk) and a.agent == "planner"]
    text = planners[0].request.messages[-1].content
    assert f"Candidate to improve (`{second.candidate_id}`)" in text  # not the stale 1.62x one
    stale = engine(strategy="greedy", drafts=2, parallel=2, iterations=4)
    first, second = _two_first_versions(stale)
    stale.tell(first.id, passed(1.62))  # told one at a time, the next prompt is written in between
    text = next(a for a in stale.ask() if isinstance(a, CompletionAsk)).request.messages[-1].content
    assert f"Candidate to improve (`{first.candidate_id}`)" in text


def test_planners_of_different_nodes_are_asked_one_at_a_time():
    e = engine(strategy="greedy", drafts=2, parallel=2, iterations=6)
    first, second = _two_first_versions(e)
    e.tell_many([(first.id, passed(1.5)), (second.id, passed(1.4))])
    planners = [a for a in e.ask() if isinstance(a, CompletionAsk) and a.agent == "planner"]
    assert len(planners) == 1  # the other job's planner waits for this one's plan
    e.tell(planners[0].id, completion(plan_text("retune the block size")))
    nxt = [a for a in e.ask() if isinstance(a, CompletionAsk) and a.agent == "planner"]
    assert len(nxt) == 1 and "`retune the block size`" in nxt[0].request.messages[-1].content
    assert "## In progress" in nxt[0].request.messages[-1].content
    coder = next(a for a in e.ask() if isinstance(a, CompletionAsk) and a.agent == "coder")
    assert "choose a different one" not in coder.request.messages[-1].content


def test_an_improvement_is_never_a_dead_end_even_below_eager():
    e = engine(iterations=2, drafts=1, max_repairs=0)
    speeds = iter([0.43, 0.40])
    Script(lambda *a: passed(next(speeds))).run(e)
    outcomes = [(x.approach_key, x.outcome) for x in e.trajectory.entries]
    assert outcomes[0][1] == "faster"  # the first correct version: a gain, though slower than eager
    assert outcomes[1][1] == "slower"  # no gain over the node it improved
    assert outcomes[0][0] not in e.trajectory.dead_ends() and outcomes[1][0] in e.trajectory.dead_ends()


def test_evaluations_ask_for_profiles_on_a_gpu_target_within_the_budget():
    from kernelwright.judge.target import known_target

    e = Engine(problem(), "greedy", Limits(), Settings(strategy="greedy", drafts=1, iterations=3, profile_evals=1),
               target=known_target("h100"))
    flags = []
    script = Script(lambda *a: passed(1.2))
    while not e.done:
        ask = e.ask()[0]
        if isinstance(ask, EvaluationAsk):
            flags.append(ask.profile)
            assert ask.to_dict().get("profile", False) == ask.profile
        e.tell(ask.id, script.answer(ask))
    assert flags == [True, False, False]  # one passing profiled candidate per run here
    cpu = engine(iterations=1)
    Script(lambda *a: passed(1.2)).run(cpu)
    assert not any(getattr(a, "profile", False) for a in cpu.ask())


def test_a_skill_library_or_an_older_retriever_can_stand_in_for_the_ranker():
    from kernelwright.memory.skills import builtin_library

    library = builtin_library()
    with_library = Engine(problem(), "greedy", Limits(), Settings(strategy="greedy", drafts=1), skills=library)
    assert "## [memory-bound-elementwise-fusion]" in with_library.ask()[0].request.messages[-1].content
    seen = []

    def retrieve(query, conditions, k):  # the older signature: text, Conditions, k
        seen.append((query, conditions, k))
        return library.retrieve(query, conditions, k)

    older = Engine(problem(), "greedy", Limits(), Settings(strategy="greedy", drafts=1, skills_k=2), skills=retrieve)
    older.ask()
    assert seen and "relu" in seen[0][0] and "elementwise" in seen[0][1].op_kinds and seen[0][2] == 2
