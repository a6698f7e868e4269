"""What a planner reads in each case (issue 31, points 7 and 8): a first version, a candidate that
is the best, a candidate beside a better one (shown as a diff), a candidate whose approach is a
dead end. Contexts are HAND-WRITTEN (no model produced the code)."""
from __future__ import annotations

import dataclasses

from kernelwright.agents import AgentContext, CandidateView, Planner


def faster(code: str) -> str:
    """The hand-written ReLU candidate with wider blocks: what a better child of it changes."""
    return code.replace("BLOCK=1024)", "BLOCK=4096, num_warps=8)").replace("triton.cdiv(n, 1024)", "triton.cdiv(n, 4096)")


def _ctx(relu_context, **changes) -> AgentContext:
    return dataclasses.replace(relu_context, **changes)


def test_a_first_version_planner_is_not_told_to_read_a_candidate(relu_context):
    system, user = (m.content for m in Planner().render(_ctx(relu_context, parent=None, best=None, analysis=None)))
    text = system + user
    assert "plan the first version of `ModelNew`" in text and "No candidate exists yet" in text
    assert "the candidate, its" not in text and "Candidate to improve" not in user


def test_a_planner_beside_a_better_candidate_sees_its_change_as_a_diff(relu_context):
    base = relu_context.parent
    best = CandidateView(id="c4", code=faster(base.code), status="pass", speedup=1.4, approach="wider blocks: 4096 per program",
                         made_from=base.id)
    user = Planner().render(_ctx(relu_context, parent=base, best=best))[-1].content
    assert "# Best candidate so far (`c4`): its code as a diff to `c2`" in user
    assert "`c4` was made from `c2` by `wider blocks: 4096 per program`" in user
    assert "-        relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)" in user
    assert "+        relu_kernel[(triton.cdiv(n, 4096),)](x, out, n, BLOCK=4096, num_warps=8)" in user
    assert "it is `c2` plus the change shown in its diff, so planning that change again would only rebuild it" in user
    assert user.count("def relu_kernel") == 1  # the best's code is not repeated whole


def test_a_dead_end_candidate_gets_one_consistent_instruction(relu_context):
    base = dataclasses.replace(relu_context.parent, approach="split rows over two programs",
                               dead_end="no gain; c2 ran 0.44 ms per call (0.95x), not faster than c1 (0.41 ms, 1.02x)")
    system, user = (m.content for m in Planner().render(_ctx(relu_context, parent=base, best=base)))
    assert ("`c2` came from `split rows over two programs`, which this run lists as a dead end (no gain; c2 ran "
            "0.44 ms per call") in user
    assert "keep what works in it and change what made it a dead end" in user
    assert "Never repeat" not in system + user and "Do not propose an approach listed as a dead end again" not in user
