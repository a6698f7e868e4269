"""Read a Planner answer into a Plan: a fenced JSON block first, a numbered Markdown list second.

The JSON form is what the prompt asks for; the list form is what models fall back to when they
ignore the format, and it still carries usable steps, so it is accepted rather than retried.
"""
from __future__ import annotations

import re
from typing import Any

from kernelwright.llm.parse import extract_json

from .types import Plan

MAX_STEPS = 3
MAX_RATIONALE_CHARS = 600
_TAG = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
# `[skill-name]` citations: not an index (`x[i]`, preceded by a word character) nor a link
_BRACKET_TAG = re.compile(r"(?<![\w\])])\[([A-Za-z][A-Za-z0-9 _-]*[A-Za-z0-9])\](?!\()")
_BACKTICKED = re.compile(r"`([^`\n]+)`")
_NUMBERED = re.compile(r"^\s*(?:\*\*)?(\d+)[.)](?:\*\*)?\s+(.*\S)")
_KEY_STOP = frozenset(
    "a an and the to of for in on with by into from use using via then try implement write make "
    "kernel kernels custom new instead one single each all it its this that".split()
)
# Synonyms of the optimisation verbs, so "fusing" and "merge" give the same approach key.
_VERBS = {
    "fuse": "fuse fuses fused fusing fusion merge merging combine combining",
    "tile": "tile tiles tiled tiling",
    "vectorize": "vectorize vectorise vectorized vectorised vectorizing vectorising vectorization",
    "coalesce": "coalesce coalesced coalescing",
    "unroll": "unroll unrolled unrolling",
    "pipeline": "pipeline pipelined pipelining prefetch prefetching double-buffer",
    "transpose": "transpose transposed transposing",
    "split": "split splitting split-k",
    "tune": "tune tuned tuning autotune autotuning retune",
    "persist": "persistent persist",
    "specialize": "specialize specialise specialized specialised specialization",
    "recompute": "recompute recomputation",
    "pad": "pad padded padding",
    "swizzle": "swizzle swizzled swizzling",
    "shuffle": "shuffle shuffles warp-shuffle",
    "reorder": "reorder reordered reordering",
}
_VERB_OF = {word: verb for verb, words in _VERBS.items() for word in words.split()}


def normalise_tag(raw: Any) -> str | None:
    """`Operator Fusion` / `[operator_fusion]` -> `operator-fusion`; None for empty or odd values."""
    if not isinstance(raw, str):
        return None
    tag = re.sub(r"[\s_]+", "-", raw.strip().strip("[]`'\"").strip().lower())
    if tag in ("", "none", "null", "n-a", "na", "-"):
        return None
    return tag if _TAG.match(tag) else None


def cited_tags(text: str) -> list[str]:
    """Skill names cited as `[name]` outside inline code, in order, without repeats."""
    tags: list[str] = []
    for raw in _BRACKET_TAG.findall(_BACKTICKED.sub(" ", text or "")):
        tag = normalise_tag(raw)
        if tag and tag not in tags:
            tags.append(tag)
    return tags


def main_verb(*texts: str) -> str:
    """The first optimisation verb (canonical form) found in the texts, or ''."""
    for text in texts:
        for word in re.findall(r"[a-z][a-z-]*", (text or "").lower()):
            if word in _VERB_OF:
                return _VERB_OF[word]
    return ""


def make_approach_key(approach: str, tags: list[str], steps: list[str]) -> str:
    """Sorted skill tags (the stable part) with the main verb; else the approach's key words."""
    verb = main_verb(approach, *steps)
    if tags:
        joined = "+".join(sorted(set(tags)))
        return f"{verb}:{joined}" if verb else joined
    source = approach.strip() or (_BACKTICKED.sub(" ", steps[0]) if steps else "")
    words = [w for w in re.findall(r"[a-z0-9]+", source.lower()) if w not in _KEY_STOP]
    return "-".join(words[:5]) or (verb or "unspecified")


def _region_text(region: str) -> str:
    region = region.strip().strip("`").strip()
    return f"`{region}`" if region else ""


