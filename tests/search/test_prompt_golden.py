"""Golden prompts: every prompt of a recorded multi-round run, on the CPU and on the H100 target.

The run and its hand-written inputs are in golden_run.py (see tests/fixtures/golden/README.md).
Each test asserts what the model must (and must not) read; `test_user_messages_match_the_golden_files`
pins the exact text, rewritten with KW_UPDATE_GOLDEN=1 after a deliberate change.
"""
from __future__ import annotations

import os
import re

import pytest

import golden_run
from golden_run import GOLDEN

from kernelwright.memory.skills import builtin_library


@pytest.fixture(scope="module", params=["h100", "cpu"])
def run(request, kernelbench):
    return request.param, {p.label: p for p in golden_run.run(kernelbench, request.param)}


def by_agent(prompts: dict, agent: str) -> list:
    return [p for label, p in sorted(prompts.items()) if label.endswith(agent)]


def test_the_run_asks_every_agent_in_first_and_later_rounds(run):
    _, prompts = run
    assert [label.split("_", 1)[1] for label in sorted(prompts)] == [
        "planner", "coder", "planner", "coder", "repairer", "analyst", "planner", "coder"]


def test_the_target_is_the_device_of_the_evaluation(run):
    kind, prompts = run
    for prompt in prompts.values():
        if kind == "h100":
            assert "Device: NVIDIA H100 80GB HBM3 (sm_90)" in prompt.system
            assert "132 streaming multiprocessors" in prompt.system and "227 KiB per block" in prompt.system
            assert "L2 cache: 50 MiB" in prompt.system and "65536 per SM" in prompt.system
            assert "copy bandwidth 3006 GB/s" in prompt.system and "fp32 51.9, tf32 363" in prompt.system
            assert "measured on this device" in prompt.system
            assert "interpreter" not in prompt.system.lower()
            assert ("Speed-of-light floor on the target: 5.76 ms per call, memory-bound" in prompt.user
                    or "Speed-of-light floor on the target (the judge's, from measured peaks): 5.76 ms per call, "
                       "memory-bound" in prompt.user)
        else:
            assert "a CPU" in prompt.system and "CPU interpreter" in prompt.system
            assert "streaming multiprocessors" not in prompt.system and "floor on the target" not in prompt.user
        assert "float32: every element within |out - ref| <= 0.0001" in prompt.system  # the tolerances


def test_later_prompts_carry_the_measured_evidence(run):
    """The planner and the analyst read the evidence; the coder carrying out a plan reads the plan
    (the evidence's conclusion), not the verdict, diagnosis and digest again."""
    kind, prompts = run
    coder = by_agent(prompts, "coder")[-1].user
    assert "# Plan to carry out" in coder and "Time per call" not in coder and "# Diagnosis" not in coder
    later = [by_agent(prompts, "planner")[-1], by_agent(prompts, "analyst")[0]]
    for prompt in later:
        text = prompt.user
        if kind == "h100":
            assert "Time per call: 6.41 ms (median, interquartile range 12 us, 48 timed calls" in text
            assert "PyTorch eager: 8.9 ms per call; speedup 1.39x" in text
            assert "torch.compile: 7.35 ms per call; speedup 1.15x" in text
            assert "- Speed of light: 90% of the floor (5.76 ms)." in text
            assert "Speed-of-light floor on the target (the judge's, from measured peaks): 5.76 ms" in text
            assert "`avg_pool2d_kernel`: 100% (6.41 ms)" in text  # the judge's per-kernel split
            assert "Profile (Nsight Compute): memory-bound overall" in text and "DRAM 86%" in text
            assert "4-byte global loads per thread" in text  # a profile finding with its numbers
        else:
            assert "950 ms of CPU wall time" in text and "say nothing about GPU speed" in text
            assert "Nsight" not in text and "Kernels per call" not in text
        assert "Status: correct, 5/5 trials passed." in text or "Status: correct, 2/2 trials passed." in text


def test_a_failure_says_where_outputs_differ(run):
    _, prompts = run
    repair = by_agent(prompts, "repairer")[0].user
    assert "trial 1 (seed 43, signed inputs)" in repair and "max abs error 0.031" in repair
    assert "3040 of 3543104 elements" in repair
    assert repair.count("3040 of 3543104 elements") == 1  # the judge's paragraph; the trial line adds only its numbers
    assert "max_abs_err=0.031, max_rel_err=0.52, rel_l2_err=0.0021" in repair


