"""What a client is told when litellm fails (the whole failure goes to the server log): a
timeout, an upstream out of reach, the provider's own error with its status, its message
shortened and redacted (no URLs, paths or addresses), or, for a failure before anything was
sent (``litellm_sent``), the body's own fault as a 400."""

from __future__ import annotations

import json
import logging
import re
import traceback
from urllib.parse import urlsplit

import orjson

from proxy.errors import (
    BadRequest,
    ProxyError,
    UpstreamFailed,
    UpstreamTimeout,
    UpstreamUnreachable,
)
from proxy.exception_chain import chain as _chain
from proxy.exception_chain import network_failure as network_failure
from proxy.litellm_answers import RefusedAnswer
from proxy.litellm_anthropic_events import ErrorEvent
from proxy.litellm_gemini_end import FAILED_CALL
from proxy.litellm_urls import ClientUrlRefused
from proxy.protocols.errors import anthropic_type
from proxy.providers import load_litellm
from proxy.settings import UpstreamSettings
from proxy.upstream.transport import relay_headers
from rules.redact import redact_text, redacted_prefix

_MAX_SHOWN_URL = 2000  # characters of a refused URL, named to the client
log = logging.getLogger("ctxproxy.litellm")

_MAX_MESSAGE_CHARS = 300
_READ_CHARS = 16 * _MAX_MESSAGE_CHARS  # of a message, read for the part shown
_MAX_LOGGED_CHARS = 20_000


def failure(
    upstream: UpstreamSettings, exc: Exception, mid_stream: bool = False, unsent: bool = False
) -> ProxyError:
    """What the client is told about ``exc``; the whole of it goes to the server log.
    ``unsent``: litellm failed before sending anything (``litellm_sent``)."""
    litellm = load_litellm()
    name = upstream.name
    detail = "".join(traceback.format_exception(exc))[-_MAX_LOGGED_CHARS:]
    log.warning("upstream %s (litellm, %s) failed: %s", name, _where(upstream), redact_text(detail))
    fetch = next((e for e in _chain(exc) if isinstance(e, ClientUrlRefused)), None)
    if fetch is not None:  # refused before any connection (``litellm_urls``): nothing was sent
        return refused_url(upstream, fetch.url)
    if _timed_out(exc, litellm.Timeout):
        return UpstreamTimeout(f"Upstream {name} timed out.")
    if FAILED_CALL in detail:  # Gemini's MALFORMED_FUNCTION_CALL, raised as a broken stream
        return UpstreamFailed(f"Upstream {name}: {FAILED_CALL} (the model's fault: retry).")
    if _malformed(exc):  # aiohttp calls an answer it cannot parse a 400: not the client's
        return UpstreamFailed(f"Upstream {name} sent an answer that could not be read.")
    redirect = _redirect_status(exc)
    if redirect is not None:  # not followed (``litellm_answers``): as the native relays say it
        return UpstreamFailed(f"Upstream {name} answered HTTP {redirect}, which is not relayed.")
    event = next((e for e in _chain(exc) if isinstance(e, ErrorEvent)), None)
    if event is not None:  # the provider's error event: its type's status, its words
        text = short_message(event.message, upstream)
        said = f"Upstream {name}: {text}" if text else f"Upstream {name} failed ({event.kind})."
        return UpstreamFailed(said, status=event.status, code=event.kind)
    refused = next((e for e in _chain(exc) if isinstance(e, RefusedAnswer)), None)
    if refused is not None:  # reached, and answered: not a connection's failure
        return UpstreamFailed(f"Upstream {name} sent an answer that could not be read ({refused}).")
    if network_failure(exc):
        what = "broke off mid-stream" if mid_stream else "could not be reached"
        return UpstreamUnreachable(f"Upstream {name} {what}.")
    kind = type(exc).__name__
    found = getattr(exc, "status_code", None)
    status = found if type(exc).__module__.startswith("litellm") and isinstance(found, int) else 0
    answered = _provider_status(exc)
    if answered is None and not unsent and not mid_stream and _unreadable(exc):
        # a 200 whose body litellm could not read (litellm calls it a 500): not "Expecting
        # value: line 1 column 1", nor a 422
        return UpstreamFailed(f"Upstream {name} sent an answer that could not be read.")
    if answered is not None:  # the provider's own (Anthropic's 529, which litellm calls 500)
        status = answered
    elif status == 500 and not unsent and not mid_stream:
        # litellm's own 500 with no answer of that status: what it could not make of a 2xx
        # answer (one with no "choices"): the upstream's fault, a 502 (a 500 is the proxy's own)
        status = 502
    elif not unsent and _unreadable(exc):  # a 200 whose body litellm could not read: not a 422
        return UpstreamFailed(f"Upstream {name} sent an answer that could not be read.")
    if unsent and not mid_stream and not 400 <= status < 500:
        # litellm failed translating the body before sending anything: the body's fault
        return BadRequest(
            f"The request could not be translated for upstream {name} ({_cause(exc)}); "
            "check the types of its fields."
        )
    if isinstance(exc, litellm.APIConnectionError):
        # litellm's catch-all for whatever broke on its side (e.g. an answer it could not
        # parse): its message is a traceback of its own, so the client gets the class only
        return UpstreamFailed(f"Upstream {name} failed ({kind}); details are in the proxy's log.")
    if status >= 400:
        # a provider's error, mapped by litellm to a class named as in OpenAI's SDK
        text = short_message(str(getattr(exc, "message", "") or exc), upstream)
        if _BARE_CODE.fullmatch(text):  # the SDK's words for an answer that was no JSON: its text
            text = short_message(_answer_text(exc), upstream) or text
        message = f"Upstream {name}: {text}" if text else f"Upstream {name} failed ({kind})."
        status = status if status < 600 else 502
        # a stream's failure (mid-stream, or litellm's MidStreamFallbackError for one before
        # anything was relayed) is an error event's: its code a type word of its status, as the
        # bridge's Messages streams have it (``bridge_events``), not litellm's class's name
        streamed = mid_stream or kind == "MidStreamFallbackError"
        code = anthropic_type(status) if streamed else kind
        return UpstreamFailed(message, status=status, code=code)
    return UpstreamFailed(f"Upstream {name} failed ({kind}).")


