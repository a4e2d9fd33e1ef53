"""A request whose client went away stops between units of work. The rules are pure: stopping
one half way leaves nothing behind, and its request has nobody to answer. The server's worker
threads say, for the request they run, how to tell (``watching``); elsewhere nothing is asked and
``check`` costs one attribute read. Checked between rules and between the tool calls a rule reads
(``rules.activity.observations``, ``track_entities``): a client sending 500 KiB of commands and
hanging up held a worker for seconds of work nobody would read."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator


class Abandoned(BaseException):
    """The request's client is gone (a BaseException: no rule's containment catches it)."""


_local = threading.local()


@contextlib.contextmanager
def watching(gone: Callable[[], bool]) -> Iterator[None]:
    """Within: ``check`` raises ``Abandoned`` once ``gone()`` says so (this thread only)."""
    _local.gone = gone
    try:
        yield
    finally:
        _local.gone = None


def check() -> None:
    gone = getattr(_local, "gone", None)
    if gone is not None and gone():
        raise Abandoned
