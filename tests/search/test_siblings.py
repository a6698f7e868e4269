"""Sibling expansions get different prompts, and identical candidates are judged once.

Driven by the pure engine with hand-written answers (search_scripts.py): no model, no judge.
"""
from __future__ import annotations

import re

from search_scripts import Script, code_text, completion, failed, judge_failure, passed, plan_text, problem

from kernelwright.agents.sections import directions
from kernelwright.agents.templates import make_environment
from kernelwright.search.asks import CompletionAsk, EvaluationAsk
from kernelwright.search.budget import Limits
from kernelwright.search.core import Engine
from kernelwright.search.duplicates import normalized
from kernelwright.search.settings import Settings

DRAFT_DIRECTIONS = directions(make_environment(), "draft")
IMPROVE_DIRECTIONS = directions(make_environment(), "improve")


def engine(strategy="greedy", limits=None, **settings) -> Engine:
    values = {"drafts": 3, "parallel": 3, "iterations": 3, "plan": False, "max_repairs": 0, "tune": False,
              "skills_k": 0, **settings}
    return Engine(problem(), strategy, limits or Limits(), Settings(strategy=strategy, **values))


def user(ask: CompletionAsk) -> str:
    return ask.request.messages[-1].content


def coder_asks(e: Engine) -> list[CompletionAsk]:
    return [a for a in e.ask() if isinstance(a, CompletionAsk) and a.agent == "coder"]


# ---- sibling directions ----------------------------------------------------------------------------


def test_three_drafts_started_together_get_three_different_coder_prompts():
    e = engine()
    asks = coder_asks(e)
    assert len(asks) == 3
    assert len({a.request.stable_hash("any-model") for a in asks}) == 3  # an exchange or cache tells them apart
    for k, ask in enumerate(asks, start=1):
        text = user(ask)
        assert f"# Attempt {k} from the reference" in text
        assert "2 other attempts started from the reference at the same time" in text
        assert DRAFT_DIRECTIONS[k - 1] in " ".join(text.split())  # the direction file's k-th item, whole
        assert text.index("# Attempt") < text.index("# Your task")


def test_without_sibling_directions_the_same_drafts_ask_the_same_prompt():
    """The behaviour the directions fix (and the setting a run stored before them resumes with)."""
    asks = coder_asks(engine(sibling_directions=False))
    assert len({a.request.stable_hash("any-model") for a in asks}) == 1
    assert "# Attempt" not in user(asks[0])


def test_a_lone_expansion_renders_exactly_as_before():
    lone = coder_asks(engine(drafts=1, parallel=1, iterations=1))[0]
    without = coder_asks(engine(drafts=1, parallel=1, iterations=1, sibling_directions=False))[0]
    assert "# Attempt" not in user(lone) and lone.request.to_dict() == without.request.to_dict()


def test_with_plans_the_planners_get_the_direction_and_the_coders_the_plan():
    e = engine(plan=True)
    planners = []
    while not coder_asks(e) or len(planners) < 3:
        ask = next(a for a in e.ask() if a.agent == "planner")
        planners.append(ask)
        e.tell(ask.id, completion(plan_text(f"idea {len(planners)}")))
    assert [f"# Attempt {k} from the reference" in user(p) for k, p in enumerate(planners, start=1)] == [True] * 3
    assert "`idea 1`" in user(planners[1]) and "`idea 2`" in user(planners[2])  # siblings' plans: "In progress"
    assert all("# Attempt" not in user(c) for c in coder_asks(e))  # the plan already carries the direction


def test_a_coder_without_a_usable_plan_gets_the_direction_and_the_siblings_plans():
    e = engine(plan=True, parse_retries=0)
    answers = iter([plan_text("tile the rows"), "no plan here", plan_text("vectorize loads")])
    for _ in range(3):
        ask = next(a for a in e.ask() if a.agent == "planner")
        e.tell(ask.id, completion(next(answers)))
    planless = next(a for a in coder_asks(e) if a.job_id == "j2")
    text = user(planless)
    assert "# Attempt 2 from the reference" in text and DRAFT_DIRECTIONS[1] in " ".join(text.split())
    assert "Approaches the other attempts already took" in text
    assert "`tile the rows`" in text  # job 1's plan; job 3 had not planned yet
    assert "`vectorize loads`" not in text


