"""Rank skills for one prompt: by the problem's op kinds, the bottleneck and the plan.

`SkillLibrary.retrieve` answers a free-text query; a prompt needs more judgement than word overlap.
`rank_skills` orders every skill that may apply by evidence:

1. skills cited by the evidence (a profiler finding's `[tag]`, the Analyst's diagnosis, the plan)
   come first, in citation order;
2. the rest are filtered by their conditions (backend, GPU, data types, op kinds, the number of
   output tiles of the main product, and the bottleneck when it was measured) and scored: an explicit match of an op kind the problem executes, of the
   measured (or, before any measurement, the expected) bottleneck, of the run's backend and GPU,
   plus the text relevance (BM25, normalised) of the query text (plan, diagnosis, findings).

A skill pinned to nothing (all `any`) scores only by text, so it never outranks one written for
the problem at hand. The result is a ranking, not a cut: prompts take skills whole from the top
while they fit (agents/sections.skills), so the lowest-ranked are the ones dropped.
"""
from __future__ import annotations

from dataclasses import dataclass

from .bm25 import tokenize
from .skills import Conditions, Skill, SkillLibrary

W_OP, W_BOTTLENECK, W_EXPECTED, W_BACKEND, W_GPU, W_TEXT = 2.0, 1.5, 0.75, 1.0, 0.25, 1.0


@dataclass(frozen=True)
class SkillQuery:
    op_kinds: tuple[str, ...] = ()
    bottleneck: str | None = None  # measured: filters and scores
    expected_bottleneck: str | None = None  # from the speed-of-light floor before any measurement: scores only
    backend: str | None = None
    gpu: str | None = None  # "sm_90"; None on a CPU target (GPU-specific skills still apply to the code)
    dtypes: tuple[str, ...] = ()  # the problem's floating dtypes, e.g. ("float32",)
    tiles: str | None = None  # "few", "waves" or "many" output tiles of the main product (skills.TILES)
    text: str = ""  # plan, diagnosis, findings: what the prompt is about
    cited: tuple[str, ...] = ()  # skill names the evidence cites
    exclude: tuple[str, ...] = ()  # skills whose content the prompt already carries elsewhere


def rank_skills(library: SkillLibrary, query: SkillQuery, limit: int = 8) -> list[Skill]:
    """At most `limit` skills, best first (see the module docstring)."""
    usable = [s for s in library.skills if s.trusted and s.name not in query.exclude and _fits_run(s, query)]
    by_name = {s.name: s for s in usable}
    cited = [by_name[name] for name in dict.fromkeys(query.cited) if name in by_name]
    conditions = Conditions(op_kinds=list(query.op_kinds) or None, bottleneck=query.bottleneck,
                            backend=query.backend, gpu=query.gpu, dtypes=list(query.dtypes) or None,
                            tiles=query.tiles)
    rest = [s for s in usable if s not in cited and s.applies_when.matches(conditions)]
    text = _text_scores(library, query.text, rest)
    scored = sorted(rest, key=lambda s: (-_score(s, query, text.get(s.name, 0.0)), s.name))
    return (cited + scored)[:limit]


def _fits_run(skill: Skill, query: SkillQuery) -> bool:
    """Backend, GPU and data types must fit even for a cited skill (a CUDA-only skill cannot help a
    Triton run, a bf16 skill an fp32 problem)."""
    only = Conditions(backend=query.backend, gpu=query.gpu, dtypes=list(query.dtypes) or None)
    own = skill.applies_when
    return Conditions(backend=own.backend, gpu=own.gpu, dtypes=own.dtypes).matches(only)


def _explicit(values: frozenset[str], wanted) -> bool:
    wanted = {w for w in wanted if w}
    return bool(wanted & (values - {"any"}))


#: kinds that carry a problem's FLOPs; beside one of them, the cheap side kinds are its prologue and
#: epilogue (a norm is not: its statistics span tiles and shape the product's kernel)
PRODUCT_KINDS = frozenset({"matmul", "conv", "conv_transpose", "attention", "rnn"})
SIDE_KINDS = frozenset({"elementwise", "reduction", "softmax", "pool"})


def _op_score(skill: Skill, op_kinds) -> float:
    """For each op kind of the problem the skill names: W_OP for its main (first listed) kind, half
    for the second, a quarter for a later one; 0 for a skill that only says `any`. A skill naming
    several of the problem's kinds (a GEMM with its elementwise epilogue) adds them up. A kind far
    down the list of a skill that does not also say `any` counts only in such company (epilogue
    fusion is not about a lone ReLU; vectorised access, which says `any`, is about a lone pool).
    Beside a matrix product (PRODUCT_KINDS) in the problem, hits on SIDE_KINDS count half."""
    listed = getattr(skill.applies_when, "op_order", ())
    order = [k for k in listed if k != "any"]
    hits = [i for i, kind in enumerate(order) if kind in set(op_kinds)]
    alone_ok = "any" in listed or len(hits) > 1
    # where the problem has a matrix product, hits on its cheap side ops (elementwise, reductions,
    # softmax, pooling) count half: the product is where the time goes
    side = 0.5 if PRODUCT_KINDS & set(op_kinds) else 1.0
    return sum(W_OP / (2 ** min(i, 2)) * (side if order[i] in SIDE_KINDS else 1.0)
               for i in hits if i < 2 or alone_ok)


def _bottleneck_score(skill: Skill, query: SkillQuery) -> float:
    """A measured bottleneck the skill names scores W_BOTTLENECK (other skills were filtered out);
    before any measurement, the expected bound scores W_EXPECTED, and a skill written only for
    other bottlenecks loses as much."""
    named = skill.applies_when.bottleneck
    if query.bottleneck:
        return W_BOTTLENECK if _explicit(named, [query.bottleneck]) else 0.0
    if not query.expected_bottleneck or "any" in named:
        return 0.0
    return W_EXPECTED if query.expected_bottleneck in named else -W_EXPECTED


def _score(skill: Skill, query: SkillQuery, text: float) -> float:
    when = skill.applies_when
    score = W_TEXT * text + _op_score(skill, query.op_kinds) + _bottleneck_score(skill, query)
    if query.backend and when.backend == {query.backend}:
        score += W_BACKEND
    if query.gpu and _explicit(when.gpu, [query.gpu]):
        score += W_GPU
    return score


def _text_scores(library: SkillLibrary, text: str, skills: list[Skill]) -> dict[str, float]:
    """BM25 of `text` per skill, divided by the best score (0..1)."""
    terms = tokenize(text or "")
    if not terms or not skills:
        return {}
    raw = {s.name: library.text_score(terms, s.name) for s in skills}
    top = max(raw.values(), default=0.0)
    return {name: value / top for name, value in raw.items()} if top > 0 else {}
