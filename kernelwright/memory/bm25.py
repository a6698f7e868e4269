"""A small Okapi BM25 index (k1=1.5, b=0.75) and the tokenizer shared by skills and trajectories.

Hand-written instead of a dependency because it is ~40 lines, the corpus is a few dozen documents,
and we want the tokenizer (code identifiers, kebab-case tags, light plural folding) under our control.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field

_TOKEN = re.compile(r"[a-z0-9]+(?:_[a-z0-9]+)*")
STOP_WORDS = frozenset(
    "a an and are as at be by can do does for from has have how i if in into is it its of on or so "
    "than that the then there these this to use used uses using was we were what when where which "
    "while with without you your".split()
)


def _fold(token: str) -> str:
    """Light plural folding so 'rows' finds 'row' and 'reductions' finds 'reduction'."""
    if len(token) > 4 and token.endswith("ies"):
        return token[:-3] + "y"
    if len(token) > 3 and token.endswith("s") and not token.endswith(("ss", "us", "is")):
        return token[:-1]
    return token


def tokenize(text: str) -> list[str]:
    """Lowercase word tokens; snake_case identifiers also yield their parts (`cp_async` -> cp, async)."""
    tokens: list[str] = []
    for match in _TOKEN.finditer(text.lower()):
        word = match.group(0)
        parts = word.split("_")
        candidates = [word] + parts if len(parts) > 1 else [word]
        tokens.extend(_fold(t) for t in candidates if t and t not in STOP_WORDS)
    return tokens


@dataclass
class BM25Index:
    documents: list[list[str]]
    k1: float = 1.5
    b: float = 0.75
    _counts: list[Counter] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._counts = [Counter(doc) for doc in self.documents]
        lengths = [len(doc) for doc in self.documents]
        self._lengths = lengths
        self._avg_length = (sum(lengths) / len(lengths)) if lengths else 0.0
        doc_freq: Counter = Counter()
        for counts in self._counts:
            doc_freq.update(counts.keys())
        n = len(self.documents)
        # Lucene's non-negative idf: a term in most documents still counts a little, never negatively.
        self._idf = {t: math.log(1 + (n - df + 0.5) / (df + 0.5)) for t, df in doc_freq.items()}

    def score(self, query_terms: list[str], doc: int) -> float:
        counts, length = self._counts[doc], self._lengths[doc]
        norm = self.k1 * (1 - self.b + self.b * length / self._avg_length) if self._avg_length else self.k1
        total = 0.0
        for term in set(query_terms):
            tf = counts.get(term, 0)
            if tf:
                total += self._idf[term] * tf * (self.k1 + 1) / (tf + norm)
        return total
