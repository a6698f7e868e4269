"""The run's start (search/start.py): a candidate given to the engine (the inductor seed) is judged
first, before any expansion; when it passes it joins the tree under the reference and round 1's
planners see it as the best candidate so far; when it fails the search goes on from the reference
and no prompt mentions it. Verdicts here are made up by the tests (search_scripts), as in the other
engine tests."""
from __future__ import annotations

from search_scripts import KERNEL, Script, failed, judge_failure, passed, problem

from kernelwright.search.asks import CompletionAsk, EvaluationAsk
from kernelwright.search.budget import Limits
from kernelwright.search.core import Engine
from kernelwright.search.results import EvalResult
from kernelwright.search.settings import Settings
from kernelwright.search.start import Start
from kernelwright.search.tree import FAILED, PASSED, ROOT_ID

SEED = "# origin: inductor seed\n" + KERNEL.replace("{block}", "128")


def engine(strategy: str = "greedy", **settings) -> Engine:
    values = {"strategy": strategy, "drafts": 1, "parallel": 1, "iterations": 2, "tune": False, "skills_k": 0,
              **settings}
    return Engine(problem(), strategy, Limits(max_evals=10), Settings(**values), start=Start(code=SEED))


def test_the_start_is_the_first_ask_and_nothing_else_starts_before_its_verdict():
    run = engine()
    asks = run.ask()
    assert len(asks) == 1 and isinstance(asks[0], EvaluationAsk)
    assert asks[0].candidate_id == "c1" and asks[0].code == SEED and asks[0].job_id == "start"
    assert run.snapshot()["start"] == {"id": "c1", "status": "pending", "speedup": None, "reason": ""}
    assert run.budget.spend.evals == 1 and run.budget.spend.calls == 0


def test_a_passing_start_is_the_candidate_round_one_plans_to_beat():
    run = engine("mcts", iterations=3, drafts=2, parallel=2)
    run.tell("a1", passed(1.4))
    seed = run.tree["c1"]
    assert seed.status == PASSED and seed.search_parent == ROOT_ID and seed.action == "seed"
    assert run.best() is seed and seed.visits == 1 and run.tree.root.visits == 1  # MCTS learned it (adopt)
    planners = [a for a in run.ask() if isinstance(a, CompletionAsk)]
    assert planners and planners[0].agent == "planner"
    prompt = "\n".join(m.content for m in planners[0].request.messages)
    assert "# origin: inductor seed" in prompt and "`c1`" in prompt  # its code, as the candidate to improve
    assert "torch.compile's own kernels (inductor seed)" in prompt  # the trajectory's line: what it is
    assert run.snapshot()["start"]["status"] == "pass"


def test_a_draft_slower_than_the_start_counts_as_no_gain():
    run = engine(iterations=1)
    script = Script(lambda cid, code, n: passed(2.0) if cid == "c1" else passed(1.5))
    script.run(run)
    assert run.best().id == "c1"
    lines = {e.candidate_id: e for e in run.trajectory.entries}
    assert lines["c1"].action == "seed" and lines["c2"].outcome == "slower"
    assert "not faster than c1" in lines["c2"].reason


def test_a_failing_start_stays_out_of_the_search_and_its_failure_out_of_the_prompts():
    for result in (failed("trial 1 failed: max abs error 3.5 (seed)"), judge_failure()):
        run = engine()
        run.tell("a1", result)
        seed = run.tree["c1"]
        assert seed.status == FAILED and seed.search_parent is None and run.best() is None
        assert not run.trajectory.entries and run.tree.search_children(ROOT_ID) == []
        planner = run.ask()[0]
        assert isinstance(planner, CompletionAsk) and planner.agent == "planner"
        prompt = "\n".join(m.content for m in planner.request.messages)
        assert "inductor seed" not in prompt and "3.5 (seed)" not in prompt and "No candidate exists yet" in prompt
        assert run.snapshot()["start"]["status"] == FAILED


def test_a_replay_of_the_same_tells_gives_the_same_asks():
    script = Script(lambda cid, code, n: passed(1.2 + n / 10))
    first = engine("mcts", iterations=3)
    script.run(first)
    second = engine("mcts", iterations=3)
    for ask_id, result, elapsed in script.log:
        second.tell(ask_id, result, elapsed)
    assert [n.to_dict() for n in second.tree] == [n.to_dict() for n in first.tree]


def test_a_start_judged_again_after_a_system_error_joins_the_tree():
    run = engine()
    run.tell("a1", EvalResult(status="error", stage="load", outcome="crash", error="the GPU fell off the bus"))
    assert run.tree["c1"].search_parent is None
    run.amend("c1", passed(1.3))
    assert run.tree["c1"].search_parent == ROOT_ID and run.best().id == "c1"
    assert [e.candidate_id for e in run.trajectory.entries] == ["c1"]
    run.amend("c1", passed(1.1))  # judged once more: one line, the latest verdict's
    assert [(e.candidate_id, e.speedup) for e in run.trajectory.entries] == [("c1", 1.1)]


def test_without_a_start_nothing_changes():
    run = Engine(problem(), "greedy", Limits(), Settings(strategy="greedy", drafts=1, tune=False, skills_k=0))
    assert [type(a).__name__ for a in run.ask()] == ["CompletionAsk"] and run.snapshot()["start"] is None
