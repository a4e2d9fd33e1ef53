"""Errors the proxy answers with, all in OpenAI's shape: {"error": {message, type, param, code}}.

ProxyError
 ├── BadRequest            400 invalid_request_error (bad JSON, missing/malformed field)
 ├── Unauthorized          401 invalid_api_key (auth.mode: keys)
 ├── ModelNotFound         404 model_not_found (no upstream serves the model)
 ├── RequestTimeout        408 request_timeout (body not received within limits.body_read_timeout_s)
 ├── PayloadTooLarge       413 request_too_large (over limits.max_body_bytes)
 ├── UnsupportedMediaType  415 unsupported_media_type (a chat body not sent as application/json)
 ├── UpstreamFailed        the provider's status (502 if none) upstream_error or the provider's
 │                         error class (litellm path); the provider's message, shortened
 ├── UpstreamUnreachable   502 upstream_connection_error
 └── UpstreamTimeout       504 upstream_timeout

Upstream errors name the upstream as configured (``upstreams[].name``), never its URL, host or a
traceback; those go to the server log.
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
