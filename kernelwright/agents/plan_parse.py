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
_TAG = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
# `[skill-name]` citations: not an index (`x[i]`, preceded by a word character) nor a link
_BRACKET_TAG = re.compile(r"(?<![\w\])])\[([A-Za-z][A-Za-z0-9 _-]*[A-Za-z0-9])\](?!\()")
_BACKTICKED = re.compile(r"`([^`\n]+)`")
_NUMBERED = re.compile(r"^\s*(?:\*\*)?(\d+)[.)](?:\*\*)?\s+(.*\S)")
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


def approach_label(approach: str, steps: list[str]) -> str:
    """The planner's own label of the idea, whole (whitespace collapsed); without one, the first
    step's text. Never built from skill names, never cut: it is what "Already tried" and "In
    progress" quote back to the next planner."""
    label = " ".join((approach or "").split())
    return label or (" ".join(steps[0].split()) if steps else "unspecified")


def known_only(tags: list[str], known: frozenset[str] | None) -> list[str]:
    """Tags that name a skill of the library (all of them when the library is not known): a tile
    name written as `[BM]` is not a skill citation."""
    return list(tags) if known is None else [t for t in tags if t in known]


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


def _step_from_json(item: Any, number: int, known: frozenset[str] | None) -> tuple[str, list[str]] | str:
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
    tags = known_only([t for t in (normalise_tag(s) for s in raw_tags) if t], known)
    tags += [t for t in known_only(cited_tags(change), known) if t not in tags]
    text = f"In {_region_text(region)}, {_sentence(change)}" if region.strip() else change.strip()
    cited = [t for t in tags if f"[{t}]" not in text]
    if cited:
        text += " " + " ".join(f"[{t}]" for t in cited)
    return text, tags


def _plan_from_json(data: dict, known: frozenset[str] | None) -> Plan | str:
    steps_raw = data.get("steps")
    if not isinstance(steps_raw, list) or not steps_raw:
        return "the JSON has no non-empty \"steps\" list"
    steps, tags = [], []
    for number, item in enumerate(steps_raw[:MAX_STEPS], start=1):
        parsed = _step_from_json(item, number, known)
        if isinstance(parsed, str):
            return parsed
        steps.append(parsed[0])
        tags += [t for t in parsed[1] if t not in tags]
    rationale = data.get("rationale") if isinstance(data.get("rationale"), str) else ""
    approach = data.get("approach") if isinstance(data.get("approach"), str) else ""
    return Plan(steps=steps, approach_key=approach_label(approach, steps), skill_tags=tags,
                rationale=" ".join(rationale.split()))


def _plan_from_list(text: str, known: frozenset[str] | None) -> Plan | None:
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
        tags += [t for t in known_only(cited_tags(step), known) if t not in tags]
    rationale = " ".join(preface)
    return Plan(steps=steps, approach_key=approach_label("", steps), skill_tags=tags, rationale=rationale)


def parse_plan(text: str, known_skills: frozenset[str] | None = None) -> Plan | str:
    """A Plan, or an error message written for the model. Never raises. With `known_skills`, only
    citations of those skill names count as skill tags."""
    if not isinstance(text, str) or not text.strip():
        return "the answer is empty"
    found = extract_json(text)
    if found.ok and isinstance(found.value, dict):
        plan = _plan_from_json(found.value, known_skills)
        if isinstance(plan, Plan) or "steps" in found.value:
            return plan
    listed = _plan_from_list(text, known_skills)
    if listed is not None:
        return listed
    if found.ok:
        return "the JSON answer is not an object with \"rationale\", \"steps\" and \"approach\""
    return f"no plan found: {found.error}"
