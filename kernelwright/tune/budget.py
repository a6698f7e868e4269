"""What a tuning budget of judge evaluations buys: one home for the arithmetic that the autopilot,
the `kernelwright tune` command and the Templatizer's prompt state (so the prompt's numbers are the
code's, never literals written twice).

Without sweeps each configuration is one judge evaluation. With sweeps of N (tune/sweep_eval.py)
a batch of N configurations costs two evaluations: the sweep (N instances built, checked on one
trial and timed in one evaluation) and the full judgement of its fastest instance.
"""
from __future__ import annotations

from dataclasses import dataclass

# how many feasible configurations a search can usefully face per configuration it measures: the
# space may be a few times the budget (TPE concentrates where the measured ones were fast); much
# larger and the search is a random sample
SPACE_PER_CONFIGURATION = 4


def sweep_budget(evaluations: int | None, sweep: int) -> int | None:
    """The configurations `evaluations` judge evaluations measure with sweeps of `sweep`: two per
    sweep (the sweep, its winner's full judgement); an odd one left judges one configuration."""
    if evaluations is None:
        return None
    if sweep <= 1:
        return evaluations
    return (evaluations // 2) * sweep + evaluations % 2


@dataclass(frozen=True)
class TuneBudget:
    """A tuning's judge evaluations and how it spends them."""

    evaluations: int
    sweep: int = 0  # configurations per sweep; 0 or 1: one configuration per evaluation

    @property
    def sweeping(self) -> bool:
        return self.sweep > 1

    @property
    def configurations(self) -> int:
        """Configurations measured in all, the defaults included."""
        return int(sweep_budget(max(0, self.evaluations), self.sweep) or 0)

    @property
    def space(self) -> int:
        """The most feasible configurations a template should leave for this budget."""
        return max(1, self.configurations * SPACE_PER_CONFIGURATION)
