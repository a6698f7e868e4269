"""Greedy, beam and MCTS: which node each expands, told by scripted verdicts."""
from __future__ import annotations

import math

from search_scripts import Script, failed, passed, problem

from kernelwright.search.budget import Limits
from kernelwright.search.core import Engine
from kernelwright.search.settings import Settings
from kernelwright.search.values import speedup_value


def engine(strategy, **settings) -> Engine:
    return Engine(problem(), strategy, Limits(), Settings(strategy=strategy, **settings))


def speed_by_block(table):
    """A judge that reads the candidate's BLOCK size from its code: each test decides which code is fast."""
    def judge(cid, code, n):
        block = int(code.split("BLOCK=")[1].split(")")[0])
        value = table(block, n)
        return failed() if value is None else passed(value)
    return judge


def expansions(e):
    """(node expanded, candidate made) for every non-repair candidate, in creation order."""
    return [(n.search_parent, n.id) for n in e.tree if n.action in ("draft", "improve")]


def test_value_is_correctness_gated_and_bounded():
    assert speedup_value(1.0) == 0.5
    assert speedup_value(3.0) == 0.75 and speedup_value(0.5) < 0.5 < speedup_value(1.01)
    assert 0 < speedup_value(1e-4) < speedup_value(1e6) < 1


def test_greedy_drafts_then_always_improves_the_best():
    e = engine("greedy", drafts=2, parallel=1, iterations=5, max_repairs=0)
    speeds = {1: 1.2, 2: 2.0, 3: 1.5, 4: 2.5, 5: 1.1}  # by evaluation number
    Script(lambda cid, code, n: passed(speeds[n])).run(e)
    assert expansions(e) == [("c0", "c1"), ("c0", "c2"), ("c2", "c3"), ("c2", "c4"), ("c4", "c5")]
    assert e.best().id == "c4" and e.stop_reason.startswith("search finished")


def test_greedy_drafts_again_when_nothing_works():
    e = engine("greedy", drafts=1, parallel=1, iterations=3, max_repairs=0)
    Script(lambda *a: failed()).run(e)
    assert expansions(e) == [("c0", "c1"), ("c0", "c2"), ("c0", "c3")]


def test_beam_keeps_the_best_width_per_generation():
    e = engine("beam", drafts=3, beam_width=2, beam_branch=2, generations=1, parallel=2, max_repairs=0)
    speeds = {1: 1.1, 2: 3.0, 3: 2.0}
    Script(lambda cid, code, n: passed(speeds.get(n, 1.0))).run(e)
    parents = [p for p, _ in expansions(e)]
    assert parents[:3] == ["c0"] * 3
    # generation 1 expands the two best drafts (c2 at 3.0x, c3 at 2.0x) twice each, never c1
    assert sorted(parents[3:]) == ["c2", "c2", "c3", "c3"]
    assert len(e.tree) == 1 + 3 + 4


def test_beam_waits_for_its_generation():
    e = engine("beam", drafts=2, beam_width=1, beam_branch=1, generations=1, parallel=4, max_repairs=0)
    script = Script(lambda *a: passed(1.5))
    script.run(e, steps=5)  # both drafts planned, coded, one evaluated
    assert {a.id for a in e.ask()} and len(e.jobs) == 1  # no gen-1 job while a draft is in flight
    script.run(e)
    assert [p for p, _ in expansions(e)] == ["c0", "c0", "c1"]


def test_mcts_widens_progressively_and_backs_up_values():
    e = engine("mcts", drafts=1, parallel=1, iterations=8, max_repairs=0, widen_k=1.0, widen_alpha=0.5,
               max_children=4)
    script = Script(lambda cid, code, n: passed(1.0 + n / 10))
    while not e.done:
        ask = e.ask()[0]
        e.tell(ask.id, script.answer(ask))
        for node in e.tree:  # never more children than ceil(k * visits^alpha) (+ the job in flight)
            children = len([c for c in e.tree if c.search_parent == node.id and c.action != "repair"])
            limit = max(1 if node.id == "c0" else 0, math.ceil(max(1, node.visits) ** 0.5))
            assert children <= limit + 1, (node.id, children, node.visits)
    root = e.tree.root
    leaves = [n for n in e.tree if n.id != "c0"]
    assert root.visits == 8 == len(leaves)
    assert abs(root.value_sum - sum(speedup_value(n.speedup()) for n in leaves)) < 1e-9
    for node in leaves:  # a node's visits count itself and every expansion below it
        below = [n for n in leaves if node in e.tree.ancestors(n.id)]
        assert node.visits == 1 + len(below)


def test_mcts_prefers_the_valuable_branch():
    e = engine("mcts", drafts=2, parallel=1, iterations=12, max_repairs=0, mcts_c=0.2, max_children=2)
    # drafts: c1 is fast, c2 slow; every child inherits its draft's speed
    def judge(cid, code, n):
        node = e.tree[cid]
        lineage = [node, *e.tree.ancestors(cid)]
        draft = next(x for x in lineage if x.action == "draft")
        return passed(4.0 if draft.id == "c1" else 0.5)
    Script(judge).run(e)
    under_fast = [n for n in e.tree if "c1" in [a.id for a in e.tree.ancestors(n.id)]]
    under_slow = [n for n in e.tree if "c2" in [a.id for a in e.tree.ancestors(n.id)]]
    assert len(under_fast) > 2 * len(under_slow)


def test_mcts_parallel_jobs_spread_out():
    e = engine("mcts", drafts=3, parallel=3, iterations=3, max_repairs=0)
    script = Script(lambda *a: passed(1.5))
    script.run(e)
    assert [p for p, _ in expansions(e)] == ["c0", "c0", "c0"]


def test_failed_leaf_is_never_expanded():
    e = engine("mcts", drafts=1, parallel=1, iterations=4, max_repairs=0)
    Script(lambda cid, code, n: failed() if n == 1 else passed(1.3)).run(e)
    assert all(parent != "c1" for parent, _ in expansions(e))
