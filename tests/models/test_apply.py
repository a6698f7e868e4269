"""apply.py and patch.py: the tiny model with its Block region replaced by hand-written candidates
(tests/models/candidates.py), verified against the original by the judge's comparison and timed by
the judge's clock; and the whole loop through a real run: extract, optimize (the no-LLM tuner),
apply."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from kernelwright.cli.app import app
from kernelwright.models.apply import apply_bests, summary_text
from kernelwright.models.extract import extract
from kernelwright.models.results import BestCandidate

sys.path.insert(0, str(Path(__file__).parent))
import candidates  # noqa: E402

TINY = Path(__file__).with_name("tiny_model.py")
SPEC = f"{TINY}:build"


@pytest.fixture(scope="module")
def block_problem(tmp_path_factory):
    result = extract(SPEC, tmp_path_factory.mktemp("x") / "regions", top=1, device="cpu")
    return str(result.out_dir / result.manifest["regions"][0]["file"])


def best(problem: str, code: str) -> BestCandidate:
    return BestCandidate(problem, "run", code, "c1", 1.0)


@pytest.mark.parametrize("backward", [False, True])
def test_a_faithful_candidate_is_put_back_at_every_instance(block_problem, backward):
    report, patched = apply_bests(SPEC, [best(block_problem, candidates.FAITHFUL)], backward=backward,
                                  device="cpu", time=False)
    region = report.regions[0]
    assert report.correct, report.message
    assert region.applied and region.paths == ["blocks.0", "blocks.1"] and region.calls == 2 * 3 and not region.fallbacks
    assert type(patched.blocks[1]).__name__ == "RegionAdapter"
    names = dict(patched.named_parameters())
    assert "blocks.0.candidate.region.up.weight" in names and "blocks.0.up.weight" not in names


def test_the_model_s_own_weights_are_carried_over(block_problem):
    from kernelwright.models.spec import build_model

    _, patched = apply_bests(SPEC, [best(block_problem, candidates.FAITHFUL)], device="cpu", time=False, trials=1)
    original = build_model(SPEC).model
    assert torch.equal(patched.blocks[1].candidate.region.down.weight, original.blocks[1].down.weight)
    assert not torch.equal(patched.blocks[0].candidate.region.down.weight, patched.blocks[1].candidate.region.down.weight)


def test_a_wrong_candidate_is_caught_by_the_judge_s_comparison(block_problem):
    report, _ = apply_bests(SPEC, [best(block_problem, candidates.WRONG)], device="cpu", time=False)
    assert not report.correct and report.message.startswith("trial 0") and "output 0" in report.message
    assert "MISMATCH" in summary_text(report)


def test_a_candidate_right_forward_wrong_gradients_fails_only_with_backward(block_problem):
    forward, _ = apply_bests(SPEC, [best(block_problem, candidates.DETACHED)], device="cpu", time=False)
    both, _ = apply_bests(SPEC, [best(block_problem, candidates.DETACHED)], backward=True, device="cpu", time=False)
    assert forward.correct and not both.correct
    assert "gradient of parameter blocks." in both.message and "down.weight" in both.message


def test_weights_that_do_not_fit_leave_the_region_original(block_problem):
    report, patched = apply_bests(SPEC, [best(block_problem, candidates.RENAMED)], device="cpu", time=False)
    region = report.regions[0]
    assert not region.applied and "do not fit ModelNew" in region.error and "region.up.weight" in region.error
    assert type(patched.blocks[0]).__name__ == "Block" and report.correct  # nothing replaced: still the model


def test_a_candidate_that_raises_in_the_model_is_left_out_and_the_rest_verified(block_problem, tmp_path):
    report, patched = apply_bests(SPEC, [best(block_problem, candidates.RAISES)], device="cpu", time=False)
    region = report.regions[0]
    assert not region.applied and "it raised in the model" in region.error and "kernel launch failed" in region.error
    assert report.correct and type(patched.blocks[0]).__name__ == "Block"


def test_a_call_unlike_the_extracted_one_runs_the_original(block_problem):
    _, patched = apply_bests(SPEC, [best(block_problem, candidates.FAITHFUL)], device="cpu", time=False, trials=1)
    adapter = patched.blocks[0]
    x = torch.randn(2, 5, 32)
    assert torch.equal(adapter(x, scale=0.5), adapter.original(x, scale=0.5)) and adapter.fallbacks == 1
    adapter(torch.randn(4, 16, 32), scale=0.25)  # another constant
    assert adapter.fallbacks == 2


def test_end_to_end_time_with_the_judge_s_clock(block_problem):
    report, _ = apply_bests(SPEC, [best(block_problem, candidates.FAITHFUL), BestCandidate("other.py", "run2", why="no correct candidate")],
                            device="cpu", trials=1)
    assert report.timing_method == "wall_cpu" and report.original_ms > 0 and report.patched_ms > 0
    assert report.speedup == pytest.approx(report.original_ms / report.patched_ms)
    assert report.regions[0].saved_ms == pytest.approx(report.original_ms - report.regions[0].alone_ms)
    assert not report.regions[1].applied and report.regions[1].error == "no correct candidate"
    assert "CPU wall time: not GPU performance" in summary_text(report)


def test_extract_optimize_apply_through_a_real_run(tmp_path, monkeypatch):
    """The loop as a user runs it: the GELU region is tuned by the no-LLM tuner (real Triton kernels,
    interpreted on the CPU), and apply reads the run's best correct candidate from its store."""
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    done = runner.invoke(app, ["extract", SPEC, "--leaves", "--top", "4", "--out", "regions", "--device", "cpu"])
    assert done.exit_code == 0, done.output
    manifest = json.loads((tmp_path / "regions" / "regions.json").read_text())
    act = next(r for r in manifest["regions"] if r["paths"] == ["blocks.0.act", "blocks.1.act"])  # GELU: a template fits
    problem = tmp_path / "regions" / act["file"]
    done = runner.invoke(app, ["optimize", str(problem), "--max-evals", "1", "--run-dir", "run"])
    assert done.exit_code == 0, done.output
    done = runner.invoke(app, ["apply", SPEC, "run", "--device", "cpu", "--trials", "2", "--json"])
    assert done.exit_code == 0, done.output
    report = json.loads((tmp_path / "run" / "apply.json").read_text())
    assert report["correct"] and report["regions"][0]["applied"] and report["regions"][0]["calls"] == 4
    assert report["speedup"] > 0 and report["timing_method"] == "wall_cpu"
