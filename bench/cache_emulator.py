"""An emulated provider prompt cache, for replay benchmarks (``bench/cost.py``).

The model is the automatic prefix cache OpenAI documents (Chat Completions and Responses), at
token level (Anthropic's explicit breakpoints: ``bench/breakpoint_cache.py``):

- a request is serialised deterministically, segment by segment (the tools schema, then each
  message as ``orjson`` with sorted keys), and tokenised per segment; its token sequence is the
  concatenation of its segments' tokens;
- what the cache holds is the token sequences of earlier requests ("entries"); a request reads
  the longest common prefix with any live entry, rounded *down* to a multiple of
  ``step_tokens`` (128), and nothing when that is below ``min_prefix_tokens`` (1,024);
- a prefix expires ``ttl_s`` (300 s) after its last use; a hit refreshes the prefix it read;
- each request then writes its own whole prompt (when it is at least ``min_prefix_tokens``
  long; shorter prompts are neither read from nor written to the cache). The tokens written are
  the uncached part of a cacheable prompt: what Anthropic bills at 1.25×.

Entries are kept as a trie of segments (each node holds its segment's token count and the time of
its last use), so finding the common prefix costs one dict lookup per segment. Where the request
parts from every live entry inside a segment, the common prefix within that segment is found on
the token ids of the new segment and of each live sibling (exact, and cheap: a binary search on
slice equality). A node's last use is never older than any of its children's, since a request
writes or refreshes its whole path.

Prices (``Pricing``): a cached token costs ``read_ratio`` of a fresh one, a written token
``write_ratio``; the effective input cost of a request is ``uncached + read_ratio × cached +
(write_ratio − 1) × written``, in fresh-token units.
"""

from __future__ import annotations

import json
from array import array
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

Encode = Callable[[str], list[int]]


@dataclass(frozen=True)
class Pricing:
    """One price scheme, in units of a fresh input token."""

    name: str
    read_ratio: float  # a cached token costs this share of a fresh one
    write_ratio: float = 1.0  # a token written to the cache (Anthropic: 1.25)

    def cost(self, use: CacheUse) -> float:
        """The request's effective input cost, in fresh tokens."""
        uncached = use.prompt_tokens - use.cached_tokens
        extra = (self.write_ratio - 1.0) * use.write_tokens
        return uncached + self.read_ratio * use.cached_tokens + extra


@dataclass(frozen=True)
class CacheUse:
    """What the upstream reports for one request: prompt tokens, read from the cache, written."""

    prompt_tokens: int
    cached_tokens: int
    write_tokens: int


