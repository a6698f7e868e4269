"""Long-term memory: the skill library.

A skill is a Markdown file with YAML front matter (see docs/skills.md). Skills are loaded from the
built-in folder shipped with the package plus any user folders, filtered by the conditions they
apply to (op kind, bottleneck, backend, GPU generation) and ranked against a free-text query.

Ranking is BM25 (Okapi) by default because it needs nothing beyond the stdlib and is predictable;
when `sentence_transformers` and a locally installed model are available, embedding similarity is
fused with BM25 (reciprocal rank fusion) so neither signal can bury an exact keyword hit.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import yaml

from kernelwright.memory.bm25 import BM25Index, tokenize
from kernelwright.memory.embeddings import cosine, local_encoder

OP_KINDS = frozenset(
    {"matmul", "conv", "conv_transpose", "softmax", "norm", "reduction", "elementwise", "pool",
     "attention", "scan", "rnn", "any"}
)
BOTTLENECKS = frozenset({"memory", "compute", "latency", "launch", "host", "any"})
BACKENDS = frozenset({"cuda", "triton", "any"})
DTYPES = frozenset({"float32", "float16", "bfloat16", "float64", "any"})
# how many output tiles (128 x 128) the problem's main matrix product has against the SM count:
# under one wave, one to four waves (the last wave's idle share matters), more
TILES = frozenset({"few", "waves", "many", "any"})
GPU_PATTERN = re.compile(r"^(sm_\d{2,3}a?|any)$")
NAME_PATTERN = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
REQUIRED_SECTIONS = ("When", "Steps", "Pitfalls", "Example")
CONDITION_FIELDS = ("op_kinds", "bottleneck", "backend", "gpu", "dtypes", "tiles", "with_kinds")
OPTIONAL_CONDITIONS = ("dtypes", "tiles", "with_kinds")  # may be left out of a skill file (then: any)

BUILTIN_DIR = Path(__file__).resolve().parent / "skills"

# An encoder turns texts into vectors; injected so the embedding path is testable without a model.
Encoder = Callable[[list[str]], Sequence[Sequence[float]]]


class SkillFormatError(ValueError):
    """A skill file is malformed; the message names the file and what is wrong."""


def _as_frozenset(values: str | Iterable[str] | None) -> frozenset[str]:
    if values is None:
        return frozenset({"any"})
    if isinstance(values, str):
        values = [values]
    cleaned = frozenset(str(v).strip().lower() for v in values if str(v).strip())
    return cleaned or frozenset({"any"})


@dataclass(frozen=True, init=False)
class Conditions:
    """Where a skill applies, or what a query is about. `any` (or an empty list) matches everything.

    Query conditions may hold values outside the known vocabularies (e.g. a new op kind reported by
    the problem loader): such a value simply matches only skills that say `any`.
    """

    op_kinds: frozenset[str] = frozenset({"any"})
    bottleneck: frozenset[str] = frozenset({"any"})
    backend: frozenset[str] = frozenset({"any"})
    gpu: frozenset[str] = frozenset({"any"})
    dtypes: frozenset[str] = frozenset({"any"})  # the data types a skill is about (e.g. float16, bfloat16)
    tiles: frozenset[str] = frozenset({"any"})  # few / waves / many output tiles of the main product
    # a skill about one op beside another (a norm next to a product): the problem must also have one
    # of these kinds; matched against the query's op_kinds, never asked by a query itself
    with_kinds: frozenset[str] = frozenset({"any"})

    def __init__(self, op_kinds=None, bottleneck=None, backend=None, gpu=None, dtypes=None, tiles=None,
                 with_kinds=None):
        object.__setattr__(self, "op_kinds", _as_frozenset(op_kinds))
        # the op kinds in the order written (a skill lists its main kind first); not compared
        listed = [op_kinds] if isinstance(op_kinds, str) else list(op_kinds or [])
        object.__setattr__(self, "op_order", tuple(dict.fromkeys(str(v).strip().lower() for v in listed)))
        object.__setattr__(self, "bottleneck", _as_frozenset(bottleneck))
        object.__setattr__(self, "backend", _as_frozenset(backend))
        object.__setattr__(self, "gpu", _as_frozenset(gpu))
        object.__setattr__(self, "dtypes", _as_frozenset(dtypes))
        object.__setattr__(self, "tiles", _as_frozenset(tiles))
        object.__setattr__(self, "with_kinds", _as_frozenset(with_kinds))

    def matches(self, query: "Conditions") -> bool:
        """True when every dimension intersects (`any` on either side matches all)."""
        for name in CONDITION_FIELDS:
            mine = getattr(self, name)
            theirs = getattr(query, "op_kinds" if name == "with_kinds" else name)
            if "any" in mine or "any" in theirs:
                continue
            if not mine & theirs:
                return False
        return True

    def specificity(self) -> int:
        """How many dimensions are pinned down; used to break ranking ties toward focused skills."""
        return sum("any" not in getattr(self, name) for name in CONDITION_FIELDS)

    def to_dict(self) -> dict[str, list[str]]:
        return {name: sorted(getattr(self, name)) for name in CONDITION_FIELDS}


@dataclass(frozen=True)
class Skill:
    name: str
    title: str
    applies_when: Conditions
    tags: tuple[str, ...]
    body: str
    path: Path | None = None
    trusted: bool = True
    provenance: dict[str, Any] | None = field(default=None, compare=False, hash=False)

    def section(self, heading: str) -> str:
        """Text under `## heading` (without the heading), or '' when absent."""
        return _sections(self.body).get(heading.strip().lower(), "")

    def search_text(self) -> str:
        """Text indexed for ranking: identity fields repeated so they weigh more than the body."""
        identity = " ".join([self.name.replace("-", " "), self.title, " ".join(self.tags)])
        return " ".join([identity] * 3 + [self.body])

    def to_prompt(self, compact: bool = False) -> str:
        """Markdown for an agent prompt, headed by the id agents cite (`[name]`).

        compact=True keeps only the steps, for prompts that are short of room.
        """
        if compact:
            text = f"**Steps**\n{self.section('Steps')}"
        else:  # demote `## When` to a bold label so the skill nests under the prompt's headings
            text = re.sub(r"^## (.+)$", r"**\1**", self.body.strip(), flags=re.M)
        return f"### [{self.name}] {self.title}\n\n{text}\n"


def _as_conditions(value: "Conditions | Mapping[str, Any] | None") -> Conditions:
    if value is None:
        return Conditions()
    if isinstance(value, Conditions):
        return value
    if isinstance(value, Mapping) and set(value) <= set(CONDITION_FIELDS):
        return Conditions(**value)
    raise TypeError(f"conditions must be a Conditions or a mapping with keys {CONDITION_FIELDS}, got {value!r}")


def _sections(body: str) -> dict[str, str]:
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    in_fence = False
    for line in body.splitlines():
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        if not in_fence and line.startswith("## "):
            current = sections.setdefault(line[3:].strip().lower(), [])
            continue
        if current is not None:
            current.append(line)
    return {k: "\n".join(v).strip() for k, v in sections.items()}


def split_front_matter(text: str, path: Path | str) -> tuple[dict[str, Any], str]:
    """Return (front matter mapping, body); raise SkillFormatError naming `path` when malformed."""
    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise SkillFormatError(f"{path}: a skill file must start with a '---' front matter line")
    for end, line in enumerate(lines[1:], start=1):  # noqa: B007 -- `end` is read after the loop
        if line.strip() == "---":
            break
    else:
        raise SkillFormatError(f"{path}: front matter is not closed by a '---' line")
    try:
        meta = yaml.safe_load("".join(lines[1:end]))
    except yaml.YAMLError as exc:
        raise SkillFormatError(f"{path}: front matter is not valid YAML: {exc}") from None
    if not isinstance(meta, dict):
        raise SkillFormatError(f"{path}: front matter must be a YAML mapping")
    return meta, "".join(lines[end + 1:])


def _string_list(meta: dict, key: str, path, allowed=None, pattern=None) -> list[str]:
    values = meta.get(key)
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        raise SkillFormatError(f"{path}: '{key}' must be a non-empty list of strings")
    for value in values:
        if allowed is not None and value not in allowed:
            raise SkillFormatError(
                f"{path}: '{key}' has unknown value {value!r}; allowed: {', '.join(sorted(allowed))}")
        if pattern is not None and not pattern.match(value):
            raise SkillFormatError(f"{path}: '{key}' value {value!r} must match {pattern.pattern}")
    return values


def _parse_conditions(raw: Any, path) -> Conditions:
    if not isinstance(raw, dict):
        raise SkillFormatError(f"{path}: 'applies_when' must be a mapping with {CONDITION_FIELDS}")
    unknown = set(raw) - set(CONDITION_FIELDS)
    if unknown:
        raise SkillFormatError(f"{path}: 'applies_when' has unknown keys {sorted(unknown)}")
    checks = {"op_kinds": (OP_KINDS, None), "bottleneck": (BOTTLENECKS, None),
              "backend": (BACKENDS, None), "gpu": (None, GPU_PATTERN), "dtypes": (DTYPES, None),
              "tiles": (TILES, None), "with_kinds": (OP_KINDS, None)}
    values = {}
    for key, (allowed, pattern) in checks.items():
        if key not in raw and key in OPTIONAL_CONDITIONS:
            continue
        if key not in raw:
            raise SkillFormatError(f"{path}: 'applies_when' is missing '{key}'")
        values[key] = _string_list(raw, key, f"{path}: applies_when", allowed, pattern)
    return Conditions(**values)


def parse_skill(text: str, path: Path | str | None = None) -> Skill:
    """Parse and validate one skill file's text; every error names the file."""
    where = path or "<skill text>"
    meta, body = split_front_matter(text, where)
    known = {"name", "title", "applies_when", "tags", "trusted", "provenance"}
    unknown = set(meta) - known
    if unknown:
        raise SkillFormatError(f"{where}: unknown front matter keys {sorted(unknown)}")
    name = meta.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise SkillFormatError(f"{where}: 'name' must be a kebab-case id like 'vectorized-access'")
    title = meta.get("title")
    if not isinstance(title, str) or not title.strip():
        raise SkillFormatError(f"{where}: 'title' must be a non-empty string")
    tags = _string_list(meta, "tags", where, pattern=NAME_PATTERN)
    trusted = meta.get("trusted", True)
    if not isinstance(trusted, bool):
        raise SkillFormatError(f"{where}: 'trusted' must be true or false")
    provenance = meta.get("provenance")
    if provenance is not None and not isinstance(provenance, dict):
        raise SkillFormatError(f"{where}: 'provenance' must be a mapping")
    sections = _sections(body)
    missing = [s for s in REQUIRED_SECTIONS if not sections.get(s.lower())]
    if missing:
        raise SkillFormatError(f"{where}: missing or empty sections: {', '.join('## ' + s for s in missing)}")
    return Skill(name=name, title=title.strip(), applies_when=_parse_conditions(meta.get("applies_when"), where),
                 tags=tuple(tags), body=body.strip() + "\n", path=Path(path) if path else None,
                 trusted=trusted, provenance=provenance)