def provider_headers(exc: BaseException) -> dict[str, str]:
    """The provider's ``retry-after``, rate-limit and request-id headers on a failure litellm
    raised (its ``litellm_response_headers``, else the httpx response it wraps), as the native
    path relays them: a client backs off as the provider asked."""
    for e in _chain(exc):
        found = getattr(e, "litellm_response_headers", None)
        if found is None:
            found = getattr(getattr(e, "response", None), "headers", None)
        if found:
            try:
                return relay_headers(dict(found.items()), names=frozenset())
            except (AttributeError, TypeError, ValueError):  # not a mapping of strings
                return {}
    return {}


def _provider_status(exc: BaseException) -> int | None:
    """The status of the HTTP answer a failure came from (httpx's or aiohttp's error, innermost
    in litellm's wrapping), or None when no answer had an error status."""
    import aiohttp
    import httpx

    found = None
    for e in _chain(exc):
        if isinstance(e, httpx.HTTPStatusError):
            found = e.response.status_code
        elif isinstance(e, aiohttp.ClientResponseError):
            found = e.status
    return found if isinstance(found, int) and 400 <= found < 600 else None


def _redirect_status(exc: BaseException) -> int | None:
    """The status of a redirect a failure came from (its response, innermost), or None."""
    for e in _chain(exc):
        response = getattr(e, "response", None)
        status = getattr(response, "status_code", None)
        if isinstance(status, int) and 300 <= status < 400:
            return status
    return None


# The OpenAI SDK's message for an error answer that is no JSON (a gateway's page, plain text)
_BARE_CODE = re.compile(r"Error code: \d{3}")


def _answer_text(exc: BaseException) -> str:
    """The error answer's own text, as the SDK kept it (its ``body``), or ""."""
    for e in _chain(exc):
        body = getattr(e, "body", None)
        if isinstance(body, bytes):
            body = body[:_READ_CHARS].decode("utf-8", "replace")
        if isinstance(body, str) and body.strip():
            return body[:_READ_CHARS]
    return ""


# litellm's words for a 2xx answer whose JSON is not of the provider's shape (a 422 it raises)
_NOT_CONVERTED = "Error converting to valid response"


def _unreadable(exc: BaseException) -> bool:
    """Whether the failure is an answer that was no JSON (an HTML page, a body cut short), or
    JSON not of the provider's shape (litellm's 422 "Error converting to valid response", an
    ``AttributeError`` or ``KeyError`` of its reading the answer, after the request went): the
    upstream's."""
    for e in _chain(exc):
        if isinstance(e, (json.JSONDecodeError, AttributeError, KeyError)):
            return True
        if _NOT_CONVERTED in str(getattr(e, "message", "") or "")[:_READ_CHARS]:
            return True
    return False


def _where(upstream: UpstreamSettings) -> str:
    """The upstream's address for the server log, without credentials in it."""
    if not upstream.base_url:
        return "litellm's default for the provider"
    url = urlsplit(upstream.base_url)
    return f"{url.scheme}://{url.netloc.rpartition('@')[2]}{url.path}"


def _cause(exc: BaseException) -> str:
    """The innermost failure not of litellm's own wrapping, as its class name: what about the
    body the translation could not take (an AttributeError, a TypeError …)."""
    found = exc
    for e in _chain(exc):
        if not type(e).__module__.startswith("litellm"):
            found = e
    return type(found).__name__


