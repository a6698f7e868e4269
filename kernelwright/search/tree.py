"""The search tree: candidates with their lineage, verdict summary and search statistics.

Two parent links per node, on purpose:
- `parent_id` is the code lineage (a repair's parent is the failed candidate it fixes);
- `search_parent` is the node whose expansion produced it (for a repair: the node the job
  started from). Strategies walk `search_parent`: the outcome of one expansion is its final leaf,
  whether it worked first time or after repairs.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Iterator

from .results import EvalResult

ROOT_ID = "c0"

# node.status values; a duplicate has the code of an earlier candidate and is not judged (duplicates.py)
REFERENCE, PENDING, PASSED, FAILED, INVALID, SKIPPED, DUPLICATE = (
    "reference", "pending", "pass", "fail", "invalid", "skipped", "duplicate")


@dataclass
class Node:
    id: str
    parent_id: str | None
    search_parent: str | None
    action: str  # "reference", "draft", "improve", "repair", "tune"
    code: str | None
    plan: str = ""
    approach_key: str = ""
    skill_tags: list[str] = field(default_factory=list)
    job_id: str = ""
    status: str = PENDING
    eval: EvalResult | None = None
    reason: str = ""  # why it failed, one paragraph (from the judge or the parser)
    diagnosis: str | None = None  # the Analyst's reading, when asked
    bottleneck: str | None = None
    depth: int = 0  # search depth (root 0)
    value: float = 0.0  # correctness-gated value of this node alone (see values.py)
    visits: int = 0  # MCTS: expansions backed up through this node
    value_sum: float = 0.0
    repairs: int = 0  # repair attempts made on this node's failure
    order: int = 0  # creation order
    # the tuning step (search/tuning.py): on a templatized candidate, what its tuning job did and
    # cost; on an instance, its job, template and parameters
    tuning: dict[str, Any] = field(default_factory=dict)
    tuned: str = ""  # "parameters tuned: ...", shown with the candidate in later prompts
    duplicate_of: str = ""  # a duplicate: the earlier candidate whose verdict stands for it

    @property
    def passed(self) -> bool:
        return self.status in (PASSED, REFERENCE)

    def speedup(self, objective: str = "eager") -> float | None:
        if self.status == REFERENCE:
            return 1.0
        if self.eval is None or not self.eval.passed:
            return None
        return self.eval.speedup_for(objective)

    def summary(self, objective: str = "eager") -> str:
        if self.status == REFERENCE:
            return "the reference program (speedup 1.00x by definition)"
        if self.eval is not None:
            return self.eval.summary(objective)
        return f"{self.status}: {self.reason[:200]}" if self.reason else self.status

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["eval"] = self.eval.to_dict() if self.eval else None
        return data


class Tree:
    def __init__(self, reference_source: str):
        self.nodes: dict[str, Node] = {}
        self._counter = 0
        self.add(Node(ROOT_ID, None, None, "reference", reference_source, status=REFERENCE,
                      value=0.5))  # speedup 1 by definition: values.speedup_value(1.0)

    @property
    def root(self) -> Node:
        return self.nodes[ROOT_ID]

    def new_id(self) -> str:
        self._counter += 1
        return f"c{self._counter}"

    def add(self, node: Node) -> Node:
        node.order = len(self.nodes)
        self.nodes[node.id] = node
        return node

    def __getitem__(self, node_id: str) -> Node:
        return self.nodes[node_id]

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes.values())

    def children(self, node_id: str) -> list[Node]:
        """Code-lineage children."""
        return [n for n in self if n.parent_id == node_id]

    def search_children(self, node_id: str) -> list[Node]:
        return [n for n in self if n.search_parent == node_id]

    def ancestors(self, node_id: str) -> list[Node]:
        """Search ancestors from the search parent up to the root."""
        out, current = [], self.nodes[node_id].search_parent
        while current is not None:
            out.append(self.nodes[current])
            current = self.nodes[current].search_parent
        return out

    def passing(self, include_root: bool = False) -> list[Node]:
        return [n for n in self if n.status == PASSED or (include_root and n.status == REFERENCE)]

    def best(self, objective: str = "eager") -> Node | None:
        """The passing candidate with the highest speedup (the first found on a tie)."""
        best, best_speed = None, None
        for node in self.passing():
            speed = node.speedup(objective) or 0.0
            if best_speed is None or speed > best_speed:
                best, best_speed = node, speed
        return best

    def latest_failure(self, search_parent: str) -> Node | None:
        """The most recent failed candidate expanded from `search_parent`."""
        failed = [n for n in self if n.search_parent == search_parent and n.status in (FAILED, INVALID)]
        return failed[-1] if failed else None
