"""A Gemini stream litellm reads that ends before its answer's last chunk is a break, not an
answer.

Google ends every answer with a chunk whose candidate names a ``finishReason`` (``STOP``,
``MAX_TOKENS``, ``SAFETY`` …), or a ``promptFeedback.blockReason`` for a refused prompt. litellm's
Gemini reader takes a stream's end as the answer's whatever came before it, and writes a
``stop`` finish for every chunk: a connection closed mid-answer reached a chat, Messages or
Responses client bridged to a Gemini upstream as a whole answer, a cut tool call's arguments
included. Its OpenAI reader refuses the same cut ("Stream ended before a finish_reason was
received"); this makes its Gemini reader refuse it alike, with the same error, which litellm
then reports as a failure mid-stream (the client gets its protocol's error event).

Installed once, when litellm is first imported (``proxy.providers.load_litellm``); litellm is
pinned by the lock, and ``tests/proxy/upstream/test_bridged_stream_end.py`` fails if a release
moves what this wraps."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from typing import Any

import httpx

_INSTALLED = "_ctxproxy_end_checked"
_ENDED = "_ctxproxy_answer_ended"
_installed = False
# the error's request, as litellm's own end-of-stream error names one (its messages read it)
_REQUEST = httpx.Request("POST", "https://generativelanguage.googleapis.com")


def answer_ends(chunk: Any) -> bool:
    """Whether a raw Gemini chunk ends its answer: a candidate's finishReason, or the prompt's
    blockReason."""
    if not isinstance(chunk, Mapping):
        return False
    feedback = chunk.get("promptFeedback")
    if isinstance(feedback, Mapping) and feedback.get("blockReason"):
        return True
    candidates = chunk.get("candidates")
    if not isinstance(candidates, list):
        return False
    return any(isinstance(c, Mapping) and c.get("finishReason") for c in candidates)


# Gemini's ends of an answer that holds no answer: the model's call could not be read (litellm
# writes them as a plain ``stop``, and an agent took the empty answer for its last word)
_FAILED_CALLS = frozenset({"MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL"})
# what the client is told (``litellm_errors.failure`` finds it in the exception litellm wraps)
FAILED_CALL = "the model's function call could not be read"


def failed_call(chunk: Mapping[str, Any]) -> bool:
    """Whether a raw Gemini chunk ends its answer with a function call the model got wrong."""
    candidates = chunk.get("candidates")
    return isinstance(candidates, list) and any(
        isinstance(c, Mapping) and c.get("finishReason") in _FAILED_CALLS for c in candidates
    )


def install() -> None:
    """Wraps litellm's Gemini stream reader (``ModelResponseIterator``): each raw chunk is
    looked at for the answer's end, and the stream's end without one raises."""
    global _installed
    if _installed:
        return
    from litellm.llms.vertex_ai.gemini import vertex_and_google_ai_studio_gemini as gemini

    reader: Any = gemini.ModelResponseIterator
    _installed = True
    if getattr(reader, _INSTALLED, False):
        return
    parse: Callable[[Any, dict[str, Any]], Any] = reader.chunk_parser
    next_chunk: Callable[[Any], Coroutine[Any, Any, Any]] = reader._anext_chunk

    def chunk_parser(self: Any, chunk: dict[str, Any]) -> Any:
        if answer_ends(chunk):
            setattr(self, _ENDED, True)
            if failed_call(chunk):
                reasons = {c.get("finishReason") for c in chunk["candidates"] if c}
                raise httpx.RemoteProtocolError(
                    f"{FAILED_CALL} (Gemini's {'/'.join(sorted(map(str, reasons - {None})))})",
                    request=_REQUEST,
                )
        return parse(self, chunk)

    async def _anext_chunk(self: Any) -> Any:
        try:
            return await next_chunk(self)
        except StopAsyncIteration:
            if not getattr(self, _ENDED, False):
                raise httpx.RemoteProtocolError(
                    "Stream ended before a finishReason was received", request=_REQUEST
                ) from None
            raise

    start_hop: Callable[..., Any] = reader._start_hop

    def _start_hop(self: Any, *args: Any, **kwargs: Any) -> Any:
        # litellm continues an answer cut at its output cap in another request (a "hop"): the
        # end seen was the last hop's; this one's is still to come
        setattr(self, _ENDED, False)
        return start_hop(self, *args, **kwargs)

    reader.chunk_parser = chunk_parser
    reader._anext_chunk = _anext_chunk
    reader._start_hop = _start_hop
    setattr(reader, _INSTALLED, True)
