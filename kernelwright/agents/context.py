"""Dynamic context: fit the sections of a prompt under a token budget, most important first.

An agent turns an AgentContext into `Section`s, each with a priority. `fit_sections` keeps every
required section (cutting trimmable ones if it must), then adds the others in priority order:
whole when they fit, cut when a cut is still worth reading, dropped otherwise. What happened to
each section is recorded in a `ContextReport` that travels in the request's metadata, so the
store shows why a prompt looked the way it did.

Tokens are estimated with tiktoken when it is installed (and its encoding is available offline),
else as characters / 4: a budget is a guard against runaway prompts, not an exact bill.
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import asdict, dataclass, field
from typing import Callable

REQUIRED = 0  # priority of sections a prompt cannot do without
TRIM_MODES = ("none", "head", "tail", "middle")
MARKER = "\n… [{n} characters trimmed to fit the context budget] …\n"
FENCE_FIX = "```\n"
_FENCE_LINE = re.compile(r"^ {0,3}(?:```|~~~)", re.MULTILINE)


@functools.lru_cache(maxsize=1)
def _encoder():
    try:
        import tiktoken  # noqa: PLC0415 -- tiktoken is optional (not a dependency): without it prompts are measured at 4 characters a token

        return tiktoken.get_encoding("cl100k_base")
    except Exception:  # noqa: BLE001 -- not installed, or its encoding file cannot be fetched offline
        return None


def estimator_name() -> str:
    return "tiktoken:cl100k_base" if _encoder() is not None else "chars/4"


def estimate_tokens(text: str) -> int:
    """Token count of `text` (tiktoken if usable, else ceil(chars / 4))."""
    if not text:
        return 0
    encoder = _encoder()
    if encoder is not None:
        return len(encoder.encode(text, disallowed_special=()))
    return math.ceil(len(text) / 4)


def trim_text(text: str, max_chars: int, mode: str) -> str:
    """Cut `text` to at most `max_chars` (marker included), preferring line boundaries.

    head keeps the start (documents, lists ordered by importance), tail keeps the end (a Python
    traceback ends with the error), middle keeps both ends (a compile log starts with the first
    error and ends with the summary).
    """
    if mode not in TRIM_MODES:
        raise ValueError(f"unknown trim mode {mode!r}; expected one of {TRIM_MODES}")
    if len(text) <= max_chars or mode == "none":
        return text
    # room for the longest marker it can need and for re-balancing two code fences
    room = max(0, max_chars - len(MARKER.format(n=len(text))) - 2 * len(FENCE_FIX) - 1)
    head_room = {"head": room, "tail": 0, "middle": room * 2 // 5}[mode]
    head = _cut_head(text, head_room)
    tail = _cut_tail(text, room - head_room)
    marker = MARKER.format(n=len(text) - len(head) - len(tail))
    # a cut inside a ``` block would leave the rest of the prompt inside it: close and reopen
    if mode != "tail" and _open_fence(head):
        lines = head.rstrip("\n").split("\n")
        if _FENCE_LINE.match(lines[-1]):  # cut right after an opening fence: drop it, nothing to show
            head = "\n".join(lines[:-1]) + "\n"
        else:
            head = head + ("" if head.endswith("\n") else "\n") + FENCE_FIX
    if mode != "head" and tail and _open_fence(text[: len(text) - len(tail)]):
        tail = FENCE_FIX + tail
    return head + marker + tail  # head or tail is '' when the mode keeps only one end


def _open_fence(text: str) -> bool:
    """True when the end of `text` lies inside a code fence (an odd number of fence lines before it)."""
    return len(_FENCE_LINE.findall(text)) % 2 == 1


def _cut_head(text: str, room: int) -> str:
    if room <= 0:
        return ""
    cut = text[:room]
    newline = cut.rfind("\n")
    return cut[: newline + 1] if newline >= room // 2 else cut


def _cut_tail(text: str, room: int) -> str:
    if room <= 0:
        return ""
    cut = text[-room:]
    newline = cut.find("\n")
    return cut[newline + 1:] if 0 <= newline <= room // 2 else cut


def _as_is(body: str) -> str:
    return body


@dataclass
class Section:
    """One block of a prompt.

    `body` is the part that may be cut; `frame` renders the block around a (possibly cut) body,
    so a heading or a code fence survives a cut. Sections sharing a `group` are joined in order
    (e.g. one section per retrieved skill, shown as one "Skills" block).
    """

    name: str
    priority: int
    body: str
    frame: Callable[[str], str] = field(default=_as_is)
    trim: str = "head"
    min_chars: int = 400
    group: str = ""
    note: str = ""  # e.g. "pre-cut to 6000 chars", reported alongside the section
    chain: bool = False  # ranked: once one of its group is dropped, the group's later ones are too

    def __post_init__(self) -> None:
        if self.trim not in TRIM_MODES:
            raise ValueError(f"section {self.name!r}: unknown trim mode {self.trim!r}")
        self.group = self.group or self.name

    @property
    def required(self) -> bool:
        return self.priority == REQUIRED


@dataclass
class ContextReport:
    """What went into a prompt: stored with the request so a person can audit the choice."""

    budget: int
    estimator: str
    fixed_tokens: int = 0
    used_tokens: int = 0
    included: list[str] = field(default_factory=list)
    truncated: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    over_budget: bool = False
    notes: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Fitted:
    """The chosen text per group (in section order) plus the report."""

    texts: dict[str, str]
    report: ContextReport


def _fit_one(section: Section, available: int) -> tuple[str, bool] | None:
    """(text, was_cut) for `section` within `available` tokens, or None when it does not fit."""
    full = section.frame(section.body)
    if estimate_tokens(full) <= available:
        return full, False
    if section.trim == "none":
        return None
    frame_cost = estimate_tokens(section.frame("")) + estimate_tokens(MARKER.format(n=len(section.body)))
    room_chars = (available - frame_cost) * 4
    while room_chars >= (section.min_chars if not section.required else 1):
        text = section.frame(trim_text(section.body, room_chars, section.trim))
        if estimate_tokens(text) <= available:
            return text, True
        room_chars = int(room_chars * 0.85) - 1
    return None


def _smallest_cut(section: Section) -> str:
    """A required section that cannot fit still goes in, cut to its minimum."""
    if section.trim == "none":
        return section.frame(section.body)
    return section.frame(trim_text(section.body, section.min_chars, section.trim))


def fit_sections(sections: list[Section], budget: int, fixed_tokens: int = 0) -> Fitted:
    """Choose and cut sections so that fixed_tokens + chosen sections <= budget where possible."""
    report = ContextReport(budget=budget, estimator=estimator_name(), fixed_tokens=fixed_tokens)
    available = budget - fixed_tokens
    chosen: dict[int, str] = {}
    broken: set[str] = set()  # chained groups in which a section was dropped
    order = sorted(range(len(sections)), key=lambda i: (sections[i].priority, i))
    for i in order:
        section = sections[i]
        if section.chain and section.group in broken and not section.required:
            report.dropped.append(section.name)
            continue
        fitted = _fit_one(section, available)
        if fitted is None and section.required:
            fitted = (_smallest_cut(section), section.trim != "none")
            report.over_budget = True
        if fitted is None:
            report.dropped.append(section.name)
            if section.chain:
                broken.add(section.group)
            continue
        text, cut = fitted
        chosen[i] = text
        available -= estimate_tokens(text)
        if cut:
            report.truncated.append(section.name)
        if section.note:
            report.notes[section.name] = section.note
    report.included = [sections[i].name for i in sorted(chosen)]
    report.used_tokens = budget - available
    report.over_budget = report.over_budget or report.used_tokens > budget
    texts: dict[str, str] = {}
    for i in sorted(chosen):
        group = sections[i].group
        texts[group] = (texts[group] + "\n" + chosen[i]) if group in texts else chosen[i]
    return Fitted(texts=texts, report=report)
