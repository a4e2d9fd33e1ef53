"""Whether litellm got as far as calling the provider, for the request this task makes.

A protocol bridged through litellm (Messages or Responses to an OpenAI upstream, Chat or Gemini
to another kind) is translated by litellm before anything is sent. A body the translation cannot
take (``tools: [null]``, ``thinking: "x"``, a content part with no type) raises there, inside
litellm, as an AttributeError or its catch-all APIConnectionError: the client's fault, which it
must hear as a 400 in its own protocol, not as the upstream's 502. litellm logs every call it
is about to send (``Logging.pre_call``, after the translation, before the request): a callback
there marks the task's call as sent, and a failure before it is the translation's.

The watch is an object a context variable holds, so a mark made in a copied context (litellm
runs some steps in a thread with the caller's context copied) is seen by the caller."""

from __future__ import annotations

import functools
import sys
from contextvars import ContextVar, Token
from typing import Any


class Watch:
    """One litellm call watched: ``with watch:`` around it, then ``watch.sent``."""

    def __init__(self) -> None:
        self.sent = False
        self.watching = False  # the mark is among litellm's callbacks: ``sent`` tells
        self._token: Token[Watch | None] | None = None

    @property
    def unsent(self) -> bool:
        """Whether the call failed before it was sent (False when that cannot be told)."""
        return self.watching and not self.sent

    def __enter__(self) -> Watch:
        litellm = sys.modules.get("litellm")
        self.watching = litellm is not None and install(litellm)
        self._token = _WATCH.set(self)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _WATCH.reset(self._token)
            self._token = None


_WATCH: ContextVar[Watch | None] = ContextVar("ctxproxy_litellm_watch", default=None)


def _marked() -> None:
    watch = _WATCH.get()
    if watch is not None:
        watch.sent = True


def install(litellm: Any) -> bool:
    """Adds the mark to litellm's pre-call callbacks unless it is there (each watch does: a
    reload or a reassignment of the list drops it); whether it is there now."""
    callbacks = getattr(litellm, "input_callback", None)
    if not isinstance(callbacks, list):
        return False
    if not any(isinstance(c, _mark_class()) for c in callbacks):
        callbacks.append(_mark_class()())
    return True


@functools.cache
def _mark_class() -> type:
    from litellm.integrations.custom_logger import CustomLogger

    class SentMark(CustomLogger):  # type: ignore[misc]
        def log_pre_api_call(self, model: Any, messages: Any, kwargs: Any) -> None:
            _marked()

    return SentMark
