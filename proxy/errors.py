"""Every error the proxy answers with or logs, in one tree. Answers take OpenAI's shape:
{"error": {message, type, param, code}}; the status is the class's own.

ProxyError                 500 internal_error: a bug of ours (``InternalError`` says so)
 ├── InternalError         500 internal_error "Internal error in ctxproxy: <exception class>"
 ├── BadRequest            400 invalid_request_error (bad JSON, missing/malformed field)
 ├── Unauthorized          401 invalid_api_key (auth.mode: keys; a litellm upstream without a key)
 ├── Forbidden             403 forbidden (/ui, /metrics from a client they are not open to)
 ├── ModelNotFound         404 model_not_found (no upstream serves the model, or another provider)
 ├── RequestTimeout        408 request_timeout (body not received within limits.body_read_timeout_s)
 ├── PayloadTooLarge       413 request_too_large (over limits.max_body_bytes)
 ├── UnsupportedMediaType  415 unsupported_media_type (a chat body not sent as application/json)
 ├── TooManyInFlight       429 too_many_requests_in_flight (limits.max_in_flight_per_principal,
 │                         limits.max_body_bytes_in_flight_per_principal)
 ├── ClientGone            499 client_disconnected: logged, never sent (nobody is left)
 ├── UpstreamMisconfigured 500 upstream_misconfigured (config names a provider litellm lacks)
 ├── UpstreamKeyMissing    500 upstream_key_missing (an upstream's api_key_env is empty)
 ├── UpstreamFailed        the provider's status (502 if none) upstream_error or the provider's
 │                         error class (litellm path); the provider's message, shortened
 ├── UpstreamUnreachable   502 upstream_connection_error
 ├── ShuttingDown          503 shutting_down: logged for a request cancelled before forwarding,
 │                         or a stream cut at server.shutdown_timeout_s (its status stays)
 └── UpstreamTimeout       504 upstream_timeout

Upstream errors name the upstream as configured (``upstreams[].name``), never its URL, host or a
traceback; those go to the server log. Errors clip the client text they quote.
"""

from __future__ import annotations

from typing import Any

import orjson


class ProxyError(Exception):
    status = 500
    error_type = "server_error"
    code = "internal_error"

    def __init__(self, message: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.error_type,
                "param": self.param,
                "code": self.code,
            }
        }

    def body_bytes(self) -> bytes:
        return orjson.dumps(self.body())


class BadRequest(ProxyError):
    status = 400
    error_type = "invalid_request_error"
    code = "invalid_request"


class Unauthorized(ProxyError):
    status = 401
    error_type = "invalid_request_error"
    code = "invalid_api_key"


class RequestTimeout(ProxyError):
    status = 408
    error_type = "invalid_request_error"
    code = "request_timeout"


class ModelNotFound(ProxyError):
    status = 404
    error_type = "invalid_request_error"
    code = "model_not_found"


class PayloadTooLarge(ProxyError):
    status = 413
    error_type = "invalid_request_error"
    code = "request_too_large"


class UnsupportedMediaType(ProxyError):
    status = 415
    error_type = "invalid_request_error"
    code = "unsupported_media_type"


def require_json(content_type: str | None) -> None:
    """A chat body must be declared JSON: ``application/json`` or ``application/*+json``, any
    parameters. A missing type is refused too: the official SDKs always send one, and a body a web
    page may POST cross-site without a CORS preflight is ``text/plain``, a form, or untyped."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    ):
        return
    shown = repr(media[:100]) if media else "none"
    raise UnsupportedMediaType(
        f"Content-Type must be application/json (got {shown}).", param="content-type"
    )


class UpstreamFailed(ProxyError):
    """A provider's own error (or one inside the client library calling it), with its status."""

    status = 502
    error_type = "upstream_error"
    code = "upstream_error"

    def __init__(self, message: str, status: int | None = None, code: str | None = None) -> None:
        super().__init__(message, code=code)
        if status is not None:
            self.status = status


class UpstreamUnreachable(ProxyError):
    status = 502
    error_type = "upstream_error"
    code = "upstream_connection_error"


class UpstreamTimeout(ProxyError):
    status = 504
    error_type = "upstream_error"
    code = "upstream_timeout"


class StreamTooLong(ProxyError):
    """A streamed answer still running when ``limits.stream_max_s`` passed: cut."""

    status = 504
    error_type = "upstream_error"
    code = "stream_max_exceeded"


class InternalError(ProxyError):
    """A bug of ours or a library's: the client learns only the exception's class."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(f"Internal error in ctxproxy: {type(exc).__name__}")


class Forbidden(ProxyError):
    """An admin view asked for from a client it is not open to (no key would help)."""

    status = 403
    error_type = "invalid_request_error"
    code = "forbidden"


class TooManyInFlight(ProxyError):
    """The principal already has its bound of requests, or of body bytes, in flight
    (``proxy.server.in_flight``); answered with ``retry-after``."""

    status = 429
    error_type = "rate_limit_error"
    code = "too_many_requests_in_flight"
    retry_after_s = 1


CLIENT_CLOSED = 499  # nginx's status for "client closed the request", as logged, never sent


class ClientGone(ProxyError):
    """Logged (status 499), never sent: there is nobody left to send it to."""

    status = CLIENT_CLOSED
    error_type = "client_error"
    code = "client_disconnected"


class ShuttingDown(ProxyError):
    """Logged when the server cancels a request it had not forwarded yet, or a stream still
    running when ``server.shutdown_timeout_s`` has passed (shutdown)."""

    status = 503
    error_type = "server_error"
    code = "shutting_down"

    def __init__(
        self, message: str = "The proxy shut down before the request was forwarded."
    ) -> None:
        super().__init__(message)


class UpstreamMisconfigured(ProxyError):
    """Config names a provider litellm does not know: no call is made."""

    code = "upstream_misconfigured"


class UpstreamKeyMissing(ProxyError):
    """The upstream's ``api_key_env`` is empty: litellm would fall back on another key."""

    code = "upstream_key_missing"


# Errors raised before a request's body was read to its end: its connection carries no other
BODY_UNREAD = (RequestTimeout, PayloadTooLarge, UnsupportedMediaType, TooManyInFlight)