def test_beam_branches_of_one_candidate_get_improve_directions():
    e = engine("beam", drafts=1, parallel=2, beam_width=1, beam_branch=2, generations=1)
    Script(lambda cid, code, n: passed(1.5), code=lambda n: code_text(64 * n)).run(e, steps=2)  # the draft
    branches = coder_asks(e)
    assert len(branches) == 2 and all(a.request.messages[-1].content.count("c1") for a in branches)
    for k, ask in enumerate(branches, start=1):
        text = " ".join(user(ask).split())
        assert f"# Attempt {k} from this candidate" in text and IMPROVE_DIRECTIONS[k - 1] in text
        assert "One other attempt started from this candidate" in text


def test_a_job_started_later_beside_a_sibling_takes_the_next_direction():
    e = engine(drafts=2, parallel=2, iterations=4)
    Script(lambda cid, code, n: passed(3.0 - n), code=lambda n: code_text(64 * n)).run(e, steps=4)
    # c1 (2.0x) judged: greedy expands it alone (c2's draft still runs); c2 (1.0x) judged: c1 again, beside it
    first, second = coder_asks(e)
    assert (first.job_id, second.job_id) == ("j3", "j4")
    assert "# Attempt" not in user(first)  # it started alone: as before
    text = " ".join(user(second).split())
    assert "# Attempt 2 from this candidate" in text and IMPROVE_DIRECTIONS[1] in text
    assert "One other attempt started from this candidate" in text


def test_replaying_the_tells_renders_the_same_prompts():
    """A resume is a replay of the stored results: every prompt comes out byte-identical."""
    def prompts_of(asks, seen):
        seen.update({a.id: a.request.to_dict() for a in asks if isinstance(a, CompletionAsk)})

    original, asked = engine(drafts=3, parallel=2, iterations=5), {}
    script = Script(lambda cid, code, n: failed() if n == 2 else passed(1.0 + n / 10), code=lambda n: code_text(64 * n))
    script.run(original, pick=lambda asks: prompts_of(asks, asked) or asks[-1])  # the newest first: jobs overlap
    replayed, reasked = engine(drafts=3, parallel=2, iterations=5), {}
    for ask_id, result, elapsed in script.log:
        prompts_of(replayed.ask(), reasked)
        replayed.tell(ask_id, result, elapsed)
    assert reasked == asked and sum("# Attempt" in str(p) for p in asked.values()) >= 3
    assert [n.to_dict() for n in replayed.tree] == [n.to_dict() for n in original.tree]


# ---- identical candidates -------------------------------------------------------------------------


def test_the_same_code_three_times_is_judged_once():
    e = engine()
    same = code_text(128)
    for ask, text in zip(coder_asks(e), [same, same.replace("\n", "\r\n"), same.replace("):\n", "):   \n")], strict=True):
        e.tell(ask.id, completion(text))
    evaluations = [a for a in e.ask() if isinstance(a, EvaluationAsk)]
    assert [a.candidate_id for a in evaluations] == ["c1"] and e.budget.spend.evals == 1
    for cid in ("c2", "c3"):
        node = e.tree[cid]
        assert node.status == "duplicate" and node.duplicate_of == "c1" and node.eval is None
        assert node.reason.startswith("duplicate of c1") and "being judged" in node.reason
    e.tell(evaluations[0].id, passed(1.5))
    assert e.done and e.best().id == "c1" and e.budget.spend.evals == 1
    assert [x.outcome for x in e.trajectory.entries] == ["duplicate", "duplicate", "faster"]
    assert "same code as an earlier candidate ×2" in e.trajectory.digest()


def test_a_duplicate_is_never_expanded_and_later_prompts_say_so():
    e = engine(drafts=2, parallel=2, iterations=3)
    asks = coder_asks(e)
    for ask in asks:
        e.tell(ask.id, completion(code_text(128)))
    e.tell(next(a for a in e.ask() if isinstance(a, EvaluationAsk)).id, passed(1.5))
    later = coder_asks(e)
    assert len(later) == 1 and "c1" in user(later[0])  # greedy expands c1, never its duplicate c2
    assert "same code as an earlier candidate" in user(later[0])  # the "Already tried" digest
    assert all(n.search_parent != "c2" for n in e.tree)


def test_different_code_is_judged_and_normalising_goes_no_further():
    assert normalized("a  \r\nb\t\r\n\n") == normalized("a\nb") == "a\nb"
    assert normalized("a\n  b") != normalized("a\nb")  # indentation is code
    e = engine(drafts=2, parallel=2, iterations=2)
    for ask, block in zip(coder_asks(e), (128, 256), strict=True):
        e.tell(ask.id, completion(code_text(block)))
    assert sorted(a.candidate_id for a in e.ask() if isinstance(a, EvaluationAsk)) == ["c1", "c2"]


