"""Calling the provider: ``openai`` (the pooled aiohttp client for OpenAI-compatible upstreams,
bytes relayed untouched; it hands ``kind: litellm`` upstreams to ``litellm``), ``transport`` (the
relay pieces every protocol shares), ``anthropic`` and ``responses`` (Anthropic Messages and
Responses, relayed natively on the same client), ``bridge`` (a protocol the upstream does not
speak, through litellm), ``litellm`` (other providers, imported on first use, with
``cache_breakpoints`` for Claude), reading usage from answers and SSE streams, and
``error_redaction`` (what a client sees of an upstream's error, redacted as the log is).

``UpstreamResponse`` lives here so both clients return it without importing each other.
May import the top-level ``errors``, ``settings`` and ``tokens``, ``rules.redact`` and
``rules.messages``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class UpstreamResponse:
    status: int
    headers: dict[str, str]
    body: bytes | None = None  # non-streaming
    chunks: AsyncIterator[bytes] | None = None  # streaming: raw bytes as they arrive
    close: Any = None  # awaitable to release the connection
    extra: dict[str, Any] = field(default_factory=dict)
    # a stream that is one JSON array (Gemini's without ``alt=sse``), relayed element by
    # element: how its usage is read from the relayed pieces (a ``UsageTap`` class), and what
    # ends it for the client when the upstream broke off (given the error body in its shape)
    json_array: bool = False
    tap: Callable[[], Any] | None = None
    error_tail: Callable[[bytes], bytes] | None = None
