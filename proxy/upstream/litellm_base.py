"""The base URL litellm is given for an upstream: a Gemini upstream's with the API's version
(litellm writes ``{base}/models/{model}:…``; the native relay takes the version from the client's
path, so the config gives it without one)."""

from __future__ import annotations

import re

from proxy.settings import UpstreamSettings


def litellm_base(upstream: UpstreamSettings) -> str | None:
    """The base URL litellm is given: a Gemini upstream's with the API's version
    (``gemini_api_base``), the others' as configured."""
    if upstream.kind == "gemini" and upstream.base_url:
        return gemini_api_base(upstream.base_url)
    return upstream.base_url


# a base URL that ends with the API's version already: /v1, /v1beta, /v1alpha
_API_VERSION = re.compile(r"/v1(?:beta|alpha)?$")


def gemini_api_base(base: str) -> str:
    """A Gemini upstream's base URL as litellm takes it: with the API's version, which the native
    relay takes from the client's path (litellm writes ``{base}/models/{model}:…``; without the
    version, the shipped config's Google URL has no such path)."""
    base = base.rstrip("/")
    return base if _API_VERSION.search(base) else base + "/v1beta"
