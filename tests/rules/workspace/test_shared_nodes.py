"""The map's next version shares the entries a request leaves alone with the one before (``build``
copies the node table, not every node): over random histories of facts (notes, deletes, moves,
copies, the bound), the map before is never changed, the map after equals the one built from a
deep copy, and the entries no fact touched are the very objects (the state's redaction then
walks only the changed ones)."""

from __future__ import annotations

import copy
import random

import pytest

from proxy.store.redact_state import redact_changed
from rules.workspace import tree
from rules.workspace.workspace_map import MAX_SUBTREE_VISITS, _apply_fact

PATHS = ["src", "src/a.py", "src/b.py", "src/lib", "src/lib/c.py", "docs", "docs/x.md", "t.py"]


def fact(rng: random.Random) -> tuple[str, ...]:
    op = rng.choice(["read", "w", "c", "list", "named", "delete", "move", "copy"])
    if op in ("move", "copy"):
        return (op, rng.choice(PATHS), rng.choice(PATHS) + rng.choice(["", "2"]), "?")
    return (op, rng.choice(PATHS), rng.choice(["f", "d", "?"]))


def related(path: str, other: str) -> bool:
    """The same path, or one under the other (a fact on one may replace the other's entry)."""
    return path == other or other.startswith(path + "/") or path.startswith(other + "/")


@pytest.mark.parametrize("seed", range(30))
def test_shared_entries_are_never_changed_in_place(seed: int) -> None:
    rng = random.Random(seed)
    nodes: tree.Nodes = {}
    for step in range(60):
        before = nodes
        frozen_before = copy.deepcopy(before)
        facts = [fact(rng) for _ in range(rng.randint(1, 4))]
        shared, deep = dict(before), copy.deepcopy(before)
        for f in facts:
            _apply_fact(shared, f, step, [MAX_SUBTREE_VISITS])
            _apply_fact(deep, f, step, [MAX_SUBTREE_VISITS])
        limit = rng.randint(3, 8)
        assert tree.bound(shared, limit) == tree.bound(deep, limit)
        assert before == frozen_before  # nothing the last map holds was changed
        assert shared == deep
        touched = {f[1] for f in facts} | {f[2] for f in facts if f[0] in ("move", "copy")}
        for path, node in shared.items():
            if path in before and not any(related(path, t) for t in touched):
                assert node is before[path]
        nodes = shared


def test_redaction_walks_only_the_new_entries() -> None:
    before: tree.Nodes = {f"src/f{i}.py": ["f", "r", 1] for i in range(50)}
    after = dict(before)
    tree.note(after, "src/key=sk-ant-api03-" + "A" * 40 + ".py", "f", "w", 2)
    cleaned = redact_changed(after, before)
    assert all(cleaned[p] is before[p] for p in before)  # the same objects, not walked
    assert len(cleaned) == 51 and not any("sk-ant" in p for p in cleaned)
