"""Greedy refinement: draft from the reference, then always improve the best candidate so far."""
from __future__ import annotations

from ..tree import ROOT_ID
from .base import SearchState, Strategy


class Greedy(Strategy):
    name = "greedy"

    def select(self, state: SearchState) -> str | None:
        settings = self.settings
        if state.jobs_started >= settings.iterations:
            return None
        if self.started_at[ROOT_ID] < settings.drafts:
            return ROOT_ID
        candidates = [n for n in state.tree.passing() if self.can_expand(n)]
        if candidates:  # the best value; the earliest on a tie
            return max(candidates, key=lambda n: (self.value(n), -n.order)).id
        if state.active:
            return None  # drafts still in flight: wait for something that works
        if self.started_at[ROOT_ID] < settings.drafts + settings.max_children:
            return ROOT_ID  # nothing works yet: draft again, with the failures in the prompt
        return None
