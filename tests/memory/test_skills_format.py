"""Every built-in skill file parses, validates and follows the documented format."""
from __future__ import annotations

import re

import pytest

from kernelwright.memory.skills import (
    BACKENDS, BOTTLENECKS, BUILTIN_DIR, OP_KINDS, REQUIRED_SECTIONS, SkillFormatError, SkillLibrary,
    builtin_library, load_skill, parse_skill, skill_tags,
)

BUILTIN_FILES = sorted(BUILTIN_DIR.glob("*.md"))


def test_library_has_enough_unique_skills():
    library = builtin_library()
    assert len(library) >= 25
    assert len(library.names()) == len(library)
    assert len(BUILTIN_FILES) == len(library)


@pytest.mark.parametrize("path", BUILTIN_FILES, ids=lambda p: p.stem)
def test_builtin_skill_is_valid(path):
    skill = load_skill(path)
    assert skill.name == path.stem, "file name and skill name must agree"
    assert skill.trusted and skill.provenance is None
    conditions = skill.applies_when
    assert conditions.op_kinds <= OP_KINDS
    assert conditions.bottleneck <= BOTTLENECKS
    assert conditions.backend <= BACKENDS
    assert all(re.fullmatch(r"sm_\d+a?|any", g) for g in conditions.gpu)
    for heading in REQUIRED_SECTIONS:
        assert skill.section(heading), f"{path.name}: empty ## {heading}"
    steps = skill.section("Steps")
    assert re.search(r"^1\. ", steps, re.M), f"{path.name}: steps must be a numbered list"
    example = skill.section("Example")
    assert "```" in example, f"{path.name}: the example must be a code block"
    assert len(skill.body) < 6000, f"{path.name}: keep skills short enough for prompts"


def test_skills_cross_reference_existing_names():
    """Backticked kebab-case ids in skill bodies are references to other skills: they must exist."""
    names = builtin_library().names()
    cited = set()
    for path in BUILTIN_FILES:
        refs = set(re.findall(r"`([a-z0-9]+(?:-[a-z0-9]+)+)`", load_skill(path).body))
        assert refs <= names, f"{path.name} refers to unknown skills {sorted(refs - names)}"
        cited |= refs
    assert len(cited) >= 10, "skills should point at each other"


def _words(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def test_skills_never_name_a_kernelbench_problem(kernelbench):
    problem_titles = set()
    for level in kernelbench.glob("level*"):
        for problem in level.glob("*.py"):
            title = _words(problem.stem.split("_", 1)[-1])
            if len(title) > 12:  # short titles like "ReLU" are ordinary words, not problem names
                problem_titles.add(title)
    assert problem_titles
    for path in BUILTIN_FILES:
        text = _words(path.read_text())
        named = [t for t in problem_titles if t in text]
        assert not named, f"{path.name} names KernelBench problems: {named}"


def test_judge_rules_skill_applies_everywhere():
    library = builtin_library()
    rules = library.get("judge-rules")
    assert rules is not None
    assert rules.applies_when.op_kinds == {"any"} and rules.applies_when.bottleneck == {"any"}
    for word in ("cach", "mutate", "stream", "precision"):
        assert word in rules.body.lower()


def test_skill_tags_are_the_skill_names():
    tags = skill_tags()
    assert {"vectorized-access", "online-softmax", "judge-rules", "split-k"} <= tags
    assert tags == builtin_library().names()


GOOD = """---
name: sample-skill
title: "A sample skill (hand-written test data)"
applies_when:
  op_kinds: [matmul]
  bottleneck: [memory]
  backend: [cuda]
  gpu: [sm_90]
tags: [sample]
---

## When
always

## Steps
1. do it

## Pitfalls
- none

## Example
```python
pass
```
"""


def test_parse_good_text():
    skill = parse_skill(GOOD, "sample.md")
    assert skill.name == "sample-skill" and skill.tags == ("sample",)
    assert skill.section("steps") == "1. do it"


@pytest.mark.parametrize(
    "mutation, message",
    [
        (lambda t: t.replace("---\nname", "name", 1), "must start with a '---'"),
        (lambda t: t.replace("tags: [sample]\n---", "tags: [sample]\n"), "not closed"),
        (lambda t: t.replace("tags: [sample]", "tags: [sample"), "not valid YAML"),
        (lambda t: t.replace("name: sample-skill", "name: Sample Skill"), "kebab-case"),
        (lambda t: t.replace("op_kinds: [matmul]", "op_kinds: [gemm]"), "unknown value 'gemm'"),
        (lambda t: t.replace("backend: [cuda]", "backend: cuda"), "non-empty list"),
        (lambda t: t.replace("  gpu: [sm_90]\n", ""), "missing 'gpu'"),
        (lambda t: t.replace("gpu: [sm_90]", "gpu: [hopper]"), "must match"),
        (lambda t: t.replace("## Pitfalls\n- none\n", ""), "## Pitfalls"),
        (lambda t: t.replace("tags: [sample]", "tags: [sample]\ncolour: red"), "unknown front matter keys"),
        (lambda t: t.replace("tags: [sample]", "tags: [sample]\ntrusted: maybe"), "'trusted' must be"),
    ],
)
def test_bad_skill_files_get_clear_errors_naming_the_file(tmp_path, mutation, message):
    path = tmp_path / "broken.md"
    path.write_text(mutation(GOOD))
    with pytest.raises(SkillFormatError) as info:
        SkillLibrary.load([tmp_path], builtin=False, encoder=None)
    assert str(path) in str(info.value)
    assert message in str(info.value)


def test_duplicate_names_across_folders_are_rejected(tmp_path):
    (tmp_path / "a.md").write_text(GOOD.replace("sample-skill", "online-softmax"))
    with pytest.raises(SkillFormatError, match="duplicate skill name 'online-softmax'"):
        SkillLibrary.load([tmp_path], encoder=None)


def test_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(SkillFormatError, match="does not exist"):
        SkillLibrary.load([tmp_path / "nope"], encoder=None)


def test_builtin_folder_passed_twice_is_loaded_once():
    assert len(SkillLibrary.load([BUILTIN_DIR], encoder=None)) == len(BUILTIN_FILES)