def test_skills_are_whole_relevant_and_shared_by_planner_and_coder(run):
    _, prompts = run
    library = builtin_library()
    for prompt in prompts.values():
        assert "trimmed to fit" not in prompt.user
        shown = re.findall(r"^## \[([a-z0-9-]+)\]", prompt.user, flags=re.M)
        for name in shown:  # every skill shown is whole: its last line is there
            assert library.get(name).body.strip().splitlines()[-1].strip() in prompt.user
        assert not {"launch-overhead-cuda-graphs", "atomic-reduction", "judge-rules"} & set(shown)
    planners = [re.findall(r"^## \[([a-z0-9-]+)\]", p.user, flags=re.M) for p in by_agent(prompts, "planner")]
    assert "pooling-windows" in planners[0] and "vectorized-access" in planners[0]
    coder = re.findall(r"^## \[([a-z0-9-]+)\]", by_agent(prompts, "coder")[0].user, flags=re.M)
    assert coder[0] == "pooling-windows"  # the skill its plan cites first, then the planner's ranking
    assert set(planners[0]) <= set(coder) | {"pooling-windows"}


def test_no_prompt_names_a_skill_it_does_not_show(run):
    """Findings, plans, diagnoses and skill cross-references cite only the skills the prompt shows."""
    from kernelwright.agents.citations import mentioned, shown_skills

    _, prompts = run
    names = builtin_library().names()
    for label, prompt in prompts.items():
        shown = set(shown_skills(prompt.user))
        assert mentioned(prompt.system + "\n" + prompt.user, names) <= shown, label


def test_search_bookkeeping_quotes_the_planners_words(run):
    kind, prompts = run
    second_planner = by_agent(prompts, "planner")[1].user
    # the second first-version planner sees the first one's plan, label whole, as in progress
    assert ("## In progress" in second_planner and
            "`one program per output row: sum each 11x11 window in registers and divide once`" in second_planner)
    later = by_agent(prompts, "planner")[-1].user
    assert ("- `2-D output tiles of 16 rows x 64 columns with the window rows reused through L1` (c2): worked, "
            "best 1.39× (6.41 ms) (improved)" if kind == "h100" else "- `2-D output tiles of 16 rows x 64 columns") in later
    assert "DEAD END" not in later  # nothing failed twice or brought no gain
    for prompt in prompts.values():
        assert "[block-w]" not in prompt.user.lower().replace("[block_w]", "")  # a tile name is no skill tag
    for prompt in by_agent(prompts, "coder") + by_agent(prompts, "repairer"):
        assert "choose a different one" not in prompt.user and "## In progress" not in prompt.user
    plan = by_agent(prompts, "coder")[-1].user
    assert ("Why: The profile shows 4-byte loads using a quarter of each sector at 86% of DRAM peak; wider loads "
            "cut requests and the block width was never tuned.") in plan  # rationale whole


def test_batch_results_are_heard_together(run):
    """c1 (wrong) and c2 (correct) were told in one batch: the prompts written next know both."""
    _, prompts = run
    repair = by_agent(prompts, "repairer")[0]
    analyst = by_agent(prompts, "analyst")[0].user
    assert "(`c2`)" in analyst and "Already tried" in analyst and "wrong" in analyst
    assert repair.ask.id < by_agent(prompts, "analyst")[0].ask.id


def test_user_messages_match_the_golden_files(run):
    kind, prompts = run
    folder = GOLDEN / kind
    if os.environ.get("KW_UPDATE_GOLDEN"):
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("*.md"):
            old.unlink()
        for label, prompt in prompts.items():
            (folder / f"{label}.md").write_text(prompt.user)
    assert sorted(p.stem for p in folder.glob("*.md")) == sorted(prompts), "run KW_UPDATE_GOLDEN=1 (see README)"
    for label, prompt in prompts.items():
        assert prompt.user == (folder / f"{label}.md").read_text(), f"{kind}/{label}.md differs: KW_UPDATE_GOLDEN=1"
