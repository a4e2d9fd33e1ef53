"""The map itself: a bounded dict ``path -> [kind, flags, last seen]`` kept in state, in recency
order (an entry seen again moves to the end), and the operations facts apply to it.

``kind``: ``f`` file, ``d`` folder, ``?`` not said. ``flags``: ``l`` listed or named by output,
``r`` read, ``w`` written, ``c`` created by the agent, ``m`` moved or copied there by the agent;
``w``, ``c`` and ``m`` mark what the agent changed. ``last seen`` is the request's clock, in whole
seconds. A deletion removes the path and everything under it; a move re-keys the subtree.

Bounded by ``max_entries``: past it, entries only listed go first (oldest first), then those only
read, then changed ones; each one dropped is counted (``evicted``) so the report says what the map
left out."""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from typing import Any

Nodes = dict[str, list[Any]]
CHANGED = frozenset("wcm")
# the order entries are dropped in, when the map is over its bound
_EVICTION = ("l", "r", "")


def is_changed(flags: str) -> bool:
    return not CHANGED.isdisjoint(flags)


def note(nodes: Nodes, path: str, kind: str, flag: str, at: int) -> None:
    """``path`` seen (``flag``) at ``at``; its folders are known to be folders."""
    old = nodes.pop(path, None)
    if old is None:
        nodes[path] = [kind, flag, at]
    else:
        known = old[0] if kind == "?" else kind
        flags = old[1] if flag in old[1] else "".join(sorted(old[1] + flag))
        nodes[path] = [known, flags, at]
    parent = posixpath.dirname(path)
    if parent and parent != path and parent in nodes and nodes[parent][0] == "?":
        nodes[parent] = ["d", nodes[parent][1], nodes[parent][2]]


def delete(nodes: Nodes, path: str, whole: bool = True) -> int:
    """Remove ``path`` and (``whole``) what is under it; how many entries went."""
    if not whole:
        return 0 if nodes.pop(path, None) is None else 1
    prefix = path.rstrip("/") + "/"
    gone = [p for p in nodes if p == path or p.startswith(prefix)]
    for p in gone:
        del nodes[p]
    return len(gone)


def move(
    nodes: Nodes,
    source: str,
    target: str,
    kind: str,
    at: int,
    keep: bool = False,
    whole: bool = True,
) -> None:
    """``source`` (and, ``whole``, its subtree) now at ``target``; ``keep``: a copy (the source
    stays). A folder copied into itself (``cp -r a a/c``) copies what was under it before."""
    prefix = source.rstrip("/") + "/"
    under = [(p, v) for p, v in nodes.items() if p.startswith(prefix)] if whole else []
    if not keep:
        delete(nodes, source, whole)
    note(nodes, target, kind, "m", at)
    for p, v in under:
        note(nodes, target + p[len(source) :], v[0], "m", at)


def bound(nodes: Nodes, max_entries: int) -> int:
    """Drop entries past ``max_entries`` (least valuable, oldest first); how many were dropped."""
    over = len(nodes) - max_entries
    dropped = 0
    for keep_flags in _EVICTION:
        if over <= 0:
            break
        for path in list(nodes):
            flags = nodes[path][1]
            droppable = (
                set(flags) <= {"l"}
                if keep_flags == "l"
                else (not is_changed(flags) if keep_flags == "r" else True)
            )
            if droppable:
                del nodes[path]
                over -= 1
                dropped += 1
                if over <= 0:
                    break
    return dropped


def files(nodes: Nodes) -> Iterable[str]:
    return (p for p, v in nodes.items() if v[0] != "d")


def changed_paths(nodes: Nodes) -> list[str]:
    """Files the agent changed, newest last."""
    return [p for p, v in nodes.items() if v[0] != "d" and is_changed(v[1])]


def touched_paths(nodes: Nodes) -> list[str]:
    """Files the agent read or changed, newest last."""
    return [p for p, v in nodes.items() if v[0] != "d" and ("r" in v[1] or is_changed(v[1]))]


def common_root(paths: Iterable[str]) -> str:
    """The deepest folder holding every absolute path given ("" when they share none but ``/``,
    or there are relative ones)."""
    root: list[str] | None = None
    for path in paths:
        if not path.startswith("/"):
            return ""
        parts = posixpath.dirname(path).split("/")
        if root is None:
            root = parts
        else:
            n = 0
            while n < min(len(root), len(parts)) and root[n] == parts[n]:
                n += 1
            root = root[:n]
    joined = "/".join(root or [])
    return joined if joined not in ("", "/") else ""


def relative(path: str, root: str) -> str:
    if root and path.startswith(root + "/"):
        return path[len(root) + 1 :]
    return path
