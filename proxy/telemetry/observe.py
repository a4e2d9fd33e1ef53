"""Request lifecycle hooks: metrics and structured logs subscribe here instead of living in the
handler. A subscriber that raises is contained: observing must never fail a request."""

from __future__ import annotations

import logging
from typing import Any, Protocol

log = logging.getLogger("ctxproxy.observe")


class Observer(Protocol):
    def started(self) -> None: ...

    def finished(self, row: dict[str, Any]) -> None: ...


class Observers:
    def __init__(self, observers: list[Observer] | None = None) -> None:
        self.observers: list[Observer] = list(observers or [])

    def add(self, observer: Observer) -> None:
        self.observers.append(observer)

    def started(self) -> None:
        for o in self.observers:
            try:
                o.started()
            except Exception:
                log.exception("observer %r failed on start", o)

    def finished(self, row: dict[str, Any]) -> None:
        for o in self.observers:
            try:
                o.finished(row)
            except Exception:
                log.exception("observer %r failed on finish", o)
