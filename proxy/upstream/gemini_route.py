"""Gemini's model paths, ``/{version}/models/{model}:{method}``: read from a request's path (the
model is checked as the upstream URL takes it) and written for the upstream's."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl

METHODS = frozenset({"generateContent", "streamGenerateContent", "countTokens"})
VERSIONS = frozenset({"v1beta", "v1"})


@dataclass(frozen=True)
class Route:
    """A Gemini model route: ``/{version}/models/{model}:{method}``."""

    version: str
    model: str
    method: str

    @property
    def path(self) -> str:
        return f"/{self.version}/models/{self.model}:{self.method}"

    @property
    def stream(self) -> bool:
        return self.method == "streamGenerateContent"


MAX_MODEL_CHARS = 256


def parse_route(path: str) -> Route | None:
    """``/{v1beta|v1}/models/{model}:{method}``, or None for any other path. The model name is
    checked as the upstream URL takes it: letters, digits, ``.``, ``_``, ``-`` (nothing a path
    or a query could be steered with)."""
    version, sep, rest = path.lstrip("/").partition("/models/")
    if not sep or version not in VERSIONS:
        return None
    model, colon, method = rest.partition(":")
    if not colon:
        return None
    return Route(version, model, method)


def valid_model(model: str) -> bool:
    return (
        0 < len(model) <= MAX_MODEL_CHARS
        and model[0].isascii()
        and model[0].isalnum()
        and all(c.isascii() and (c.isalnum() or c in "._-") for c in model)
    )


def system_parameters(query: str, name: str) -> list[str]:
    """The values of Google's system parameter ``name`` in ``query``, in order: Google reads
    ``$alt`` (``%24alt``) as ``alt``, ``$key`` as ``key``."""
    return [v for n, v in parse_qsl(query[:4096]) if n in (name, "$" + name)]


def upstream_query(query: str) -> str:
    """What of the client's query goes upstream: ``alt`` (``sse``) only, never ``key``; the
    first ``alt`` the proxy knows, in lower case (a client asking ``alt=SSE`` reads events)."""
    for value in system_parameters(query, "alt"):
        if value.lower() in ("sse", "json"):
            return f"alt={value.lower()}"
    return ""
