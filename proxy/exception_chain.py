"""An exception's chain of causes, and whether a connection failed anywhere in it: read by the
litellm bridge's error mapping (``proxy.upstream.litellm_errors``) and by the Messages adapter's
error events (``proxy.litellm_anthropic_events``), which that mapping imports."""

from __future__ import annotations

from collections.abc import Iterator


def chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and its causes, each once."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < 16:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def network_failure(exc: BaseException) -> bool:
    """A connection that failed or broke, wherever litellm wrapped it (its own
    ``APIConnectionError``, or an ``InternalServerError`` around httpx's or aiohttp's error)."""
    import aiohttp
    import httpx

    kinds = (
        httpx.TransportError,
        aiohttp.ClientConnectionError,
        aiohttp.ClientPayloadError,  # the body broke off
        ConnectionError,
    )
    return any(isinstance(e, kinds) for e in chain(exc))
