"""Monte Carlo tree search: UCT selection with progressive widening.

Selection walks down from the reference. At each node, if it has fewer expansions than
ceil(widen_k * visits^widen_alpha) (at least `drafts` at the root, at most `max_children`), the
node itself is expanded: new children are added slowly, as a node earns visits. Otherwise the
walk continues into the correct child with the highest UCT score

    Q/N + mcts_c * sqrt(ln N_parent / N)

where N counts finished expansions below a node plus the ones in flight (a virtual loss, so
parallel jobs spread out) and Q sums their values (values.py). An expansion's value is that of
its last candidate after any repairs; it is backed up along the search path to the root.
"""
from __future__ import annotations

import math

from ..tree import ROOT_ID, Node, Tree
from .base import SearchState, Strategy


class MCTS(Strategy):
    name = "mcts"

    def select(self, state: SearchState) -> str | None:
        if state.jobs_started >= self.settings.iterations:
            return None
        return self._descend(state, state.tree.root, state.inflight())

    def allowed_children(self, node: Node, inflight: int) -> int:
        settings = self.settings
        if node.depth >= settings.max_depth:
            return 0
        visits = max(1, node.visits + inflight)
        allowed = math.ceil(settings.widen_k * visits ** settings.widen_alpha)
        if node.id == ROOT_ID:
            allowed = max(allowed, settings.drafts)
        return min(allowed, settings.max_children)

    def _descend(self, state: SearchState, node: Node, inflight) -> str | None:
        started = self.started_at[node.id]
        if started < self.allowed_children(node, inflight[node.id]):
            return node.id
        children = [c for c in state.tree.search_children(node.id) if c.passed]
        for child in self._ranked(node, children, inflight, state):
            chosen = self._descend(state, child, inflight)
            if chosen is not None:
                return chosen
        if inflight[node.id]:
            return None  # results below are still coming: wait rather than widen past the limit
        cap = self.settings.max_children if node.depth < self.settings.max_depth else 0
        return node.id if started < cap else None

    def _ranked(self, parent: Node, children: list[Node], inflight, state: SearchState) -> list[Node]:
        parent_n = max(1, parent.visits + inflight[parent.id])
        scored = []
        for child in children:
            n = max(1, child.visits + inflight[child.id])
            score = child.value_sum / n + self.settings.mcts_c * math.sqrt(math.log(parent_n) / n)
            scored.append((score, state.rng.random(), child))
        scored.sort(key=lambda item: (-item[0], item[1]))
        return [child for _, _, child in scored]

    def adopted(self, tree: Tree, node: Node) -> None:
        """A tuned instance counts as one visit of itself and of its search path, with its value."""
        value = self.value(node)
        for visited in [node, *tree.ancestors(node.id)]:
            visited.visits += 1
            visited.value_sum += value

    def job_done(self, tree: Tree, job, leaf: Node | None) -> None:
        """Back up the expansion's value from its leaf along the search path to the root."""
        value = self.value(leaf) if leaf is not None else 0.0
        for node in tree:
            if node.job_id == job.id and node is not leaf:
                node.visits, node.value_sum = 1, 0.0  # intermediate failures: shown, never chosen
        if leaf is not None:
            leaf.visits += 1
            leaf.value_sum += value
        path = tree.ancestors(leaf.id) if leaf is not None else [tree[job.parent_id], *tree.ancestors(job.parent_id)]
        for node in path:
            node.visits += 1
            node.value_sum += value
