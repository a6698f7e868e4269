"""Skill citations in a prompt point only at skills the prompt shows.

Skills, profiler findings, plans and diagnoses name skills: `[name]` (a citation the model may
repeat) and, inside skill files, `` `name` `` cross-references. A prompt shows only a few skills
(ranked, filtered by backend, cut by the budget), so a name it does not show would send the model
looking for text that is not there. After the sections are chosen, `resolve` rewrites every
mention of a known skill outside code blocks:

- a mention of a shown skill becomes the citation `[name]`;
- a reference-only parenthetical, `(see `a`)`, `(`a`, `b`)`, or a closing clause `(..., see `a`)`
  keeps its shown names and disappears when none is shown (skill files write every cross-reference
  that way; a test checks it);
- a run of trailing tags (`... — vectorise. [a][b]`, as findings and plan steps end) loses the
  tags of skills not shown;
- any other mention of a skill not shown becomes its name in plain words ("split k"), so the text
  still reads and names nothing the model could look up.

Known skills are the library's names (the engine passes them as `ctx.extra["skill_titles"]`) and
the skills of the context; a bracketed word that names no skill (`[BLOCK_W]`, `x[0]`) is left alone.
"""
from __future__ import annotations

import re
from typing import Iterable

_NAME = r"[a-z0-9]+(?:-[a-z0-9]+)*"
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_HEADING = re.compile(rf"^#{{1,6}} \[({_NAME})\]", re.MULTILINE)
_PAREN = re.compile(rf" ?\((?:see )?`{_NAME}`(?:(?:, | and | or |, and )`{_NAME}`)*\)")
_CLAUSE = re.compile(rf"[,;] see `{_NAME}`(?:(?:, | and | or |, and )`{_NAME}`)*(?=\))")
_TICKED = re.compile(rf"`({_NAME})`")
_TAG = re.compile(rf"\[({_NAME})\]")
_TRAILING_TAGS = re.compile(rf"(?:\s*\[{_NAME}\])+\s*$")


def shown_skills(text: str) -> list[str]:
    """Names of the skills a prompt shows: its `## [name] title` headings, in order."""
    return list(dict.fromkeys(_HEADING.findall(text)))


def mentioned(text: str, known: Iterable[str]) -> set[str]:
    """Known skill names mentioned outside code blocks, as `[name]` or `` `name` ``."""
    names = set(known)
    found: set[str] = set()
    for line in _prose_lines(text):
        found |= {n for n in _TAG.findall(line) + _TICKED.findall(line) if n in names}
    return found


def resolve(text: str, shown: Iterable[str], known: Iterable[str]) -> str:
    """`text` with every mention of a known skill pointing only at the `shown` ones (see the module
    docstring); code blocks are left as they are."""
    shown, known = set(shown), set(known) | set(shown)
    if not known or not text:
        return text
    out, fenced = [], False
    for line in text.split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
            out.append(line)
            continue
        if fenced:
            out.append(line)
            continue
        resolved = _resolve_line(line, shown, known)
        body = resolved.lstrip()
        if resolved != line and out and body[:1] in (".", ",", ";", ":") and line.lstrip().startswith("("):
            out[-1] = out[-1].rstrip() + body[0]  # a reference that opened the line went: its punctuation joins the line above
            body = body[1:].strip()
            if not body:
                continue
            resolved = resolved[: len(resolved) - len(resolved.lstrip())] + body
        out.append(resolved)
    return "\n".join(out)


def _prose_lines(text: str):
    fenced = False
    for line in text.split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            yield line


def _resolve_line(line: str, shown: set[str], known: set[str]) -> str:
    def parenthetical(match: re.Match) -> str:
        names = _TICKED.findall(match.group(0))
        if not any(n in known for n in names):
            return match.group(0)  # backticked words that name no skill: not a reference
        kept = [n for n in names if n in shown]
        if not kept:
            return ""
        lead = " " if match.group(0).startswith(" ") else ""
        return f"{lead}({', '.join(f'[{n}]' for n in kept)})"

    def clause(match: re.Match) -> str:  # "(..., see `a`)": the clause goes when `a` is not shown
        names = _TICKED.findall(match.group(0))
        if not any(n in known for n in names):
            return match.group(0)
        kept = [n for n in names if n in shown]
        return f"{match.group(0)[0]} see {', '.join(f'[{n}]' for n in kept)}" if kept else ""

    line = _CLAUSE.sub(clause, _PAREN.sub(parenthetical, line))
    trailing = _TRAILING_TAGS.search(line)
    if trailing:
        tags = _TAG.findall(trailing.group(0))
        if any(t in known for t in tags):
            kept = [t for t in tags if t not in known or t in shown]
            line = line[: trailing.start()] + (" " + "".join(f"[{t}]" for t in kept) if kept else "")
    line = _TICKED.sub(lambda m: _mention(m.group(1), m.group(0), shown, known), line)
    return _TAG.sub(lambda m: _mention(m.group(1), m.group(0), shown, known), line)


def _mention(name: str, original: str, shown: set[str], known: set[str]) -> str:
    if name not in known:
        return original
    return f"[{name}]" if name in shown else name.replace("-", " ")
