"""The server's own upstream keys (``api_key_env`` values) out of what an upstream answers with
success. A client never knew them, so one in a success answer is a leak however it came: a
gateway's 200 carrying an error object that quotes the key, an event stream whose error has no
``data:`` line, an unnamed event of plain text. Error answers and error events are redacted as a
whole (``error_redaction``); this replaces the keys' exact bytes anywhere else, and leaves every
other byte as it came (one ``bytes.find`` a key where none is)."""

from __future__ import annotations

from collections.abc import AsyncIterator

REPLACEMENT = b"[REDACTED]"


def without_keys(data: bytes, keys: tuple[bytes, ...]) -> bytes:
    """``data`` with each of ``keys`` (longest first) replaced."""
    for key in keys:
        if key in data:
            data = data.replace(key, REPLACEMENT)
    return data


def _held_back(data: bytes, keys: tuple[bytes, ...]) -> int:
    """How many of ``data``'s last bytes may begin a key that the next piece ends."""
    if not data:
        return 0
    last = data[-1:]
    held = 0
    for key in keys:
        if last not in key:  # no start of this key ends here (an event's closing newline)
            continue
        for n in range(min(len(key) - 1, len(data)), held, -1):
            if data.endswith(key[:n]):
                held = n
                break
    return held


async def stream_without_keys(
    chunks: AsyncIterator[bytes], keys: tuple[bytes, ...]
) -> AsyncIterator[bytes]:
    """``chunks`` with ``keys`` replaced, also where one is split between two pieces: a piece's
    last bytes that may begin a key wait for the next piece (an event ends with a newline, which
    no key holds, so nothing waits between whole events). Closing this closes ``chunks``."""
    tail = b""
    try:
        try:
            async for chunk in chunks:
                data = without_keys(tail + chunk, keys) if tail else without_keys(chunk, keys)
                keep = _held_back(data, keys)
                tail = data[len(data) - keep :] if keep else b""
                out = data[: len(data) - keep] if keep else data
                if out:
                    yield out
        except Exception:  # the upstream broke off: what was held back goes before its error
            if tail:
                yield without_keys(tail, keys)
            raise
    finally:
        close = getattr(chunks, "aclose", None)
        if close is not None:
            await close()
    if tail:
        yield without_keys(tail, keys)