def _sentence(change: str) -> str:
    """Lower-case a plain leading word ('Fuse' -> 'fuse') but never an identifier ('ModelNew')."""
    change = change.strip()
    first = change.split(" ", 1)[0]
    if first[:1].isupper() and first[1:].islower() and first.isalpha():
        change = first.lower() + change[len(first):]
    return change


def _step_from_json(item: Any, number: int) -> tuple[str, list[str]] | str:
    """(step text, tags) or an error message for the model."""
    if isinstance(item, str):
        item = {"change": item}
    if not isinstance(item, dict):
        return f"step {number} must be an object with \"region\", \"change\" and \"skill\""
    change = item.get("change") or item.get("description") or item.get("step") or ""
    if not isinstance(change, str) or not change.strip():
        return f"step {number} has no \"change\" text"
    region = item.get("region") or item.get("where") or ""
    region = region if isinstance(region, str) else ""
    if not region.strip() and not _BACKTICKED.search(change):
        return (f"step {number} names no code region: set \"region\" to the function, kernel or "
                "line it changes (e.g. \"ModelNew.forward\")")
    skills = item.get("skill", item.get("skills"))
    raw_tags = skills if isinstance(skills, list) else [skills]
    tags = [t for t in (normalise_tag(s) for s in raw_tags) if t]
    tags += [t for t in cited_tags(change) if t not in tags]
    text = f"In {_region_text(region)}, {_sentence(change)}" if region.strip() else change.strip()
    cited = [t for t in tags if f"[{t}]" not in text]
    if cited:
        text += " " + " ".join(f"[{t}]" for t in cited)
    return text, tags


def _plan_from_json(data: dict) -> Plan | str:
    steps_raw = data.get("steps")
    if not isinstance(steps_raw, list) or not steps_raw:
        return "the JSON has no non-empty \"steps\" list"
    steps, tags = [], []
    for number, item in enumerate(steps_raw[:MAX_STEPS], start=1):
        parsed = _step_from_json(item, number)
        if isinstance(parsed, str):
            return parsed
        steps.append(parsed[0])
        tags += [t for t in parsed[1] if t not in tags]
    rationale = data.get("rationale") if isinstance(data.get("rationale"), str) else ""
    approach = data.get("approach") if isinstance(data.get("approach"), str) else ""
    return Plan(steps=steps, approach_key=make_approach_key(approach, tags, steps),
                skill_tags=tags, rationale=rationale.strip()[:MAX_RATIONALE_CHARS])


def _plan_from_list(text: str) -> Plan | None:
    """A numbered Markdown list; indented lines continue the item above."""
    items: list[list[str]] = []
    preface: list[str] = []
    for line in text.splitlines():
        match = _NUMBERED.match(line)
        if match:
            items.append([match.group(2)])
        elif items:
            if line.startswith((" ", "\t")) and line.strip():
                items[-1].append(line.strip())
        elif line.strip() and not line.lstrip().startswith(("#", "```")):
            preface.append(line.strip())
    steps = [" ".join(parts).strip() for parts in items if " ".join(parts).strip()][:MAX_STEPS]
    if not steps:
        return None
    tags: list[str] = []
    for step in steps:
        tags += [t for t in cited_tags(step) if t not in tags]
    rationale = " ".join(preface)[:MAX_RATIONALE_CHARS]
    return Plan(steps=steps, approach_key=make_approach_key("", tags, steps), skill_tags=tags, rationale=rationale)


def parse_plan(text: str) -> Plan | str:
    """A Plan, or an error message written for the model. Never raises."""
    if not isinstance(text, str) or not text.strip():
        return "the answer is empty"
    found = extract_json(text)
    if found.ok and isinstance(found.value, dict):
        plan = _plan_from_json(found.value)
        if isinstance(plan, Plan) or "steps" in found.value:
            return plan
    listed = _plan_from_list(text)
    if listed is not None:
        return listed
    if found.ok:
        return "the JSON answer is not an object with \"rationale\", \"steps\" and \"approach\""
    return f"no plan found: {found.error}"
