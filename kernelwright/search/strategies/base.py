"""What a strategy is: it picks the node to expand next and learns from finished expansions.

The engine owns the jobs and the budget; a strategy only answers "which node now?" (or "none
now": wait for results, or nothing is left) and is told when a job starts and when it ends.
Strategies are deterministic: ties break by creation order or by the engine's seeded RNG.
"""
from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

from ..jobs import Job
from ..settings import Settings
from ..tree import Node, Tree
from ..values import node_value


@dataclass
class SearchState:
    tree: Tree
    settings: Settings
    active: list[Job] = field(default_factory=list)
    jobs_started: int = 0
    rng: random.Random = field(default_factory=lambda: random.Random(0))

    def inflight(self) -> Counter:
        """Active jobs below each node (the job's parent and all its search ancestors)."""
        counts: Counter = Counter()
        for job in self.active:
            counts[job.parent_id] += 1
            for ancestor in self.tree.ancestors(job.parent_id):
                counts[ancestor.id] += 1
        return counts


class Strategy:
    name = "base"

    def __init__(self, settings: Settings):
        self.settings = settings
        self.started_at: Counter = Counter()  # expansion jobs started from each node

    def select(self, state: SearchState) -> str | None:
        """The node to expand now, or None (wait for results, or nothing left to expand)."""
        raise NotImplementedError

    def started(self, job: Job) -> None:
        self.started_at[job.parent_id] += 1

    def job_done(self, tree: Tree, job: Job, leaf: Node | None) -> None:
        """An expansion ended; `leaf` is its last candidate (None when no code was produced)."""

    def adopted(self, tree: Tree, node: Node) -> None:
        """A node joined the search tree outside an expansion (a tuned instance, search/tuning.py)."""

    def value(self, node: Node) -> float:
        return node_value(node, self.settings.objective)

    def can_expand(self, node: Node) -> bool:
        return (node.passed and node.depth < self.settings.max_depth
                and self.started_at[node.id] < self.settings.max_children)
