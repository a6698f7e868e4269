"""Distilled candidate skills: written untrusted with provenance, never overwrite, reviewable."""
from __future__ import annotations

import pytest

from kernelwright.memory.distill import review, write_candidate_skill
from kernelwright.memory.skills import Conditions, SkillFormatError, SkillLibrary, load_skill

# Hand-written evidence for tests; no real run produced these numbers.
EVIDENCE = {"run_id": "run-test-1", "candidate_ids": ["c3", "c7"], "speedup_before": 1.05,
            "speedup_after": 1.62, "device": "NVIDIA H100 80GB HBM3"}


def write(user_dir, name="fused-rowwise-scale", **overrides):
    kwargs = dict(
        name=name, title="Fuse the row scale into the reduction load",
        applies_when={"op_kinds": ["reduction"], "bottleneck": ["memory"], "backend": ["triton"], "gpu": ["sm_90"]},
        steps=["Load the scale once per row.", "Multiply while accumulating."],
        evidence=EVIDENCE, example_code="acc += x * scale", tags=["fusion"],
    )
    kwargs.update(overrides)
    return write_candidate_skill(user_dir, **kwargs)


def test_candidate_is_untrusted_with_provenance(tmp_path):
    path = write(tmp_path)
    skill = load_skill(path)
    assert path.name == "fused-rowwise-scale.md"
    assert skill.trusted is False
    assert skill.provenance["run_id"] == "run-test-1"
    assert skill.provenance["candidate_ids"] == ["c3", "c7"]
    assert skill.provenance["speedup_after"] == 1.62 and skill.provenance["source"] == "distilled"
    assert "created" in skill.provenance
    assert skill.section("Steps").startswith("1. Load the scale once per row.")
    assert "acc += x * scale" in skill.section("Example")
    assert "run-test-1" in skill.section("Evidence")
    assert "distilled" in skill.tags and "fusion" in skill.tags


def test_untrusted_skills_are_excluded_from_retrieval_by_default(tmp_path):
    write(tmp_path)
    library = SkillLibrary.load([tmp_path], encoder=None)
    query, where = "fuse row scale reduction load", Conditions(op_kinds="reduction", backend="triton")
    assert "fused-rowwise-scale" not in [s.name for s in library.retrieve(query, where, k=50)]
    assert "fused-rowwise-scale" in [s.name for s in library.retrieve(query, where, k=50, include_untrusted=True)]
    assert [s.name for s in library.untrusted()] == ["fused-rowwise-scale"]


def test_never_overwrites_and_suffixes_names(tmp_path):
    first = write(tmp_path)
    original = first.read_text()
    second = write(tmp_path)
    third = write(tmp_path)
    assert [second.name, third.name] == ["fused-rowwise-scale-2.md", "fused-rowwise-scale-3.md"]
    assert first.read_text() == original
    assert load_skill(third).name == "fused-rowwise-scale-3"
    assert len(SkillLibrary.load([tmp_path], encoder=None)) > 3  # loads cleanly: names stay unique


def test_builtin_names_are_not_reused(tmp_path):
    path = write(tmp_path, name="Online Softmax")
    assert load_skill(path).name == "online-softmax-2"
    SkillLibrary.load([tmp_path], encoder=None)  # no duplicate-name error with the built-in


def test_a_foreign_file_with_the_same_stem_is_kept(tmp_path):
    (tmp_path / "fused-rowwise-scale.md").write_text("my own notes, not a skill")
    path = write(tmp_path)
    assert path.name == "fused-rowwise-scale-2.md"
    assert (tmp_path / "fused-rowwise-scale.md").read_text() == "my own notes, not a skill"


def test_review_marks_trusted_and_keeps_body(tmp_path):
    path = write(tmp_path)
    before = load_skill(path)
    reviewed = review(path, reviewer="alice")
    after = load_skill(path)
    assert reviewed.trusted and after.trusted
    assert after.body == before.body
    assert after.provenance["reviewed_by"] == "alice" and "reviewed_at" in after.provenance
    assert after.provenance["run_id"] == "run-test-1"
    library = SkillLibrary.load([tmp_path], encoder=None)
    hits = library.retrieve("fuse row scale reduction", Conditions(op_kinds="reduction", backend="triton"), k=50)
    assert "fused-rowwise-scale" in [s.name for s in hits]


def test_review_of_a_broken_file_names_it(tmp_path):
    path = tmp_path / "broken.md"
    path.write_text("no front matter here")
    with pytest.raises(SkillFormatError, match="broken.md"):
        review(path)


@pytest.mark.parametrize(
    "overrides, error, message",
    [
        ({"evidence": {"run_id": "r"}}, ValueError, "missing candidate_ids"),
        ({"steps": ["", "  "]}, ValueError, "at least one step"),
        ({"applies_when": {"op_kinds": ["gemm"], "bottleneck": ["memory"], "backend": ["cuda"], "gpu": ["any"]}},
         SkillFormatError, "unknown value 'gemm'"),
        ({"name": "!!!"}, ValueError, "cannot make a skill name"),
        ({"applies_when": {"opkinds": ["norm"]}}, ValueError, "unknown keys"),
        ({"evidence": {**EVIDENCE, "device": object()}}, ValueError, "plain str"),
    ],
)
def test_bad_input_is_rejected_before_writing(tmp_path, overrides, error, message):
    with pytest.raises(error, match=message):
        write(tmp_path, **overrides)
    assert list(tmp_path.glob("*.md")) == []


def test_conditions_object_is_accepted(tmp_path):
    path = write(tmp_path, applies_when=Conditions(op_kinds="norm", bottleneck="memory", backend="cuda"))
    skill = load_skill(path)
    assert skill.applies_when.op_kinds == {"norm"} and skill.applies_when.gpu == {"any"}
