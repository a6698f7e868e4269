"""Search strategies pluggable into the engine: greedy refinement, beam search, MCTS."""
from __future__ import annotations

from ..settings import Settings, SettingsError
from .base import SearchState, Strategy
from .beam import Beam
from .greedy import Greedy
from .mcts import MCTS

STRATEGIES: dict[str, type[Strategy]] = {"greedy": Greedy, "beam": Beam, "mcts": MCTS}


def make_strategy(name: str, settings: Settings) -> Strategy:
    if name not in STRATEGIES:
        raise SettingsError(f"unknown strategy {name!r}; expected one of {', '.join(STRATEGIES)}")
    return STRATEGIES[name](settings)


__all__ = ["Beam", "Greedy", "MCTS", "STRATEGIES", "SearchState", "Strategy", "make_strategy"]
