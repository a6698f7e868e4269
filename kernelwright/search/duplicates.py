"""Identical candidates are judged once.

Two expansions can answer with the same module (siblings that saw the same evidence, a model that
repeats itself, a repair that returns the code it was given). Before the engine asks for an
evaluation it looks for an earlier candidate of the run with the same source, compared after
normalising line endings and trailing whitespace and nothing else. When there is one, the new node
is recorded as its duplicate (status `duplicate`, `duplicate_of` naming it): no evaluation is asked,
no budget spent, and no strategy expands it (it never passes). An earlier candidate counts while it
is being judged or once it was judged; one whose evaluation never ran (the judge itself failed) does
not, so the same code is judged when it comes again.
"""
from __future__ import annotations

from .tree import DUPLICATE, PENDING, ROOT_ID, Node, Tree


def normalized(source: str) -> str:
    """The source with "\\r\\n"/"\\r" line ends as "\\n", no trailing spaces, no blank lines at either end."""
    lines = source.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "\n".join(line.rstrip() for line in lines).strip("\n")


class Duplicates:
    def __init__(self) -> None:
        self._keys: dict[str, str] = {}  # node id -> its normalised source

    def _key(self, node: Node) -> str:
        if node.id not in self._keys:
            self._keys[node.id] = normalized(node.code or "")
        return self._keys[node.id]

    def original(self, tree: Tree, node: Node) -> Node | None:
        """The earliest candidate with `node`'s code that was judged or is being judged, else None."""
        if not node.code:
            return None
        key = self._key(node)
        for other in tree:  # in creation order
            if (other is node or other.id == ROOT_ID or not other.code or other.status == DUPLICATE
                    or (other.eval is None and other.status != PENDING)):
                continue
            if self._key(other) == key:
                return other
        return None


def mark_duplicate(node: Node, original: Node) -> None:
    node.status, node.duplicate_of = DUPLICATE, original.id
    state = "judged" if original.eval is not None else "being judged"
    node.reason = (f"duplicate of {original.id}: the same code as {original.id} ({state}), so it was not "
                   f"judged again; {original.id}'s verdict is its verdict")
