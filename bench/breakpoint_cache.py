"""An emulated Anthropic prompt cache (explicit ``cache_control`` breakpoints), for replay
benchmarks (``bench/cost.py --protocol anthropic``).

The model follows Anthropic's documentation of prompt caching:

- a request is a sequence of content blocks, in the order the prompt is built: each tool, each
  ``system`` block, then each message's content blocks (a string content is one text block);
  some blocks carry a ``cache_control`` breakpoint. A block is compared without its
  ``cache_control`` (a marker does not change the prompt), a message's role and other keys going
  with its first block;
- an entry is a prefix ending at a block boundary, identified by a hash chained over its blocks;
  only prefixes of at least ``min_prefix_tokens`` (1,024) are read or written;
- at each breakpoint the cache looks for a live entry ending at that block or at most
  ``lookback`` (20) blocks before it, the longest first; the request reads the longest prefix
  found over all its breakpoints, at ``r``, and the entry read is refreshed (its TTL, 300 s,
  starts again);
- the request writes an entry at each of its breakpoints (the prefix up to that block). The
  tokens from the read point to the last (cacheable) breakpoint are billed as written (Anthropic:
  1.25×), those after it at 1×.

A prompt that changes more than 20 blocks before every breakpoint therefore reads nothing past
an earlier breakpoint's prefix (the system prompt's, as Claude Code marks it), however much of
it is unchanged: what the automatic prefix cache (``bench/cache_emulator.py``) would read.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from bench.cache_emulator import CacheUse, Segments, serialise_message

LOOKBACK_BLOCKS = 20
Block = tuple[bytes, bool]  # a block's serialisation (no cache_control), whether it is marked


def _marked(block: Any) -> bool:
    return isinstance(block, dict) and block.get("cache_control") is not None


def _plain(block: Any) -> Any:
    if isinstance(block, dict) and "cache_control" in block:
        return {k: v for k, v in block.items() if k != "cache_control"}
    return block


def anthropic_blocks(body: dict[str, Any]) -> list[Block]:
    """A Messages body as the cache reads it (see the module docstring)."""
    out: list[Block] = []
    for tool in body.get("tools") or []:
        out.append((serialise_message(_plain(tool)), _marked(tool)))
    system = body.get("system")
    if isinstance(system, str):
        system = [{"type": "text", "text": system}]
    for block in system or []:
        out.append((serialise_message(_plain(block)), _marked(block)))
    for m in body.get("messages") or []:
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        head = {k: v for k, v in m.items() if k != "content"}
        for k, block in enumerate(blocks or [None]):
            # the role (and any other key of the message) goes with its first block
            key = {"message": head, "block": _plain(block)} if k == 0 else _plain(block)
            out.append((serialise_message(key), _marked(block)))
    return out


def marker_places(body: dict[str, Any]) -> list[tuple[str, int, int]]:
    """Where a Messages body's breakpoints are: (``tools`` | ``system``, index, 0), or
    (``message``, index counted from the last message, block index in it). Messages are counted
    from the end, so a rewrite that elides or drops older messages leaves the places alone."""
    out: list[tuple[str, int, int]] = []
    for section in ("tools", "system"):
        items = body.get(section)
        if isinstance(items, list):
            out += [(section, i, 0) for i, b in enumerate(items) if _marked(b)]
    messages = body.get("messages") or []
    for i, m in enumerate(messages):
        content = m.get("content")
        if isinstance(content, list):
            back = len(messages) - 1 - i
            out += [("message", back, k) for k, b in enumerate(content) if _marked(b)]
    return out


class BreakpointCache:
    """Anthropic's prompt cache, as seen by one session (see the module docstring)."""

    def __init__(
        self,
        segments: Segments,
        ttl_s: float = 300.0,
        min_prefix_tokens: int = 1024,
        lookback: int = LOOKBACK_BLOCKS,
    ) -> None:
        self.segments = segments
        self.ttl_s = ttl_s
        self.min_prefix_tokens = min_prefix_tokens
        self.lookback = lookback
        self._entries: dict[bytes, float] = {}  # prefix hash -> last use

    def _alive(self, key: bytes, now: float) -> bool:
        last = self._entries.get(key)
        if last is None:
            return False
        if now - last > self.ttl_s:
            del self._entries[key]
            return False
        return True

    def send(self, blocks: Sequence[Block], now: float) -> CacheUse:
        """Serve one request (its blocks) at time ``now``: what it reads, then its writes."""
        count = self.segments.count
        # cum[k]: tokens of the first k blocks; keys[k]: the hash naming that prefix
        cum, keys = [0], [b""]
        for data, _ in blocks:
            cum.append(cum[-1] + count(data))
            keys.append(hashlib.blake2b(keys[-1] + data, digest_size=16).digest())
        marks = [k + 1 for k, (_, marked) in enumerate(blocks) if marked]
        cacheable = [b for b in marks if cum[b] >= self.min_prefix_tokens]
        read_at = 0
        for b in cacheable:
            for k in range(b, max(0, b - self.lookback) - 1, -1):
                if k <= read_at or cum[k] < self.min_prefix_tokens:
                    break  # nothing longer than what is read already
                if self._alive(keys[k], now):
                    read_at = k
                    break
        if read_at:
            self._entries[keys[read_at]] = now  # a hit refreshes the entry it read
        cached = cum[read_at]
        for b in cacheable:
            self._entries[keys[b]] = now
        written = max(0, cum[cacheable[-1]] - cached) if cacheable else 0
        return CacheUse(cum[-1], cached, written)
