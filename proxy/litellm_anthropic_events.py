"""An Anthropic stream's ``error`` event, read by litellm, keeps the status of its type.

Anthropic reports a failure after its answer's head as an ``error`` event (``overloaded_error``
often as the stream's first event): the status of the same error answered as an HTTP status is
its type's (``overloaded_error`` 529, ``rate_limit_error`` 429). litellm's Anthropic reader
raised every one as a 500 in its own words ("AnthropicError - Overloaded"): a client of another
protocol got a 502 where the provider meant "overloaded, back off". Its reader now raises an
``ErrorEvent`` with the type's status, which ``proxy.upstream.litellm_errors.failure`` tells
the client as the provider's; litellm's Messages adapter (an Anthropic client bridged to it)
writes it as an error event of that status's type, which ``proxy.upstream.bridge_events`` reads
back. The adapter names litellm's exceptions in that event: its catch-all ``APIConnectionError``
with no connection failed (a provider's stream opening with its own error) is named a bad
gateway, not a connection that failed.

Installed once, when litellm is first imported (``proxy.providers.load_litellm``); litellm is
pinned by the lock, and ``tests/proxy/upstream/test_bridged_error_events.py`` fails if a release
moves what this wraps."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from proxy.exception_chain import network_failure

# the status of each of Anthropic's error types (its ``api_error``, a 500, is left to litellm:
# the provider's failure, told as a 502)
_STATUS = {
    "invalid_request_error": 400, "authentication_error": 401, "permission_error": 403,
    "not_found_error": 404, "request_too_large": 413, "rate_limit_error": 429,
    "overloaded_error": 529,
}  # fmt: skip
_INSTALLED = "_ctxproxy_error_events"
# litellm's exceptions its message opens with ("litellm.MidStreamFallbackError:
# litellm.APIConnectionError: …"; bounded, linear)
_CHAIN = re.compile(r"(?:litellm\.\w{1,40}+:\s*+){1,8}")
_MAX_MESSAGE_CHARS = 4096  # of the event's message, kept (the client is shown a short part)


class ErrorEvent(Exception):
    """An ``error`` event of an Anthropic stream: its type, message and the type's status."""

    def __init__(self, kind: str, message: str, status: int) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind, self.message, self.status = kind, message, status


def error_event(chunk: Any) -> ErrorEvent | None:
    """The ``ErrorEvent`` an Anthropic stream's event stands for, or None (not an error, or
    one of a type with no status of its own)."""
    if not isinstance(chunk, dict) or chunk.get("type") != "error":
        return None
    error = chunk.get("error")
    kind = error.get("type") if isinstance(error, dict) else None
    if not isinstance(kind, str) or kind not in _STATUS:
        return None
    message = error.get("message") if isinstance(error, dict) else None
    said = message[:_MAX_MESSAGE_CHARS] if isinstance(message, str) else ""
    return ErrorEvent(kind, said, _STATUS[kind])


def _chained_event(exc: BaseException) -> ErrorEvent | None:
    """The ``ErrorEvent`` among ``exc`` and its causes (litellm wraps it), or None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < 16:
        if isinstance(current, ErrorEvent):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _unless_unreachable(exc: BaseException, message: str) -> str:
    """``message`` (the adapter's words for ``exc``) naming a bad gateway, not litellm's
    catch-all ``APIConnectionError``, when no connection failed: an OpenAI-compatible stream's
    own error (``{"error": …}`` as its first event) is one, which the client was told as an
    upstream that "could not be reached" (``proxy.upstream.bridge_events`` reads the name)."""
    chain = _CHAIN.match(message)
    if chain is None or not chain[0].rstrip().endswith("litellm.APIConnectionError:"):
        return message
    if network_failure(exc):
        return message
    return "litellm.BadGatewayError: " + message[chain.end() :]


def install() -> None:
    from litellm.llms.anthropic.chat.handler import ModelResponseIterator
    from litellm.llms.anthropic.messages.adapters import streaming_iterator as adapter

    reader: Any = ModelResponseIterator
    if getattr(reader, _INSTALLED, False):
        return
    status_of: Callable[[Exception], tuple[int, str]] = adapter._error_status_and_message

    def error_status_and_message(exc: Exception) -> tuple[int, str]:
        # the Messages adapter's error event for a failed stream: an error event's own status
        # (its type follows from it), not litellm's 500 ("AnthropicError - Overloaded")
        found = _chained_event(exc)
        if found is not None:
            return found.status, found.message
        status, message = status_of(exc)
        return status, _unless_unreachable(exc, message)

    adapter._error_status_and_message = error_status_and_message
    parse: Callable[[Any, dict[str, Any]], Any] = reader.chunk_parser

    def chunk_parser(self: Any, chunk: dict[str, Any]) -> Any:
        found = error_event(chunk)
        if found is not None:
            raise found
        return parse(self, chunk)

    reader.chunk_parser = chunk_parser
    setattr(reader, _INSTALLED, True)
