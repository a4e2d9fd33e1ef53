"""The map's tree as ``render.tree_lines`` walks it: each folder's entries with their marks, and
when each folder was last seen. Built from every node; kept per session (``Context.memo``) and
brought up to date from the nodes that changed since, when that is provably the same.

A tool loop's next request changes a few nodes of a map of hundreds (the files its call touched,
their time): the folders' entries and times only grow then. The walk over every node that is left
(comparing each with the kept map's) is a dict lookup per node, not the path's split into folders.
The whole is built again when a node went away, changed its kind or went back in time, when the
root moved, or when a path is not absolute (two paths may then fold to one entry, where the
order they come in decides)."""

from __future__ import annotations

from typing import Any

from rules.base import ListMemo
from rules.workspace.tree import Nodes, is_changed

Children = dict[str, dict[str, str]]
SeenAt = dict[str, int]
MEMO = "workspace_folded"  # ``Context.memo`` name: the last nodes folded, and the result


def _mark(flags: str) -> str:
    if "c" in flags:
        return "+"
    if is_changed(flags):
        return "*"
    return "r" if "r" in flags else ""


def _add(children: Children, seen_at: SeenAt, path: str, node: Any, root: str, cut: int) -> bool:
    """One node into the folded tree: the folders on its way, its own entry. Whether
    ``children`` changed (a folder or an entry new, or another mark); ``seen_at`` aside."""
    kind, flags, at = node
    changed = False
    rel = path[cut:] if cut and path.startswith(root + "/") else path
    parent, start = "", 0
    if rel.startswith("/"):
        parent, start = "/", 1
    end = rel.find("/", start)
    while end >= 0:  # the folders on the way: a folder mark each
        folder = rel[:end] if end else "/"
        if end > start:
            entries = children.get(parent)
            if entries is None:
                entries = children[parent] = {}
            name = rel[start:end]
            if entries.get(name) != "/":
                entries[name] = "/"
                changed = True
            if seen_at.get(parent, 0) < at:
                seen_at[parent] = at
        parent, start = folder, end + 1
        end = rel.find("/", start)
    name = rel[start:]
    if name:
        known = children.get(parent)
        if known is None:
            known = children[parent] = {}
        old = known.get(name)
        if old != "/":
            mark = "/" if kind == "d" else _mark(flags)
            if old != mark:
                known[name] = mark
                changed = True
        if seen_at.get(parent, 0) < at:
            seen_at[parent] = int(at)
    return changed


def fold(nodes: Nodes, root: str) -> tuple[Children, SeenAt]:
    """Every node of the map, folded (the root itself left out)."""
    children: Children = {}
    seen_at: SeenAt = {}
    cut = len(root) + 1 if root else 0
    for path, node in nodes.items():
        if path != root:
            _add(children, seen_at, path, node, root, cut)
    return children, seen_at


def _changed(before: Nodes, nodes: Nodes) -> list[str] | None:
    """The paths whose node is new or changed since ``before``; None when the fold of ``nodes``
    cannot be had by adding those to ``before``'s (see the module's docstring)."""
    if len(nodes) < len(before):
        return None  # some node went away
    out: list[str] = []
    get = before.get
    kept = 0
    for path, node in nodes.items():
        old = get(path)
        if old is not None:
            kept += 1
            if old is node or old == node:
                continue
            if old[0] != node[0] or not old[2] <= node[2]:
                return None  # its kind changed, or its time went back
        if not path.startswith("/"):
            return None
        out.append(path)
    return out if kept == len(before) else None


def folded(
    nodes: Nodes, root: str, memo: ListMemo | None = None
) -> tuple[Children, SeenAt, object]:
    """``fold(nodes, root)``, from the session's last fold where it can (``memo``), and its shape:
    an object that is the same one only while ``children`` holds the same entries with the same
    marks (only ``seen_at`` moved), so what is drawn of the entries alone can be kept by it. The
    result is the caller's to read, never to change."""
    if memo is None:
        children, seen_at = fold(nodes, root)
        return children, seen_at, object()
    kept = memo.pop(MEMO, None)  # taken out while it changes: a failure leaves none behind
    if kept:
        (before,), (was_root, absolute, children, seen_at, shape) = kept[0]
        if before is nodes and was_root == root:
            memo[MEMO] = kept
            return children, seen_at, shape
        changed = _changed(before, nodes) if absolute and was_root == root else None
        if changed is not None:
            cut = len(root) + 1 if root else 0
            for path in changed:
                if path != root and _add(children, seen_at, path, nodes[path], root, cut):
                    shape = object()
            memo[MEMO] = [((nodes,), (root, True, children, seen_at, shape))]
            return children, seen_at, shape
    children, seen_at = fold(nodes, root)
    absolute = all(path.startswith("/") for path in nodes)
    shape = object()
    memo[MEMO] = [((nodes,), (root, absolute, children, seen_at, shape))]
    return children, seen_at, shape
