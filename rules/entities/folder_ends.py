"""What a folder held ends or moves with it: ``rm -rf build`` ends ``build/out.txt``, ``mv src
lib`` moves ``src/a.py`` to ``lib/a.py``. Without this a file deleted with its folder would stay
a candidate ("delete the file you just made" pointing at one already gone), and one moved with
its folder would keep its old path. Pure; bounded: at most ``MAX_FOLDERS`` folders per call are
looked into, each a scan of the paths known to exist.
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
