"""The leaderboard numbers of a set of problems (a level, or all of them), as this field reports them.

For each problem its result is the correct candidate a run found (or none), and whether it was
judged at all: a problem whose verdicts are all system errors (judge/outcome.py: an internal judge
error, out of GPU memory on a shared GPU, ...) or that only waits for verdicts is "not judged" and
is never counted as the candidate's failure. Of n problems, `judged` were judged; over those:

- correct rate: problems with a correct candidate / judged;
- fast_p against a baseline (eager PyTorch, torch.compile): problems whose candidate is correct AND
  more than p times faster than the baseline / judged (KernelBench's fast_p); fast_0 counts the
  correct problems that were timed against that baseline;
- geomean and mean speedup, two ways, labelled:
  - "all judged problems": every judged problem counts, an incorrect one at 1.0x (the reference is
    kept, as a user of the tool would); a correct one at its measured speedup, even below 1.0x;
  - "correct only": the correct problems alone;
- median % of the speed-of-light floor over the correct problems that have one.

A correct problem without a time against a baseline (that baseline was not measured: torch.compile
is not measured on a CPU) is not fast against it and is left out of its geomeans and means;
`untimed` counts such problems so a table can say so. When no correct problem was timed against a
baseline, its fast_p and "all problems" figures are left empty (a 0% would read as measured, the
failed ones alone as 1.0x). Spend is
summed over all n problems (judged or not) and averaged per problem: LLM calls, tokens, dollars,
judge minutes.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

THRESHOLDS = (0.0, 1.0, 1.5, 2.0)
BASELINES = ("eager", "compile_default")
BASELINE_LABELS = {"eager": "eager", "compile_default": "torch.compile"}


@dataclass(frozen=True)
class Score:
    """One problem's outcome under one rule set."""

    correct: bool
    speedup: dict[str, float | None] = field(default_factory=dict)
    pct_of_floor: float | None = None
    calls: int = 0
    tokens: int = 0
    usd: float = 0.0
    judge_s: float = 0.0
    judged: bool = True  # False: not judged (system errors only, or waiting): left out of every rate


@dataclass
class BaselineStats:
    fast: dict[str, float]  # "0", "1", "1.5", "2" -> fraction of the judged problems
    geomean_all: float | None  # judged problems, incorrect ones at 1.0x
    geomean_correct: float | None
    mean_all: float | None
    mean_correct: float | None
    untimed: int  # correct problems without a time against this baseline


@dataclass
class Summary:
    n: int  # every problem
    correct: int
    correct_rate: float | None  # correct / judged
    judged: int  # problems with a verdict that is not a system error: the rates' denominator
    by_baseline: dict[str, BaselineStats]
    median_pct_of_floor: float | None
    floors: int  # correct problems with a floor percentage
    calls: int
    tokens: int
    usd: float
    judge_minutes: float

    @property
    def not_judged(self) -> int:
        return self.n - self.judged

    def per_problem(self, value: float | int) -> float | None:
        return value / self.n if self.n else None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["not_judged"] = self.not_judged
        data["per_problem"] = {k: self.per_problem(getattr(self, k)) for k in ("calls", "tokens", "usd",
                                                                               "judge_minutes")}
        return data


def threshold_key(p: float) -> str:
    return f"{p:g}"


def geomean(values: Iterable[float]) -> float | None:
    values = [v for v in values if v is not None and v > 0]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def mean(values: Iterable[float]) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def fast_p(scores: list[Score], p: float, baseline: str = "eager") -> float | None:
    """Share of `scores` (the judged problems) that are correct and more than p times faster than `baseline`."""
    if not scores:
        return None
    hits = sum(1 for s in scores if s.correct and (s.speedup.get(baseline) or 0.0) > p)
    return hits / len(scores)


def baseline_stats(scores: list[Score], baseline: str) -> BaselineStats:
    correct = [s.speedup.get(baseline) for s in scores if s.correct]
    timed = [v for v in correct if v is not None]
    everyone = timed + [1.0 for s in scores if not s.correct]  # a failed problem keeps the reference
    untimed = correct and not timed  # nothing correct was timed against it (torch.compile on a CPU)
    if untimed:  # failures alone would read as 1.0x, and "0% faster" as a measurement
        everyone = []
    return BaselineStats(
        fast={threshold_key(p): None if untimed else fast_p(scores, p, baseline) for p in THRESHOLDS},
        geomean_all=geomean(everyone), geomean_correct=geomean(timed),
        mean_all=mean(everyone), mean_correct=mean(timed), untimed=len(correct) - len(timed))


def summarize(scores: list[Score]) -> Summary:
    """Rates over the judged problems, spend over all of them."""
    judged = [s for s in scores if s.judged or s.correct]
    correct = [s for s in judged if s.correct]
    floors = [s.pct_of_floor for s in correct if s.pct_of_floor is not None]
    return Summary(
        n=len(scores), correct=len(correct), correct_rate=(len(correct) / len(judged)) if judged else None,
        judged=len(judged), by_baseline={b: baseline_stats(judged, b) for b in BASELINES},
        median_pct_of_floor=statistics.median(floors) if floors else None, floors=len(floors),
        calls=sum(s.calls for s in scores), tokens=sum(s.tokens for s in scores),
        usd=round(sum(s.usd for s in scores), 6), judge_minutes=round(sum(s.judge_s for s in scores) / 60, 3))