def test_a_repair_that_returns_the_failed_code_is_not_judged_again():
    e = engine(drafts=1, parallel=1, iterations=1, max_repairs=2)
    e.tell(coder_asks(e)[0].id, completion(code_text(128)))
    e.tell(e.ask()[0].id, failed())
    repair = e.ask()[0]
    assert repair.agent == "repairer"
    e.tell(repair.id, completion(code_text(128) + "\n\n"))
    assert e.done and e.budget.spend.evals == 1
    assert e.tree["c2"].status == "duplicate" and e.tree["c2"].duplicate_of == "c1"


def test_code_whose_judging_failed_is_judged_when_it_comes_again():
    e = engine(drafts=1, parallel=1, iterations=2)
    e.tell(coder_asks(e)[0].id, completion(code_text(128)))
    e.tell(e.ask()[0].id, judge_failure())  # the judge could not run: c1 has no verdict
    e.tell(coder_asks(e)[0].id, completion(code_text(128)))  # nothing works yet: drafts again
    assert [a.candidate_id for a in e.ask() if isinstance(a, EvaluationAsk)] == ["c2"]


def test_runs_stored_before_these_settings_resume_without_them():
    stored = Settings(strategy="greedy").to_dict()
    for name in ("sibling_directions", "dedupe"):
        del stored[name]
    old = Settings.from_stored(stored)
    assert not old.sibling_directions and not old.dedupe
    assert Settings().sibling_directions and Settings().dedupe


# ---- a run through the session: exchange answers, batch verdicts, resumes -----------------------------


def test_an_exchange_and_batch_run_asks_three_prompts_and_judges_one_candidate(tmp_path, kernelbench):
    """The run that found the bug, on the CPU: `--llm exchange --eval batch --target h100 --set drafts=3
    --set parallel=3 --set plan=false`. The three drafts get three prompts (three answer files), the
    model (here: a hand-written answer) writes the same module for each, and one batch request is made."""
    import json

    from test_drivers import hand_written_verdict

    from kernelwright.search.drivers.modes import run_optimization
    from kernelwright.search.drivers.session import RunOptions
    from kernelwright.store import RunStore

    run_dir = tmp_path / "run"
    settings = Settings(strategy="greedy", drafts=3, parallel=3, iterations=3, plan=False, max_repairs=0,
                        skills_k=0, tune=False)
    options = RunOptions(problem=str(kernelbench / "level1" / "19_ReLU.py"), llm="exchange", eval_mode="batch",
                         target="h100", settings=settings, limits=Limits(max_evals=6),
                         overrides={"batch_size": 16, "dim": 64}, run_dir=str(run_dir))
    first = run_optimization(options)
    assert first.status == "paused" and len(first.pending_prompts) == 3
    exchange = run_dir / "exchange"
    sidecars = [json.loads(p.read_text()) for p in sorted(exchange.glob("*.request.json"))]
    assert len({s["hash"] for s in sidecars}) == 3
    texts = sorted(p.read_text() for p in first.pending_prompts)
    attempts = sorted(re.search(r"# Attempt (\d) from the reference", text).group(1) for text in texts)
    assert attempts == ["1", "2", "3"]  # one prompt per attempt (the files' order follows their hashes)
    for sidecar in sidecars:  # the model answers all three alike
        (exchange / sidecar["answer_file"]).write_text(code_text(256))
    second = run_optimization(RunOptions(resume=str(run_dir)))
    assert second.status == "paused" and [p.name for p in second.pending_evals] == ["c1.request.json"]
    assert second.snapshot["spend"]["evals"] == 1
    (run_dir / "evals" / "c1.verdict.json").write_text(hand_written_verdict("c1"))
    done = run_optimization(RunOptions(resume=str(run_dir)))
    assert done.status == "done" and done.best_id == "c1" and done.snapshot["spend"]["evals"] == 1
    assert len(list((run_dir / "evals").glob("*.request.json"))) == 1
    assert len(list(exchange.glob("*.request.json"))) == 3  # the resumes found the same three prompts
    with RunStore.in_dir(run_dir, create=False) as store:
        run_id = store.run()["id"]
        rows = {row["id"]: row for row in store.candidates(run_id)}
        assert [rows[c]["status"] for c in ("c1", "c2", "c3")] == ["pass", "duplicate", "duplicate"]
        assert rows["c2"]["node"]["duplicate_of"] == "c1" and rows["c3"]["node"]["duplicate_of"] == "c1"
        assert not [e for e in store.events(run_id) if e["kind"] == "ask_differs"]  # resumes rendered the same