def serialise_message(message: Any) -> bytes:
    """One message (or the tools schema) as deterministic bytes: orjson with sorted keys; the
    standard library (ASCII escapes) for what orjson refuses (lone surrogates)."""
    try:
        return orjson.dumps(message, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return json.dumps(message, sort_keys=True, ensure_ascii=True, default=str).encode()


class Segments:
    """Serialisation and tokens of segments, shared by every cache of one replay (the same
    messages come back in every request and through every method).

    Serialisations are memoised per message object (the object is kept so its id is not reused)
    for two requests (``next_request``: a rule that renders a message anew on every request would
    otherwise pin every copy), token counts per serialised bytes, token ids in a small LRU (they
    are needed only where a request parts from the cache inside a segment, mostly the newest
    messages)."""

    def __init__(self, encode: Encode, token_lru: int = 1024) -> None:
        self._encode = encode
        self._by_id: dict[int, tuple[Any, bytes]] = {}
        self._previous: dict[int, tuple[Any, bytes]] = {}
        self._counts: dict[bytes, int] = {}
        self._ids: OrderedDict[bytes, array[int]] = OrderedDict()
        self._token_lru = token_lru

    def clear(self) -> None:
        """Forget everything (between conversations: keeps memory flat)."""
        self._by_id.clear()
        self._previous.clear()
        self._counts.clear()
        self._ids.clear()

    def next_request(self) -> None:
        """A new request begins: serialisations not used by this one or the last are let go."""
        self._previous, self._by_id = self._by_id, {}

    def of(self, messages: Sequence[Any], tools: Any = None) -> list[bytes]:
        """The request's segments: the tools schema (when any), then each message."""
        out = [serialise_message(tools)] if tools else []
        by_id, previous = self._by_id, self._previous
        for m in messages:
            key = id(m)
            hit = by_id.get(key)
            if hit is None or hit[0] is not m:
                hit = previous.get(key)
                if hit is None or hit[0] is not m:
                    hit = (m, serialise_message(m))
                by_id[key] = hit
            out.append(hit[1])
        return out

    def count(self, segment: bytes) -> int:
        n = self._counts.get(segment)
        if n is None:
            n = self._counts[segment] = len(self.ids(segment))
        return n

    def ids(self, segment: bytes) -> array[int]:
        """The segment's token ids."""
        hit = self._ids.get(segment)
        if hit is not None:
            self._ids.move_to_end(segment)
            return hit
        tokens = array("I", self._encode(segment.decode("utf-8", "surrogatepass")))
        self._ids[segment] = tokens
        if len(self._ids) > self._token_lru:
            self._ids.popitem(last=False)
        return tokens


def common_prefix(a: array[int], b: array[int]) -> int:
    """Length of the common prefix of two token arrays (binary search on C-level slice equality)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class _Node:
    __slots__ = ("children", "last_used", "segment")

    def __init__(self, segment: bytes, now: float) -> None:
        self.segment = segment
        self.last_used = now
        self.children: dict[bytes, _Node] = {}


class PrefixCache:
    """One provider's prompt cache, as seen by one session (see the module docstring)."""

    def __init__(
        self,
        segments: Segments,
        ttl_s: float = 300.0,
        min_prefix_tokens: int = 1024,
        step_tokens: int = 128,
    ) -> None:
        self.segments = segments
        self.ttl_s = ttl_s
        self.min_prefix_tokens = min_prefix_tokens
        self.step_tokens = step_tokens
        self._root = _Node(b"", float("-inf"))

    def _alive(self, node: _Node, now: float) -> bool:
        return now - node.last_used <= self.ttl_s

    def send(self, request: Sequence[bytes], now: float) -> CacheUse:
        """Serve one request (its segments) at time ``now``: what it reads, then its write."""
        count = self.segments.count
        prompt = sum(count(s) for s in request)
        if prompt < self.min_prefix_tokens:
            return CacheUse(prompt, 0, 0)  # never cached: no read, no write, no refresh
        node, shared, depth = self._root, 0, 0
        for seg in request:
            child = node.children.get(seg)
            if child is None:
                break
            if not self._alive(child, now):
                del node.children[seg]  # expired, and its whole subtree with it
                break
            node, shared, depth = child, shared + count(seg), depth + 1
        if depth < len(request):
            shared += self._partial(node, request[depth], now)
        cached = shared - shared % self.step_tokens
        if cached < self.min_prefix_tokens:
            cached = 0
        self._write(request, now)
        return CacheUse(prompt, cached, prompt - cached)

    def _partial(self, node: _Node, segment: bytes, now: float) -> int:
        """Tokens of ``segment`` shared with the longest live sibling it parts from."""
        best = 0
        mine: array[int] | None = None
        for child in node.children.values():
            if not self._alive(child, now):
                continue
            if mine is None:
                mine = self.segments.ids(segment)
            best = max(best, common_prefix(mine, self.segments.ids(child.segment)))
        return best

    def _write(self, request: Sequence[bytes], now: float) -> None:
        """The request's whole path, used now (a read refreshes what it read, a write is new)."""
        node = self._root
        for seg in request:
            child = node.children.get(seg)
            if child is None:
                child = node.children[seg] = _Node(seg, now)
            else:
                child.last_used = now
            node = child
