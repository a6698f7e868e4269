"""Golden prompts of a later-round GEMM + BatchNorm run on the H100 target (issue 31): what each
point of the issue requires the model to read, checked on the prompts the engine really writes.

The run and its hand-written inputs are in golden_run2.py. The user messages are pinned in
tests/fixtures/golden/h100_gemm/ (and the one system message as system.md); rewrite them with
KW_UPDATE_GOLDEN=1 after a deliberate change and review the diff.
"""
from __future__ import annotations

import os
import re

import pytest

import golden_run2
from golden_run2 import GOLDEN

from kernelwright.agents.citations import mentioned, shown_skills
from kernelwright.memory.skills import builtin_library
from kernelwright.rules import precision

FOLDER = GOLDEN / "h100_gemm"


@pytest.fixture(scope="module")
def prompts(kernelbench):
    return {p.label: p for p in golden_run2.run(kernelbench)}


def test_the_run_asks_what_the_script_says(prompts):
    assert [label.split("_", 1)[1] for label in sorted(prompts)] == [
        "planner", "coder", "planner", "coder", "repairer", "analyst", "planner", "coder", "planner", "coder",
        "analyst", "planner", "coder"]


def test_point_1_one_floor_with_its_precision_model(prompts):
    """The header and every verdict quote one floor; a verdict judged against another one says so."""
    first = prompts["01_planner"].user
    assert "Speed-of-light floor on the target: 0.574 ms per call, compute-bound" in first
    assert "at 239 TFLOP/s bf16x3, 3xBF16 on the tensor cores at a third of the bf16 rate" in first
    for label in ("07_planner", "09_planner", "12_planner", "06_analyst", "11_analyst"):
        text = prompts[label].user
        assert "Speed-of-light floor on the target (the judge's, from measured peaks): 0.574 ms" in text
        floors = set(re.findall(r"% of the floor \(([\d.]+ ms)\)", text))
        assert floors == {"0.574 ms"}, (label, floors)
    assert ("- Speed of light: 59% of the floor (0.574 ms); the judge's verdict measured it against 0.687 ms, "
            "from peaks measured at another time.") in prompts["07_planner"].user


def test_point_2_precision_facts_from_one_source(prompts):
    system = prompts["01_planner"].system
    assert system.count(precision.prompt_section()) == 1
    assert "Accumulate a split product tile by tile" in system
    for prompt in prompts.values():
        assert "float32-accurate" not in prompt.system + prompt.user


def test_point_3_no_prompt_names_a_skill_it_does_not_show_nor_cuda_code(prompts):
    names = builtin_library().names()
    for label, prompt in prompts.items():
        shown = set(shown_skills(prompt.user))
        assert mentioned(prompt.system + "\n" + prompt.user, names) <= shown, label
        assert "```cuda" not in prompt.user and "__global__" not in prompt.user, label
    assert "gemm-norm-fusion" in shown_skills(prompts["01_planner"].user)  # a norm beside the GEMM


def test_point_5_the_software_and_what_this_triton_has(prompts):
    system = prompts["01_planner"].system
    assert "Software the judge runs: cuda 13.0, driver 580.159.04, nvcc 13.0.88, python 3.12.3, torch 2.11.0+cu130, " \
           "triton 3.6.0." in system
    assert "This Triton has `tl.dot(..., input_precision=\"tf32x3\")`" in system


def test_point_6_the_reference_times_once_measured(prompts):
    """Before any verdict the run knows no reference time here (the device records none yet: see
    docs/agents.md); from the first GPU verdict on every prompt's task section carries them."""
    assert "The reference on the target" not in prompts["01_planner"].user
    for label in ("05_repairer", "06_analyst", "07_planner", "08_coder"):
        assert "The reference on the target: PyTorch eager 1.52 ms, torch.compile 1.31 ms per call." in prompts[label].user


def test_point_7_the_best_candidate_and_dead_ends(prompts):
    beside = prompts["09_planner"].user
    assert "# Best candidate so far (`c4`): its code as a diff to `c1`" in beside
    assert "`c4` was made from `c1` by `BatchNorm statistics in the GEMM epilogue, one normalising pass`" in beside
    assert "+    tl.atomic_add(sum_ptr + rn, tl.sum(acc, 0), mask=rn < N)" in beside
    assert "it is `c1` plus the change shown in its diff, so planning that change again would only rebuild it" in beside
    dead = ("- `3xBF16 split GEMM with BatchNorm statistics by atomics` (c2, c3): DEAD END (crash, no gain, best 1.26× "
            "(1.21 ms)); why: c3 ran 1.21 ms per call (1.26x), not faster than c1 (0.98 ms, 1.55x)")
    assert dead in beside
    expanded = prompts["12_planner"].user
    assert "# Candidate to improve (`c3`)" in expanded and "# Best candidate so far (`c4`)" in expanded
    assert ("`c3` came from `3xBF16 split GEMM with BatchNorm statistics by atomics`, which this run lists as a dead "
            "end (crash, no gain; c3 ran 1.21 ms per call") in expanded
    assert "Do not propose an approach listed as a dead end again" not in expanded


def test_point_8_role_texts_fit_their_case(prompts):
    first = prompts["01_planner"].user
    assert "plan the first version of `ModelNew`" in first and "Candidate to improve" not in first
    assert "- `bn` (BatchNorm1d): normalises with the current batch's mean and biased variance" in first
    assert "# Worked example of the answer form" in prompts["02_coder"].user
    repair = prompts["05_repairer"].user
    assert "`an illegal memory access was encountered` is an asynchronous CUDA error" in repair
    assert "did not run it again to locate the faulting launch" in repair
    assert "# Worked example" not in repair


def test_point_9_one_shared_system_message_and_the_size(prompts):
    assert len({p.system for p in prompts.values()}) == 1
    total = sum(len(p.system) + len(p.user) for p in prompts.values())
    # before issue 31 the same run's 13 prompts held 345,141 characters (docs/agents.md)
    assert total < 0.78 * 345_141, total


def test_user_messages_match_the_golden_files(prompts):
    if os.environ.get("KW_UPDATE_GOLDEN"):
        FOLDER.mkdir(parents=True, exist_ok=True)
        for old in FOLDER.glob("*.md"):
            old.unlink()
        for label, prompt in prompts.items():
            (FOLDER / f"{label}.md").write_text(prompt.user)
        (FOLDER / "system.md").write_text(prompts["01_planner"].system)
    assert sorted(p.stem for p in FOLDER.glob("*.md")) == sorted([*prompts, "system"]), "KW_UPDATE_GOLDEN=1"
    assert prompts["01_planner"].system == (FOLDER / "system.md").read_text()
    for label, prompt in prompts.items():
        assert prompt.user == (FOLDER / f"{label}.md").read_text(), f"h100_gemm/{label}.md differs: KW_UPDATE_GOLDEN=1"
