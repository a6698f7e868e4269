"""What ncu collects, derived from what the profile's readers read: nothing else is requested.

The readers are the bottleneck classification (`classify.py`), the findings (`findings.py`), the
CSV parser's derived fields (`parse.py`: duration, registers, shared memory), the comparison with the
reference's kernels (`reference.py`) and the stall hot spots (`hotspots.py`, which reads the source page). Their metric reads are short keys of
`metrics.ALIASES` written as string literals (`p.get("dram_pct")`, a tuple of `occ_limit_*` keys)
or f-strings over a prefix (`p.get(f"stall_{r}")`), so the keys are found by scanning the readers'
syntax trees: every string constant that is a key, and every f-string's constant prefix widened to
the keys that start with it. Adding a rule that reads a new key adds its metric to the collection;
a key no rule reads is not collected. tests/profile/test_needs.py replays every recorded and
hand-written case with a recording `KernelProfile.get` and checks that no key read at run time is
missing from this set.

Keys that arrive only with a section (launch and occupancy attributes, `metrics.SECTION_KEYS`) bring
their section; the others are counters passed to `--metrics`. The source page needs PC sampling
(`hotspots.SOURCE_METRICS`): one sampling pass, no SASS patching.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from . import classify, findings, hotspots, parse, reference
from .metrics import ALIASES, counters_for, sections_for

READERS = (classify, findings, parse, reference)  # modules whose metric reads decide the counters and sections
SOURCE_COUNTERS = "SourceCounters"  # the section that also gives the source page (with SASS patching)


@dataclass(frozen=True)
class Collection:
    """One ncu collection: the sections, the counters (filtered against `--query-metrics`) and the
    source-page metrics (never filtered: PC-sampling names are not in that list)."""

    sections: tuple[str, ...]
    counters: tuple[str, ...]
    source_metrics: tuple[str, ...]
    keys: tuple[str, ...]  # the short keys behind sections and counters


def _literal_keys(tree: ast.AST) -> set[str]:
    keys: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in ALIASES:
            keys.add(node.value)
        elif isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
            prefix = str(node.values[0].value)
            if len(node.values) > 1 and prefix:
                keys.update(k for k in ALIASES if k.startswith(prefix))
    return keys


def keys_in_source(source: str) -> set[str]:
    """The `metrics.ALIASES` keys a module's source reads (see the module docstring)."""
    return _literal_keys(ast.parse(source))


@lru_cache(maxsize=1)
def keys_read() -> tuple[str, ...]:
    """The keys the readers read, in `metrics.ALIASES` order. A reader whose source cannot be read (an
    install without .py files) makes the whole catalog count: collecting too much is safe, too little is not."""
    found: set[str] = set()
    for module in READERS:
        try:
            found |= keys_in_source(Path(module.__file__).read_text())
        except (OSError, TypeError, SyntaxError):
            return tuple(ALIASES)
    return tuple(k for k in ALIASES if k in found)


def collection(source_counters: bool = False) -> Collection:
    """What one collection requests. `source_counters`: take the source page from the SourceCounters
    section (the recorded, proven route; it adds SASS patching) instead of PC-sampling metrics alone."""
    keys = keys_read()
    sections = sections_for(keys) + ([SOURCE_COUNTERS] if source_counters else [])
    source = () if source_counters else hotspots.SOURCE_METRICS
    return Collection(tuple(sections), tuple(counters_for(keys)), tuple(source), keys)