def load_skill(path: Path) -> Skill:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SkillFormatError(f"{path}: cannot read skill file: {exc}") from None
    return parse_skill(text, path)


@dataclass
class SkillLibrary:
    skills: list[Skill]
    encoder: Encoder | None = None
    _index: BM25Index = field(init=False, repr=False)
    _by_name: dict[str, Skill] = field(init=False, repr=False)
    _vectors: list[list[float]] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        seen: dict[str, Skill] = {}
        for skill in self.skills:
            if skill.name in seen:
                raise SkillFormatError(
                    f"duplicate skill name {skill.name!r} in {seen[skill.name].path} and {skill.path}")
            seen[skill.name] = skill
        self._by_name = seen
        self._index = BM25Index([tokenize(s.search_text()) for s in self.skills])

    @classmethod
    def load(cls, dirs: Iterable[Path | str] = (), *, builtin: bool = True,
             encoder: Encoder | None | str = "auto") -> "SkillLibrary":
        """Load the built-in skills (unless builtin=False) and every `*.md` in `dirs`.

        encoder="auto" uses a local sentence-transformers model when one is installed, else BM25.
        """
        if isinstance(dirs, (str, Path)):
            dirs = [dirs]
        folders = ([BUILTIN_DIR] if builtin else []) + [Path(d).expanduser() for d in dirs]
        skills, seen_dirs = [], set()
        for folder in folders:
            resolved = folder.resolve()
            if resolved in seen_dirs:
                continue
            seen_dirs.add(resolved)
            if not folder.is_dir():
                raise SkillFormatError(f"{folder}: skill folder does not exist")
            skills.extend(load_skill(p) for p in sorted(folder.glob("*.md")))
        if encoder == "auto":
            encoder = local_encoder()
        return cls(skills, encoder=encoder)

    def __len__(self) -> int:
        return len(self.skills)

    def names(self) -> frozenset[str]:
        return frozenset(self._by_name)

    def get(self, name: str) -> Skill | None:
        return self._by_name.get(name)

    def text_score(self, terms: list[str], name: str) -> float:
        """BM25 score of tokenized `terms` for the skill `name` (0 for an unknown name)."""
        skill = self._by_name.get(name)
        return self._index.score(terms, self.skills.index(skill)) if skill is not None else 0.0

    def untrusted(self) -> list[Skill]:
        """Candidate skills waiting for a person's review (what `review()` is for)."""
        return [s for s in self.skills if not s.trusted]

    def retrieve(self, query: str, conditions: Conditions | None = None, k: int = 5,
                 include_untrusted: bool = False) -> list[Skill]:
        """Skills whose conditions match, best first; at most k.

        With a non-empty query only skills sharing at least one term are returned (so unrelated
        skills never pad a prompt). An empty query returns matching skills, most specific first.
        """
        conditions = _as_conditions(conditions)
        candidates = [i for i, s in enumerate(self.skills)
                      if (s.trusted or include_untrusted) and s.applies_when.matches(conditions)]
        terms = tokenize(query or "")
        if not terms:
            candidates.sort(key=lambda i: (-self.skills[i].applies_when.specificity(), self.skills[i].name))
            return [self.skills[i] for i in candidates[:k]]
        scores = {i: self._index.score(terms, i) for i in candidates}
        ranked = [i for i in sorted(candidates, key=lambda i: self._tie_key(scores[i], i)) if scores[i] > 0]
        if self.encoder is not None and ranked:
            ranked = self._fuse_with_embeddings(query, ranked)
        return [self.skills[i] for i in ranked[:k]]

    def _tie_key(self, score: float, i: int):
        skill = self.skills[i]
        return (-score, -skill.applies_when.specificity(), skill.name)

    def _fuse_with_embeddings(self, query: str, ranked: list[int]) -> list[int]:
        """Reciprocal rank fusion of BM25 order and cosine order (k=60, the usual constant)."""
        try:
            if self._vectors is None:
                self._vectors = [list(v) for v in self.encoder([s.search_text() for s in self.skills])]
            query_vec = list(self.encoder([query])[0])
        except Exception:  # noqa: BLE001 -- a broken model must not break retrieval: keep the BM25 order
            return ranked
        by_cosine = sorted(ranked, key=lambda i: -cosine(query_vec, self._vectors[i]))
        fused = {i: 1 / (60 + r) for r, i in enumerate(ranked)}
        for r, i in enumerate(by_cosine):
            fused[i] += 1 / (60 + r)
        return sorted(ranked, key=lambda i: (-fused[i], self.skills[i].name))


def format_skills(skills: Iterable[Skill], max_chars: int = 6000) -> str:
    """Skills as one Markdown block for a prompt, within `max_chars`.

    A skill that does not fit whole is shown compactly (title and steps); if even that does not
    fit, it and the rest are left out. Order is kept, so the best-ranked skills survive the cut.
    """
    parts, used = [], 0
    for skill in skills:
        for text in (skill.to_prompt(), skill.to_prompt(compact=True)):
            if used + len(text) + 1 <= max_chars:
                parts.append(text)
                used += len(text) + 1
                break
        else:
            break
    return "\n".join(parts)


def builtin_library() -> SkillLibrary:
    """The built-in skills only, ranked with BM25 (no model loading): cheap and deterministic."""
    return SkillLibrary.load((), builtin=True, encoder=None)


def skill_tags(dirs: Iterable[Path | str] = ()) -> frozenset[str]:
    """Skill names that other code may cite as tags, e.g. `[vectorized-access]` in a finding."""
    return SkillLibrary.load(dirs, encoder=None).names()
