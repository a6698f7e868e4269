"""Turn a step that produced a speedup into a *candidate* skill in a user folder.

Candidates are written with `trusted: false` and a `provenance` block (run, candidates, speedups,
device) so a person can check the evidence; retrieval ignores them until `review()` flips the flag.
Nothing here ever overwrites a file: a taken name gets a `-2`, `-3`, ... suffix.
"""
from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

from kernelwright.memory.skills import (
    BUILTIN_DIR, CONDITION_FIELDS, Conditions, Skill, SkillFormatError, load_skill, parse_skill, split_front_matter,
)

EVIDENCE_KEYS = ("run_id", "candidate_ids", "speedup_before", "speedup_after", "device")
DEFAULT_PITFALL = ("Unreviewed: distilled automatically from one run. Check correctness and the "
                   "speedup on your own shapes before relying on it.")


def slugify(text: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    if not slug:
        raise ValueError(f"cannot make a skill name from {text!r}")
    return slug


def _conditions_dict(applies_when: Conditions | Mapping[str, Any]) -> dict[str, list[str]]:
    if isinstance(applies_when, Conditions):
        return applies_when.to_dict()
    if not isinstance(applies_when, Mapping):
        raise ValueError("applies_when must be a Conditions or a mapping of condition lists")
    unknown = set(applies_when) - set(CONDITION_FIELDS)
    if unknown:
        raise ValueError(f"applies_when has unknown keys {sorted(unknown)}; allowed: {', '.join(CONDITION_FIELDS)}")
    return Conditions(**dict(applies_when)).to_dict()


def _provenance(evidence: Mapping[str, Any]) -> dict[str, Any]:
    missing = [k for k in EVIDENCE_KEYS if k not in evidence]
    if missing:
        raise ValueError(f"evidence is missing {', '.join(missing)} (needs {', '.join(EVIDENCE_KEYS)})")
    provenance = {"source": "distilled", **dict(evidence)}
    ids = evidence["candidate_ids"]
    provenance["candidate_ids"] = [str(ids)] if isinstance(ids, (str, int)) else [str(c) for c in ids]
    provenance["created"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return provenance


def _taken_names(user_dir: Path) -> set[str]:
    """Names a new skill must not use: every file stem and declared name, built-in and user."""
    taken = set()
    for folder in (BUILTIN_DIR, user_dir):
        for path in folder.glob("*.md"):
            taken.add(path.stem)
            try:
                taken.add(load_skill(path).name)
            except SkillFormatError:
                pass  # a broken neighbour is reported by the loader, not by the writer
    return taken


def _render(meta: dict[str, Any], body: str) -> str:
    try:
        front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, default_flow_style=None)
    except yaml.YAMLError as exc:
        raise ValueError(f"skill front matter must hold plain str/int/float/list/dict values: {exc}") from None
    return f"---\n{front}---\n\n{body.strip()}\n"


def _body(title: str, when: str, steps: Iterable[str], pitfalls: Iterable[str], example_code: str,
          language: str, provenance: Mapping[str, Any]) -> str:
    numbered = "\n".join(f"{i}. {s.strip()}" for i, s in enumerate(steps, start=1))
    bullets = "\n".join(f"- {p.strip()}" for p in pitfalls)
    speedup = f"{provenance['speedup_before']} -> {provenance['speedup_after']}"
    return (
        f"## When\n\n{when.strip()}\n\n## Steps\n\n{numbered}\n\n## Pitfalls\n\n{bullets}\n\n"
        f"## Example\n\n```{language}\n{example_code.strip()}\n```\n\n"
        f"## Evidence\n\nRun `{provenance['run_id']}`, candidates "
        f"{', '.join(provenance['candidate_ids'])}, speedup {speedup} on {provenance['device']}.\n"
    )


def write_candidate_skill(user_dir: Path | str, *, name: str, title: str,
                          applies_when: Conditions | Mapping[str, Any], steps: Iterable[str],
                          evidence: Mapping[str, Any], example_code: str, when: str | None = None,
                          pitfalls: Iterable[str] | None = None, tags: Iterable[str] | None = None,
                          language: str = "python") -> Path:
    """Write an untrusted skill file and return its path; the file is validated before it lands."""
    user_dir = Path(user_dir)
    user_dir.mkdir(parents=True, exist_ok=True)
    steps = [s for s in steps if s and s.strip()]
    if not steps:
        raise ValueError("a candidate skill needs at least one step")
    provenance = _provenance(evidence)
    conditions = _conditions_dict(applies_when)
    body = _body(title, when or f"Found while optimising: {title}.", steps,
                 list(pitfalls or []) or [DEFAULT_PITFALL], example_code, language, provenance)
    base, taken = slugify(name), _taken_names(user_dir)
    for n in range(1, 1000):
        candidate = base if n == 1 else f"{base}-{n}"
        if candidate in taken:
            continue
        meta = {"name": candidate, "title": title, "applies_when": conditions,
                "tags": sorted({slugify(t) for t in (tags or [])} | {"distilled"}),
                "trusted": False, "provenance": provenance}
        text = _render(meta, body)
        path = user_dir / f"{candidate}.md"
        parse_skill(text, path)  # raises SkillFormatError before anything is written
        try:
            with open(path, "x", encoding="utf-8") as handle:  # "x": never overwrite, even racing
                handle.write(text)
        except FileExistsError:
            continue
        return path
    raise RuntimeError(f"no free skill name for {base!r} in {user_dir}")


def review(path: Path | str, reviewer: str | None = None) -> Skill:
    """Mark a candidate skill trusted after a person has read it; records who and when."""
    path = Path(path)
    load_skill(path)  # validates the whole file first, with a clear error naming it
    meta, body = split_front_matter(path.read_text(encoding="utf-8"), path)
    meta["trusted"] = True
    provenance = dict(meta.get("provenance") or {})
    provenance["reviewed_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    if reviewer:
        provenance["reviewed_by"] = reviewer
    meta["provenance"] = provenance
    text = _render(meta, body)
    skill = parse_skill(text, path)
    path.write_text(text, encoding="utf-8")
    return skill
