"""What an ``error`` event litellm's Messages adapter wrote for a call stands for: the call's
failure, with its status (``proxy.upstream.bridge``'s streams)."""

from __future__ import annotations

import re
from typing import Any

import orjson

from proxy.errors import ProxyError, UpstreamFailed, UpstreamTimeout, UpstreamUnreachable
from proxy.litellm_gemini_end import FAILED_CALL
from proxy.protocols.errors import anthropic_type
from proxy.providers import load_litellm
from proxy.settings import UpstreamSettings
from proxy.upstream.litellm_errors import short_message

# the status of each of Anthropic's error types (``api_error``: the provider's, not ours)
_ERROR_STATUS = {
    "invalid_request_error": 400, "authentication_error": 401, "permission_error": 403,
    "not_found_error": 404, "request_too_large": 413, "rate_limit_error": 429,
    "api_error": 502, "overloaded_error": 529,
}  # fmt: skip


# litellm's exceptions by name, as its Messages adapter writes them into an ``api_error``
# event: it reads a status only from its own provider exceptions, so a Gemini 400 or 503 (an
# ``openai``-style exception there) came out as 500, and reached Claude Code as a 502 it retried.
# Each name is read by its class in litellm's namespace: the OpenAI SDK error it derives from
# (``UnsupportedParamsError`` is a ``BadRequestError``), a timeout first (it is a kind of
# connection error); these are the classes that says nothing of, or the wrong thing
_EXCEPTION_STATUS = {
    "PaymentRequiredError": 402, "ServiceUnavailableError": 503, "BadGatewayError": 502,
    "MidStreamFallbackError": 503,
}  # fmt: skip
_BASE_STATUS = (
    ("APITimeoutError", 504), ("BadRequestError", 400), ("AuthenticationError", 401),
    ("PermissionDeniedError", 403), ("NotFoundError", 404), ("UnprocessableEntityError", 422),
    ("RateLimitError", 429), ("InternalServerError", 500), ("APIConnectionError", 502),
)  # fmt: skip
_EXCEPTION_NAME = re.compile(r"litellm\.(\w{1,40}+):")
_EXCEPTION_CHAIN = re.compile(r"(?:litellm\.\w{1,40}+:\s*+){1,8}")  # at the message's start


def _chain(message: str) -> list[str]:
    """The litellm exceptions an error event's message opens with, outermost first."""
    names = _EXCEPTION_CHAIN.match(message.lstrip())
    return _EXCEPTION_NAME.findall(names[0]) if names is not None else []


def _exception_status(message: str) -> int | None:
    """The status of the litellm exceptions an error event's message names, the innermost
    known one first ("litellm.MidStreamFallbackError: litellm.RateLimitError: …" is a 429)."""
    found = [_named_status(n) for n in _chain(message)]
    return next((status for status in reversed(found) if status is not None), None)


def _connection_failed(message: str) -> bool:
    """Whether litellm's connection error is the innermost exception a message names (its
    words for a connection that failed or broke off: "… litellm.APIConnectionError: …")."""
    return _chain(message)[-1:] == ["APIConnectionError"]


def _named_status(name: str) -> int | None:
    if name in _EXCEPTION_STATUS:
        return _EXCEPTION_STATUS[name]
    litellm = load_litellm()
    found = getattr(litellm, name, None) or getattr(litellm.exceptions, name, None)
    if not isinstance(found, type) or not issubclass(found, Exception):
        return None
    import openai  # loaded with litellm

    for base, status in _BASE_STATUS:
        if issubclass(found, getattr(openai, base)):
            return status
    return None


def failed_event(
    upstream: UpstreamSettings, event: Any, mid_stream: bool = False
) -> ProxyError | None:
    """The failure of the call an ``error`` event litellm's Messages adapter wrote for it
    stands for (it catches the call's exception), with the status of its type, or, for its
    catch-all ``api_error``, of the exception it names; a connection that failed (``mid_stream``:
    after the stream began) in the proxy's words, as on the native paths."""
    if not isinstance(event, bytes) or not event.startswith(b"event: error"):
        return None
    _, _, data = event.partition(b"data:")
    try:
        error = orjson.loads(data).get("error") or {}
    except (orjson.JSONDecodeError, AttributeError):
        error = {}
    kind = error.get("type") if isinstance(error, dict) else None
    kind = kind if isinstance(kind, str) and kind in _ERROR_STATUS else "api_error"
    message = error.get("message") if isinstance(error, dict) else None
    text = short_message(message, upstream) if isinstance(message, str) else ""
    said = f"Upstream {upstream.name}: {text}" if text else f"Upstream {upstream.name} failed."
    named = _exception_status(message) if kind == "api_error" and isinstance(message, str) else None
    if named == 502 and _connection_failed(str(message)) and FAILED_CALL not in str(message):
        what = "broke off mid-stream" if mid_stream else "could not be reached"
        return UpstreamUnreachable(f"Upstream {upstream.name} {what}.")
    if named == 504:
        return UpstreamTimeout(f"Upstream {upstream.name} timed out.")
    if named is not None:
        return UpstreamFailed(said, status=named, code=anthropic_type(named))
    return UpstreamFailed(said, status=_ERROR_STATUS[kind], code=kind)
