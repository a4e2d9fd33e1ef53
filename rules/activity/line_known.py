"""What is known to exist as one command line changes it (``shell_parse``)."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator, Mapping

from rules.activity.system_paths import listed_exists


class LineKnown:
    """The paths known to exist (path -> type) as a command line changes them: its own entries
    and removals over the caller's mapping, which is not copied (a workspace map of hundreds of
    paths, for a command that touches a few)."""

    def __init__(self, base: Mapping[str, str]) -> None:
        self.base = base
        self.own: dict[str, str | None] = {}  # None: removed by the command line

    def get(self, path: str) -> str | None:
        own = self.own
        return own[path] if path in own else self.base.get(path)

    def __contains__(self, path: str) -> bool:
        own = self.own
        return own[path] is not None if path in own else path in self.base

    def __setitem__(self, path: str, typ: str) -> None:
        self.own[path] = typ

    def items(self) -> Iterator[tuple[str, str | None]]:
        """(path, kind or None when unknown) of each path known to exist, in no set order."""
        own = self.own
        for path in self.base:
            if path not in own:
                yield path, self.base.get(path)
        for path, typ in own.items():
            if typ is not None:
                yield path, typ

    def remove(self, path: str) -> None:
        self.own[path] = None

    def exists(self, path: str) -> bool:
        """Known to exist, its kind known or not."""
        own = self.own
        return own[path] is not None if path in own else listed_exists(self.base, path)

    def listed_folder(self, path: str) -> bool:
        """Listed with its kind unknown, and its name has no extension: a folder, most likely
        (``mv notes.txt docs`` after a plain ``ls`` showed ``docs``)."""
        return self.get(path) is None and self.exists(path) and "." not in posixpath.basename(path)

    def made(self, path: str) -> bool:
        """Whether this command line made or moved ``path`` there (``mkdir out && … >> out/f``:
        a file in it is new)."""
        return self.own.get(path) is not None