def refused_url(upstream: UpstreamSettings, url: str) -> BadRequest:
    """The client's 400 for a URL only a download by the proxy could carry to the provider."""
    shown = redacted_prefix(url, _MAX_SHOWN_URL)  # a signed URL's token is a secret too
    return BadRequest(
        f"The request names the file at {shown}, which upstream {upstream.name} takes only as "
        "content, and the proxy fetches no URL a request names: send its content inline "
        "(base64) instead, or an https URL where the provider reads one."
    )


def _timed_out(exc: BaseException, litellm_timeout: type[BaseException]) -> bool:
    import httpx

    kinds = (litellm_timeout, TimeoutError, httpx.TimeoutException)
    return any(isinstance(e, kinds) for e in _chain(exc))


def _malformed(exc: BaseException) -> bool:
    """An answer aiohttp's HTTP parser refused (bad chunked framing, a bad status line): it
    raises a ``ClientResponseError`` with status 400 from its ``HttpProcessingError``, which is
    no status the provider sent."""
    from aiohttp.http_exceptions import HttpProcessingError

    return any(isinstance(e, HttpProcessingError) for e in _chain(exc))


# litellm's wording around a provider's message: "litellm.BadRequestError: AnthropicException - …
# Handle with `litellm.BadRequestError`."
# its exception chain before the provider's words ("litellm.MidStreamFallbackError:
# litellm.APIConnectionError: APIConnectionError: OpenAIException - …")
_LITELLM_PREFIX = re.compile(
    r"^\s*+(?:litellm\.\w{1,40}+:\s*+)++(?:\w{1,40}?(?:Error|Exception):\s*+)*+"
    r"(?:\w{1,40}?Exception\s*+-\s*+)?"
)
# litellm's closing advice, at the very end of its message: looked for there only (a search of
# ``\s*…$`` over the whole text is quadratic in a run of blanks an upstream's error may hold)
_SUFFIX_START = "Handle with `litellm."
_SUFFIX = re.compile(r"Handle with `litellm\.\w{1,80}`\.?\s*+")
_SUFFIX_WINDOW = 200
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s\"'<>]+")
_PATH = re.compile(r"(?<![\w.~-])(?:[A-Za-z]:)?(?:[\\/][\w.@+~-]+){2,}[\\/]?")
_HOST_PORT = re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?\b|\[[0-9a-fA-F:]+\](?::\d+)?")


def _without_suffix(text: str) -> str:
    """``text`` without litellm's "… Handle with `litellm.X`." at its end (and the full stop
    and blanks before it)."""
    cut = text.rfind(_SUFFIX_START, max(0, len(text.rstrip()) - _SUFFIX_WINDOW))
    if cut < 0 or _SUFFIX.fullmatch(text, cut) is None:
        return text
    head = text[:cut].rstrip()
    return head[:-1] if head.endswith(".") else head


def short_message(text: str, upstream: UpstreamSettings) -> str:
    """A provider's error message for the client: its own ``message`` when the text is JSON,
    else the first line that is not part of a traceback; without URLs, paths, addresses or our
    upstream's host; redacted; at most ``_MAX_MESSAGE_CHARS``."""
    text = _without_suffix(_LITELLM_PREFIX.sub("", text, count=1))
    found = _json_message(text)
    if found is None:
        lines = (line.strip() for line in text.splitlines() if line[:1] not in (" ", "\t"))
        found = next((s for s in lines if s and not s.startswith("Traceback")), "")
    # a provider quoting MiBs of the request back: only what can be shown is read (redacted
    # past the cut, so a key the cut splits is not kept in part)
    found = found[:_READ_CHARS]
    host = urlsplit(upstream.base_url or "").netloc
    if host:
        found = found.replace(host, upstream.name)
    found = _HOST_PORT.sub("<host>", _PATH.sub("<path>", _URL.sub("<url>", found)))
    found = redacted_prefix(found, _MAX_MESSAGE_CHARS + 1)
    if len(found) > _MAX_MESSAGE_CHARS:
        found = found[: _MAX_MESSAGE_CHARS - 1] + "…"
    return found


def _json_message(text: str) -> str | None:
    """``error.message`` (or ``message``) of a JSON error body, as most providers send one."""
    start, end = text.find("{"), text.rfind("}")
    if not 0 <= start < end:
        return None
    try:
        data = orjson.loads(text[start : end + 1])
    except orjson.JSONDecodeError:
        return None
    for holder in (data.get("error") if isinstance(data, dict) else None, data):
        if isinstance(holder, dict) and isinstance(holder.get("message"), str):
            return holder["message"].split("\n", 1)[0].strip()
    return None
