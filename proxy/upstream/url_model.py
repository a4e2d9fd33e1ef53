"""Whether a model name may go where a provider's URL is built from it.

litellm builds some providers' URLs from the model's name (Gemini's
``{base}/models/{model}:generateContent``, Vertex AI's, Bedrock's), unquoted, and the HTTP
client then resolves ``..``: a name like ``gemini-x/../../../v1beta/cachedContents?`` sent any
body the tenant chose to any endpoint of the provider's host with the gateway's key. A name
that reaches litellm for a provider other than an OpenAI-compatible server (whose names are
sent in the body only) must hold only the characters model names use, no empty, ``.`` or ``..``
segment; a Gemini name, none of ``/`` and ``:`` either (the native route's rule) past its
provider's prefix."""

from __future__ import annotations

from proxy.upstream.gemini_route import valid_model

_ALLOWED = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/:@+")
_GEMINI_PROVIDERS = frozenset({"gemini", "vertex_ai", "vertex_ai_beta"})


def safe_in_url(provider: str, model: str) -> bool:
    if not model or not model[0].isascii() or not model[0].isalnum():
        return False
    if any(c not in _ALLOWED for c in model):
        return False
    if any(part in ("", ".", "..") for part in model.split("/")):
        return False
    if provider in _GEMINI_PROVIDERS:
        bare = model.removeprefix(f"{provider}/")
        return valid_model(bare) or (provider != "gemini" and _vertex_name(bare))
    return True


def _vertex_name(model: str) -> bool:
    """Vertex AI's partner models carry a version after ``@`` (``claude-3-5-sonnet@20240620``)."""
    name, at, version = model.partition("@")
    return bool(at) and valid_model(name) and valid_model(version)
