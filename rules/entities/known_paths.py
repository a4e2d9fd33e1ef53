"""What exists, as a command's effects are read against it (``call_effects``): the entity events'
paths first, then what the workspace map listed as of the session's previous request (``ls``,
``find``, a read: paths the agent saw but did not make), a path this request's events removed
being gone whatever the map says. With it ``mv notes.txt src`` into a folder the agent only
listed goes inside it, and ``mkdir -p src`` on it makes nothing."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from rules.activity.system_paths import listed_exists


class KnownPaths(Mapping[str, str]):
    """``own`` (the entity events' ``known_types``, kept current by the caller) over ``listed``
    (the workspace map's ``KnownTypes``); ``noted`` keeps what this request removed."""

    def __init__(self, own: dict[str, str], listed: Mapping[str, str]) -> None:
        self.own = own
        self.listed = listed
        self.gone: set[str] = set()

    def __getitem__(self, path: str) -> str:
        own = self.own
        if path in own:
            return own[path]
        if path in self.gone:
            raise KeyError(path)
        return self.listed[path]

    def __iter__(self) -> Iterator[str]:
        yield from self.own
        own, gone = self.own, self.gone
        yield from (p for p in self.listed if p not in own and p not in gone)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def exists(self, path: str) -> bool:
        """Whether ``path`` is known to exist, its kind known or not."""
        if path in self.own:
            return True
        return path not in self.gone and listed_exists(self.listed, path)

    def noted(self, event: Mapping[str, Any]) -> None:
        """An event read now: a path it removed is gone from the listed paths too."""
        if event.get("action") == "delete":
            self.gone.add(event["path"])
            return
        if event.get("action") == "move" and isinstance(event.get("from"), str):
            self.gone.add(event["from"])
        self.gone.discard(event["path"])
