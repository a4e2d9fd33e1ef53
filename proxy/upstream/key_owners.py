"""A provider's own key never goes to another provider's own API.

In passthrough the client's key goes to whichever upstream its model routes to. With the
shipped config a Gemini CLI asking for a model no upstream names (``gemma-3-27b-it``) reaches
the catch-all ``openai`` upstream: its Google key would be sent to api.openai.com. Keys shaped
as one provider's (``sk-ant-``: Anthropic's; ``AIza``, ``ya29.``: Google's; ``sk-proj-``,
``sk-svcacct-``, ``sk-admin-``: OpenAI's) are refused, unsent, on their way to another of
those three providers' own hosts. A key of no known shape, or an upstream elsewhere (a gateway,
OpenRouter, a local server: whatever the operator pointed a route at), is sent as before."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

from proxy.errors import ModelNotFound
from proxy.principals import CREDENTIAL_HEADERS
from proxy.settings import UpstreamSettings
from proxy.upstream.openai import DEFAULT_BASE_URLS

ANTHROPIC, GOOGLE, OPENAI = "Anthropic", "Google", "OpenAI"
_KEY_PREFIXES = (
    ("sk-ant-", ANTHROPIC),
    ("AIza", GOOGLE),
    ("ya29.", GOOGLE),  # a Google OAuth access token
    ("sk-proj-", OPENAI),
    ("sk-svcacct-", OPENAI),
    ("sk-admin-", OPENAI),
)
_HOSTS = {
    "api.anthropic.com": ANTHROPIC,
    "api.openai.com": OPENAI,
    "generativelanguage.googleapis.com": GOOGLE,
}
# litellm's provider names whose default host is one of those (kind litellm, no base_url)
_LITELLM_PROVIDERS = {"anthropic": ANTHROPIC, "openai": OPENAI, "gemini": GOOGLE}


def key_owner(key: str) -> str | None:
    """The provider whose key ``key`` is by its shape, or None."""
    for prefix, owner in _KEY_PREFIXES:
        if key.startswith(prefix):
            return owner
    return None


def host_owner(upstream: UpstreamSettings) -> str | None:
    """The provider whose own API ``upstream`` is, or None (a host of no known provider)."""
    if upstream.base_url:
        host = (urlsplit(upstream.base_url).hostname or "").lower().rstrip(".")
        return _HOSTS.get(host)
    if upstream.kind == "litellm":
        return _LITELLM_PROVIDERS.get(upstream.provider or "")
    return _HOSTS.get(urlsplit(DEFAULT_BASE_URLS[upstream.kind]).hostname or "")


def foreign(upstream: UpstreamSettings, key: str | None) -> tuple[str, str] | None:
    """(the key's provider, the upstream's) when ``key`` is one provider's and ``upstream``
    another's own API; None when it may go."""
    owner = key_owner(key) if key else None
    if owner is None:
        return None
    host = host_owner(upstream)
    return None if host is None or host == owner else (owner, host)


def foreign_credentials(upstream: UpstreamSettings, headers: Mapping[str, str]) -> bool:
    """Whether any credential header a client sent (all go to an Anthropic relay) is another
    provider's than ``upstream``'s own API."""
    for name in CREDENTIAL_HEADERS:
        value = headers.get(name, "")
        value = value[7:].strip() if value[:7].lower() == "bearer " else value.strip()
        if foreign(upstream, value) is not None:
            return True
    return False


def require_owned(upstream: UpstreamSettings, key: str | None, model: str) -> None:
    """Raises ModelNotFound when the client's ``key`` is one provider's and ``upstream`` is
    another's own API: the key is not sent."""
    owners = foreign(upstream, key)
    if owners is None:
        return
    owner, host = owners
    shown = model if len(model) <= 80 else model[:79] + "…"
    # a relayed request names no model the proxy read (embeddings): the request itself
    what = f"The model '{shown}' goes" if model else "This request goes"
    raise ModelNotFound(
        f"{what} to upstream {upstream.name}, {host}'s API, and the key you sent is {owner}'s: "
        f"it was not sent there. Ask for a model an upstream of {owner} serves, or send a key "
        f"of {host}.",
        param="model",
    )
