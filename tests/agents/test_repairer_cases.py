"""What a Repairer reads for an asynchronous CUDA fault (issue 31, point 8). Contexts are HAND-WRITTEN."""
from __future__ import annotations

import dataclasses

from kernelwright.agents import Repairer
from kernelwright.agents.repairer import cuda_fault
from kernelwright.agents.types import VerdictView

FAULT = ("Traceback (most recent call last):\n  File \"candidate.py\", line 31, in forward\n"
         "    out2 = torch.empty_like(out)\nRuntimeError: CUDA error: an illegal memory access was encountered\n"
         "CUDA kernel errors might be asynchronously reported at some other API call.")


def test_the_fault_kinds_that_cuda_reports_late():
    assert cuda_fault(FAULT) == "an illegal memory access was encountered"
    assert cuda_fault("RuntimeError: CUDA error: misaligned address") == "misaligned address"
    assert cuda_fault("output differs from the reference in 3 of 10 elements") == ""


def test_a_cuda_fault_is_explained_and_its_location_shown_when_the_judge_found_it(relu_context):
    broken = dataclasses.replace(relu_context.parent, status="fail")
    ctx = dataclasses.replace(relu_context, parent=broken, failure=FAULT)
    user = Repairer().render(ctx)[-1].content
    assert "# About this error" in user and "is an asynchronous CUDA error" in user
    assert "The line in the\ntraceback is where it was reported, not where it happened" in user
    assert "did not run it again to locate the faulting launch" in user
    located = dataclasses.replace(broken, verdict=VerdictView(status="fail", fault={
        "tool": "CUDA_LAUNCH_BLOCKING=1", "kernel": "relu_kernel", "where": "candidate.py:12",
        "report": "RuntimeError: CUDA error: an illegal memory access was encountered (relu_kernel launch)"}))
    user = Repairer().render(dataclasses.replace(ctx, parent=located))[-1].content
    assert ("The judge ran the failing trial again with CUDA_LAUNCH_BLOCKING=1: the fault is in `relu_kernel` at "
            "candidate.py:12.") in user
    assert "did not run it again" not in user


def test_a_wrong_result_gets_no_fault_note_and_skills_as_pitfalls_only(relu_context):
    ctx = dataclasses.replace(relu_context, failure="trial 1 (signed inputs): output differs in 3 of 10 elements")
    user = Repairer().render(ctx)[-1].content
    assert "# About this error" not in user
    assert "# Pitfalls worth checking" in user
    skills = user.split("# Pitfalls worth checking")[1].split("# Your task")[0]
    assert "### Steps" not in skills and "### Example" not in skills and "```" not in skills


def test_a_margin_close_to_the_bound_is_pointed_out(relu_context):
    """Issue 31: a 0.88 error margin passed without a word."""
    from kernelwright.agents import Planner

    for margin, warned in ((0.88, True), (0.12, False)):
        view = VerdictView(status="pass", trials_passed=5, trials_total=5, margin=margin)
        base = dataclasses.replace(relu_context.parent, verdict=view)
        user = Planner().render(dataclasses.replace(relu_context, parent=base, best=base))[-1].content
        assert f"the largest measured error is {margin:.2g} of the allowed error" in user
        assert ("That error is close to the bound: another seed or input variant may fail it" in user) == warned
