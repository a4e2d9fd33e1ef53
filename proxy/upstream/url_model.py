"""Whether a model name may go where a provider's URL is built from it.

litellm builds some providers' URLs from the model's name (Gemini's
``{base}/models/{model}:generateContent``, Vertex AI's, Bedrock's), unquoted, and the HTTP
client then resolves ``..``: a name like ``gemini-x/../../../v1beta/cachedContents?`` sent any
body the tenant chose to any endpoint of the provider's host with the gateway's key. A name
that reaches litellm for a provider other than an OpenAI-compatible server (whose names are
sent in the body only) must hold only the characters model names use, no empty, ``.`` or ``..``
segment; a Gemini API name, none of ``/`` and ``:`` either (the native route's rule) past its
provider's prefix (Vertex AI's Model Garden names hold a ``/``: ``meta/llama3-8b-maas``)."""

from __future__ import annotations

from proxy.upstream.gemini_route import valid_model

_ALLOWED = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/:@+")


def safe_in_url(provider: str, model: str) -> bool:
    if not model or not model[0].isascii() or not model[0].isalnum():
        return False
    if any(c not in _ALLOWED for c in model):
        return False
    if any(part in ("", ".", "..") for part in model.split("/")):
        return False
    if provider == "gemini":  # Gemini's names are one segment (Vertex AI's may be more)
        return valid_model(model.removeprefix("gemini/"))
    return True
