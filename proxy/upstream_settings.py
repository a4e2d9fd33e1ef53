"""One upstream's settings (``upstreams[i]`` in the config): where its models go, how, with which
key and headers; validated at start-up like the rest of ``proxy.settings``."""

from __future__ import annotations

import fnmatch
import re
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from proxy.pricing import PriceOverride
from proxy.strict_model import Strict

HTTP_URL = re.compile(r"https?://[^\s/?#]+(?:[/?#]\S*)?", re.IGNORECASE)  # linear: no nesting


# An environment variable's name, as a shell exports one
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


def env_name(value: str | None) -> str | None:
    """``value`` when it names an environment variable; a key pasted in its place is refused
    without being shown (the error is printed, and logged)."""
    if value and not _ENV_NAME.fullmatch(value):  # empty: none, as unset
        raise ValueError(
            "must name an environment variable (letters, digits and '_'), not hold a key "
            "(the value is not shown)"
        )
    return value


class UpstreamSettings(Strict):
    name: str
    match: list[str] = Field(default_factory=lambda: ["*"])  # model names, exact or glob
    # openai: OpenAI's API or a compatible server (chat completions, Responses, native relay);
    # anthropic: Anthropic's Messages API (native relay; other protocols through litellm);
    # gemini: Google's Gemini API, generateContent (native relay; other protocols through
    # litellm); litellm: any other provider, through litellm.
    kind: Literal["openai", "anthropic", "gemini", "litellm"] = "openai"
    # Unset: https://api.openai.com/v1 (openai), https://api.anthropic.com without /v1
    # (anthropic), https://generativelanguage.googleapis.com without /v1beta (gemini),
    # litellm's default for the provider (litellm).
    base_url: str | None = None
    # When unset, the client's own Authorization (kind anthropic: x-api-key or Authorization)
    # passes through (auth.mode: passthrough only; keys mode requires it on every upstream,
    # since the client's bearer is the proxy key).
    api_key_env: str | None = None
    # kind litellm: the provider litellm calls (anthropic, gemini, bedrock …), whatever the model
    # name's prefix says. Derived from ``match`` when unset (after the fields it reads).
    provider: str | None = Field(default=None, validate_default=True)
    # Headers set on every upstream request (after the client's account headers are dropped).
    headers: dict[str, str] = Field(default_factory=dict)
    call_ids: Literal["auto", "anthropic", "openai", "mistral", "any"] = Field(
        default="auto",
        description="the tool-call ids the upstream accepts; the chain repair renames the "
        "others (proxy.call_id_rules). auto: by kind, provider and host (OpenAI's API: at most "
        "40 characters, 64 in Responses; Mistral's: nine letters and digits; Anthropic, and a "
        "provider not known: ^[a-zA-Z0-9_-]+$; another OpenAI-compatible server or Gemini: any)",
    )
    timeout_s: float = Field(default=600.0, gt=0)
    connect_timeout_s: float = Field(default=10.0, gt=0)
    # Claude models through litellm (kind litellm, and chat completions to kind anthropic): place
    # prompt-cache breakpoints the client left out (``proxy.upstream.cache_breakpoints``); off
    # sends the client's marks only.
    cache_breakpoints: Literal["auto", "off"] = "auto"
    cache_diagnostics: bool = Field(
        default=False,
        description="ask the provider why a request missed its prompt cache, naming the "
        "session's previous answer: Anthropic's cache diagnostics (Messages) and OpenAI's "
        "prompt cache diagnostics (Responses); the verdict is kept in the request's cache line",
    )
    pricing: PriceOverride = Field(
        default_factory=PriceOverride,
        description="prices and cache rules for every model this upstream serves "
        "(proxy.pricing); a matching top-level `pricing:` entry wins key by key",
    )

    @field_validator("api_key_env")
    @classmethod
    def _key_variable(cls, value: str | None) -> str | None:
        return env_name(value)

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and not HTTP_URL.fullmatch(value):
            raise ValueError("not an http:// or https:// URL")
        # Anthropic's paths carry /v1 (/v1/messages), as in its SDKs' ANTHROPIC_BASE_URL
        anthropic = info.data.get("kind") == "anthropic"
        if anthropic and value is not None and value.rstrip("/").endswith("/v1"):
            raise ValueError("kind anthropic: without /v1 (e.g. https://api.anthropic.com)")
        # Gemini's paths carry their version (/v1beta/models/…), as GOOGLE_GEMINI_BASE_URL
        gemini = info.data.get("kind") == "gemini"
        if gemini and value is not None and value.rstrip("/").endswith(("/v1beta", "/v1")):
            raise ValueError(
                "kind gemini: without /v1beta (e.g. https://generativelanguage.googleapis.com)"
            )
        return value

    @field_validator("provider")
    @classmethod
    def _provider(cls, value: str | None, info: ValidationInfo) -> str | None:
        kind, match = info.data.get("kind"), info.data.get("match")
        if kind != "litellm":
            if value is not None:
                raise ValueError("only for kind: litellm")
            return None
        if value is not None:
            if not _PROVIDER_NAME.fullmatch(value):
                raise ValueError(f"not a litellm provider name: {value!r}")
            return value
        if match is None:  # match itself is invalid, and reported
            return None
        return _derived_provider(match)

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: dict[str, str]) -> dict[str, str]:
        out = {}
        for name, text in value.items():
            lowered = name.lower()
            if not _HEADER_NAME.fullmatch(lowered):
                raise ValueError(f"not a header name: {name!r}")
            if lowered in _RESERVED_HEADERS:
                raise ValueError(f"{name!r} is set by the proxy (keys come from api_key_env)")
            if not _HEADER_VALUE.fullmatch(text):
                raise ValueError(f"header {name!r}: only printable ASCII in a value")
            out[lowered] = text
        return out

    @property
    def server_credentials(self) -> bool:
        """Whether the upstream is called with the server's credential whoever the client is:
        a key from ``api_key_env``, or a litellm provider that signs in from the process's
        environment alone (``AMBIENT_PROVIDERS``), which drops a client's key unread."""
        return bool(self.api_key_env) or (
            self.kind == "litellm" and self.provider in AMBIENT_PROVIDERS
        )

    def serves(self, model: str) -> bool:
        return any(model == p or fnmatch.fnmatchcase(model, p) for p in self.match)


