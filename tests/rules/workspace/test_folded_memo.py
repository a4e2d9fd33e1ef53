"""The map's folded tree kept per session (``folded``) is the tree folded afresh, whatever the map
went through between requests: nodes added, touched again, re-kinded, deleted, sent back in time,
relative paths, a moved root. And the kept fold is what most requests use. The map's figures
taken in one walk, and a folder's entries ordered without a key per entry, are the same."""

from __future__ import annotations

import random
from typing import Any

import pytest

from rules.base import ListMemo
from rules.workspace import folded, render, tree, workspace_map
from rules.workspace.tree import Nodes

FOLDERS = ["/r", "/r/src", "/r/src/app", "/r/tests", "/tmp", "/r/docs/api"]
NAMES = ["a.py", "b.py", "c.md", "d", "e.txt", "f.py", "app", "src"]


def _change(rng: random.Random, nodes: Nodes, at: int, relative: bool) -> tuple[Nodes, int]:
    """The map a request leaves: a fresh dict (the rule never edits a stored map in place)."""
    out: Nodes = {p: list(v) for p, v in nodes.items()}
    at += rng.choice([0, 0, 1, 30, 4000])
    for _ in range(rng.randint(1, 3)):
        roll = rng.random()
        path = f"{rng.choice(FOLDERS)}/{rng.choice(NAMES)}"
        if relative and roll < 0.05:
            path = path.lstrip("/").removeprefix("r/")  # folds where ``/r/…`` does
        if roll < 0.8 or not out:  # a call touched a file: it moves to the end
            old = out.pop(path, None)
            flags = "".join(sorted(set((old[1] if old else "") + rng.choice("lrwcm"))))
            out[path] = [old[0] if old else rng.choice("fd?"), flags, at]
        elif roll < 0.86:  # a folder learnt to be one, or a file said to be one
            victim = rng.choice(list(out))
            out[victim] = [rng.choice("fd?"), out[victim][1], at]
        elif roll < 0.91:  # deleted, or evicted by the bound
            del out[rng.choice(list(out))]
        elif roll < 0.93:  # an older time (a request of another branch)
            victim = rng.choice(list(out))
            out[victim] = [out[victim][0], out[victim][1], max(out[victim][2] - 50, 0)]
        else:  # seen again, nothing new: the same node
            victim = rng.choice(list(out))
            out[victim] = [*out[victim][:2], at]
    return out, at


