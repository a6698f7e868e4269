"""Search strategies pluggable into the engine: greedy refinement, beam search, MCTS.

Adding one: its module here (a `Strategy` subclass with a `name`), its class in the line below, and
its row in docs/optimize.md's table of strategies (a test checks the row, `--strategy`'s help and
the settings follow the registry)."""
from __future__ import annotations

from ..settings import STRATEGIES, Settings, SettingsError
from .base import SearchState, Strategy
from .beam import Beam
from .greedy import Greedy
from .mcts import MCTS

STRATEGIES.update({cls.name: cls for cls in (Greedy, Beam, MCTS)})  # the registry (search/settings.py)


def make_strategy(name: str, settings: Settings) -> Strategy:
    if name not in STRATEGIES:
        raise SettingsError(f"unknown strategy {name!r}; expected one of {', '.join(STRATEGIES)}")
    return STRATEGIES[name](settings)


__all__ = ["Beam", "Greedy", "MCTS", "STRATEGIES", "SearchState", "Strategy", "make_strategy"]