# litellm providers that sign in with the server's environment (Vertex AI's application default
# credentials, SageMaker's AWS ones) and never read the api_key they are handed: in passthrough
# every client, with whatever key it made up, reaches them as the server
AMBIENT_PROVIDERS = frozenset({"vertex_ai", "vertex_ai_beta", "sagemaker", "sagemaker_chat"})
_PROVIDER_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9a-z-]+")  # an RFC 9110 token
_HEADER_VALUE = re.compile(r"[\t\x20-\x7e]*")  # printable ASCII: sent as is by every client
# Framing, routing and keys: the proxy's to set (keys from api_key_env), never by header.
_RESERVED_HEADERS = frozenset(
    {
        "api-key",
        "authorization",
        "connection",
        "content-length",
        "content-type",
        "host",
        "transfer-encoding",
        "x-api-key",
        "x-goog-api-key",
    }
)
_GLOB = re.compile(r"\[[^\]]*\]|[*?]")


def _derived_provider(match: list[str]) -> str:
    """The one provider ``match`` names: a ``prefix/…`` pattern names its prefix; litellm is
    asked about any other pattern (its wildcards filled in), and is imported (seconds) only for
    those. A pattern litellm cannot place names none; two providers, or none at all, fail."""
    found: dict[str, str] = {}  # provider -> the first pattern naming it
    bare = []
    for pattern in match:
        prefix, slash, _ = pattern.partition("/")
        if slash and _PROVIDER_NAME.fullmatch(prefix):  # no wildcard in it either
            found.setdefault(prefix, pattern)
        else:
            bare.append(pattern)
    if bare:
        from proxy.providers import provider_of  # lazy: imports litellm

        for pattern in bare:
            named = provider_of(_GLOB.sub("x", pattern))
            if named is not None:
                found.setdefault(named, pattern)
    if len(found) > 1:
        named = ", ".join(f"{p!r} ({pattern!r})" for p, pattern in found.items())
        raise ValueError(f"match names more than one provider: {named}; set provider")
    if not found:
        raise ValueError(
            f"cannot tell litellm's provider from match {match!r}; set provider "
            "(e.g. anthropic, gemini, bedrock)"
        )
    return next(iter(found))
