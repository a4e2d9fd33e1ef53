"""What a folder held ends or moves with it: ``rm -rf build`` ends ``build/out.txt``, ``mv src
lib`` moves ``src/a.py`` to ``lib/a.py``; and what a deleted pattern names ends: ``rm -rf tmp*``
ends ``tmp1`` (the shell expands it; ``*`` and ``?`` within one path component). Without this a
file deleted with its folder would stay a candidate ("delete the file you just made" pointing at
one already gone), and one moved with its folder would keep its old path. Pure; bounded: at most
``MAX_FOLDERS`` folders or patterns per call are looked into, each a scan of the paths known to
exist, a pattern matched in time linear in each component's length times its own.
"""

from __future__ import annotations

from collections.abc import Mapping

from rules.activity.shell_parse import Effect

MAX_FOLDERS = 16  # folders deleted or moved per call whose contents are followed
MAX_INSIDE = 200  # paths followed per folder


class FolderEnds:
    """Per call: the effects a folder's delete or move has on what it held."""

    def __init__(self) -> None:
        self.looked = 0

    def inside(self, effect: Effect, known: Mapping[str, str]) -> list[Effect]:
        """The effects on the paths ``known`` holds under ``effect``'s folder: deleted with it,
        or moved to the same place under its new path (deepest last, as they were listed)."""
        if effect.action not in ("delete", "move") or self.looked >= MAX_FOLDERS:
            return []
        if effect.action == "delete" and _WILD.intersection(effect.path):
            self.looked += 1
            return self._matched(effect.path, known)
        old = effect.source if effect.action == "move" else effect.path
        if not old or (effect.type != "folder" and known.get(old) != "folder"):
            return []
        self.looked += 1
        prefix = old.rstrip("/") + "/"
        out: list[Effect] = []
        for path, typ in known.items():
            if len(out) >= MAX_INSIDE:
                break
            if path.startswith(prefix):
                if effect.action == "delete":
                    out.append(Effect("delete", typ, path))
                else:
                    out.append(Effect("move", typ, effect.path + path[len(prefix) - 1 :], path))
        return out

    def _matched(self, pattern: str, known: Mapping[str, str]) -> list[Effect]:
        """Deletes of the paths ``known`` holds that ``pattern`` names, and of what matched
        folders held."""
        parts = pattern.rstrip("/").split("/")
        if "[" in pattern or sum(map(pattern.count, "*?")) > MAX_WILDCARDS:
            return []  # a class, or a pattern this long: not guessed at
        out: list[Effect] = []
        for path, typ in known.items():
            if len(out) >= MAX_INSIDE:
                break
            names = path.split("/")
            if len(names) == len(parts) and all(map(_component, parts, names)):
                out.append(Effect("delete", typ, path))
        for gone in list(out):
            if gone.type == "folder" and self.looked < MAX_FOLDERS:
                out += self.inside(gone, known)[: MAX_INSIDE - len(out)]
        return out


_WILD = frozenset("*?")
MAX_WILDCARDS = 8


def _component(pattern: str, name: str) -> bool:
    """Whether ``name`` matches a shell pattern of ``*`` and ``?`` (greedy, back to the last
    ``*`` only: linear in the name for each of the pattern's characters)."""
    p = n = 0
    star, mark = -1, 0
    while n < len(name):
        if p < len(pattern) and pattern[p] in ("?", name[n]) and pattern[p] != "*":
            p += 1
            n += 1
        elif p < len(pattern) and pattern[p] == "*":
            star, mark = p, n
            p += 1
        elif star >= 0:
            p, mark = star + 1, mark + 1
            n = mark
        else:
            return False
    while p < len(pattern) and pattern[p] == "*":
        p += 1
    return p == len(pattern)
