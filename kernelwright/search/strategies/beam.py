"""Beam search by generations.

Generation 0 drafts `drafts` candidates from the reference. Each later generation expands every
node of the beam `beam_branch` times; when all its jobs are done, the next beam is the best
`beam_width` correct candidates that generation produced (the previous beam is kept when none
worked, so the next generation retries it with the failures in its prompts). The search ends
after `generations` generations beyond the drafts.
"""
from __future__ import annotations

from collections import deque

from ..tree import ROOT_ID, Node, Tree
from .base import SearchState, Strategy


class Beam(Strategy):
    name = "beam"

    def __init__(self, settings):
        super().__init__(settings)
        self.generation = 0
        self.beam: list[str] = [ROOT_ID]
        self.queue: deque[str] = deque([ROOT_ID] * settings.drafts)
        self.active_in_generation = 0
        self.produced: list[str] = []  # passing leaves of the current generation

    def select(self, state: SearchState) -> str | None:
        if self.queue:
            return self.queue[0]
        if self.active_in_generation or self.generation >= self.settings.generations:
            return None
        self._next_generation(state.tree)
        return self.queue[0] if self.queue else None

    def _next_generation(self, tree: Tree) -> None:
        passing = [tree[i] for i in self.produced if tree[i].passed]
        ranked = sorted(passing, key=lambda n: (-self.value(n), n.order))
        survivors = [n.id for n in ranked[: self.settings.beam_width]] or self.beam
        self.beam = survivors
        self.generation += 1
        self.produced = []
        for node_id in survivors:
            count = self.settings.drafts if node_id == ROOT_ID else self.settings.beam_branch
            self.queue.extend([node_id] * count)

    def started(self, job) -> None:
        super().started(job)
        self.queue.popleft()
        job.generation = self.generation
        self.active_in_generation += 1

    def adopted(self, tree: Tree, node: Node) -> None:
        """A tuned instance competes for the next beam with the current generation's leaves."""
        self.produced.append(node.id)

    def job_done(self, tree: Tree, job, leaf: Node | None) -> None:
        if job.generation != self.generation:
            return
        self.active_in_generation -= 1
        if leaf is not None and leaf.passed:
            self.produced.append(leaf.id)
