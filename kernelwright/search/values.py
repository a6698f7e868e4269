"""The value of a candidate: correctness-gated speedup, squashed into [0, 1).

    value = 0                   when the candidate failed (wrong, crashed, rejected, unusable)
    value = s / (1 + s)         when it passed with speedup s over the objective baseline

Why this form: UCT's exploration term assumes values on a bounded scale, and a raw speedup is
unbounded (one 40x outlier would swamp every comparison). s/(1+s) is monotone, maps the
reference (s = 1) to 0.5, a 2x candidate to 0.67, a 0.5x one to 0.33, and keeps every correct
candidate strictly above every incorrect one. A passing candidate that was not timed counts as
the reference (s = 1).
"""
from __future__ import annotations

from .tree import Node


def speedup_value(speedup: float | None) -> float:
    s = 1.0 if speedup is None else max(0.0, float(speedup))
    return s / (1.0 + s)


def node_value(node: Node, objective: str = "eager") -> float:
    if not node.passed:
        return 0.0
    return speedup_value(node.speedup(objective))