@pytest.mark.parametrize("relative", [False, True])
def test_the_kept_fold_is_the_fold_afresh_after_any_change(
    relative: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    folds = 0
    real = folded.fold

    def counted(nodes: Nodes, root: str) -> Any:
        nonlocal folds
        folds += 1
        return real(nodes, root)

    monkeypatch.setattr(folded, "fold", counted)
    steps = 0
    for seed in range(40):
        rng = random.Random(seed)
        memo: ListMemo = {}
        nodes: Nodes = {}
        at = 1_000
        for _ in range(60):
            nodes, at = _change(rng, nodes, at, relative)
            root = "/r" if rng.random() < 0.97 else rng.choice(["", "/r/src", "/"])
            got = folded.folded(nodes, root, memo)[:2]
            assert got == real(nodes, root)
            now = at + rng.choice([0, 5, 90, 7200])
            lines = rng.choice([3, 12, 40])
            assert render.tree_lines(nodes, root, now, lines, memo) == render.tree_lines(
                nodes, root, now, lines
            )
            steps += 1
    # the check's own ``tree_lines`` without the memo folds at every step; with the memo, a
    # step folds only after a change that rules the kept fold out (a relative path: always)
    assert folds - steps < steps * (1.01 if relative else 0.5)


def test_the_same_map_again_is_not_folded_again(monkeypatch: pytest.MonkeyPatch) -> None:
    nodes: Nodes = {"/r/a.py": ["f", "r", 5], "/r/src": ["d", "l", 5]}
    memo: ListMemo = {}
    first = folded.folded(nodes, "/r", memo)[:2]
    monkeypatch.setattr(folded, "fold", lambda *_: pytest.fail("folded again"))
    again = folded.folded(nodes, "/r", memo)[:2]
    assert again[0] is first[0] and again[1] is first[1]


def test_a_relative_path_folding_onto_another_is_folded_afresh() -> None:
    """``a.py`` and ``/r/a.py`` under the root ``/r`` are one entry: the later node's mark shows.
    Once a relative path came in, a change to the earlier node is not added on top."""
    memo: ListMemo = {}
    steps: list[Nodes] = [
        {"/r/a.py": ["f", "r", 5]},
        {"/r/a.py": ["f", "r", 5], "a.py": ["f", "w", 6]},
        {"/r/a.py": ["f", "c", 7], "a.py": ["f", "w", 6]},  # the same order, a new mark
    ]
    for nodes in steps:
        assert folded.folded(nodes, "/r", memo)[:2] == folded.fold(nodes, "/r")
    assert folded.fold(steps[-1], "/r")[0][""]["a.py"] == "*"  # the later node's


@pytest.mark.parametrize("seed", range(4))
def test_the_figures_walk_is_the_three_walks(seed: int) -> None:
    """The map's root, files and changed files in one walk: those of ``render.project_root``,
    a count of the files and ``tree.changed_paths``, for maps of every kind of node."""
    rng = random.Random(seed)
    nodes: Nodes = {}
    at = 1000
    for _ in range(150):
        nodes, at = _change(rng, nodes, at, relative=seed % 2 == 1)
        cwd = rng.choice([None, "/r", "/r/src", "/tmp/", "/elsewhere"])
        files = sum(1 for v in nodes.values() if v[0] != "d")
        want = (render.project_root(nodes, cwd), files, len(tree.changed_paths(nodes)))
        assert workspace_map._figures(nodes, cwd, None) == want


def test_a_folders_entries_are_listed_folders_first_each_by_name() -> None:
    rng = random.Random(7)
    for _ in range(300):
        names = rng.sample([*NAMES, "Z", "_x", "a", "ab", "b/"], rng.randint(0, 10))
        entries = {n: rng.choice(["/", "", "*", "+", "r"]) for n in names}
        want = sorted(entries, key=lambda n: (entries[n] != "/", n))
        assert render.entry_order(entries) == want


@pytest.mark.parametrize("relative", [False, True])
def test_a_shape_kept_is_a_fold_with_the_same_entries(relative: bool) -> None:
    """``folded`` gives the same shape object again only while the fold's entries and
    marks are what they were (so the drawing kept by it is the one drawn afresh), and a new one
    at least once in a while (a shape is not made on every request)."""
    kept = 0
    for seed in range(40):
        rng = random.Random(seed)
        memo: ListMemo = {}
        nodes: Nodes = {}
        at, last = 1_000, None
        for _ in range(60):
            nodes, at = _change(rng, nodes, at, relative)
            root = "/r" if rng.random() < 0.97 else rng.choice(["", "/r/src", "/"])
            children, _, shape = folded.folded(nodes, root, memo)
            entries = {k: dict(v) for k, v in children.items()}
            if last is not None and last[0] is shape:
                assert entries == last[1]
                kept += 1
            last = (shape, entries)
    assert kept > 20  # of 2,400 requests


def test_the_drawing_is_kept_while_the_entries_are_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    walks = 0
    real = render._walk

    def counted(*args: Any) -> None:
        nonlocal walks
        walks += 1
        real(*args)

    monkeypatch.setattr(render, "_walk", counted)
    memo: ListMemo = {}
    nodes: Nodes = {"/r/src/a.py": ["f", "r", 5], "/r/docs": ["d", "l", 5]}
    first = render.tree_lines(nodes, "/r", 10, 40, memo)
    drawn = walks
    seen_again = {**nodes, "/r/src/a.py": ["f", "r", 70]}  # read again: a newer time only
    again = render.tree_lines(seen_again, "/r", 100, 40, memo)
    assert walks == drawn  # not walked again
    assert again == render.tree_lines(seen_again, "/r", 100, 40)  # the ages of the new time
    assert again != first
    written = {**seen_again, "/r/src/a.py": ["f", "rw", 80]}  # a new mark: drawn again
    assert render.tree_lines(written, "/r", 100, 40, memo) == render.tree_lines(
        written, "/r", 100, 40
    )
    assert walks > drawn + 1
