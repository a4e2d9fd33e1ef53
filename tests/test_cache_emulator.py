"""The emulated prompt cache of bench/cost.py (bench/cache_emulator.py): reads round down to 128
tokens and start at 1,024, prefixes expire 300 s after their last use and a hit refreshes them,
the common prefix is found at token level inside a segment, writes are the uncached part of a
cacheable prompt. A toy tokeniser (one token per byte) keeps every length exact."""

from __future__ import annotations

from array import array

import pytest

from bench.cache_emulator import (
    CacheUse,
    PrefixCache,
    Pricing,
    Segments,
    common_prefix,
    serialise_message,
)


def byte_tokens(text: str) -> list[int]:
    return list(text.encode())


def cache(**options: float) -> PrefixCache:
    return PrefixCache(Segments(byte_tokens), **options)  # type: ignore[arg-type]


def seg(char: str, n: int) -> bytes:
    return (char * n).encode()


def test_a_prompt_below_the_minimum_is_neither_read_nor_written() -> None:
    c = cache()
    assert c.send([seg("a", 1000)], 0.0) == CacheUse(1000, 0, 0)
    # nothing was written: the same prompt grown past the minimum reads nothing
    assert c.send([seg("a", 1000), seg("b", 100)], 1.0) == CacheUse(1100, 0, 1100)


def test_reads_round_down_to_128_tokens_and_start_at_1024() -> None:
    c = cache()
    first = [seg("s", 1100), seg("u", 300)]
    assert c.send(first, 0.0) == CacheUse(1400, 0, 1400)  # cold: all written
    # shares 1,400 tokens: 1,280 read (10 × 128), the rest written
    assert c.send([*first, seg("t", 50)], 1.0) == CacheUse(1450, 1280, 170)
    # shares 1,100 tokens with the cache: rounds down to 1,024, exactly the minimum
    assert c.send([seg("s", 1100), seg("x", 500)], 2.0) == CacheUse(1600, 1024, 576)
    # a common prefix of 1,000 tokens rounds to 896: below the minimum, nothing read
    assert c.send([seg("s", 1000), seg("y", 600)], 3.0).cached_tokens == 0


def test_the_common_prefix_is_found_inside_a_segment_at_token_level() -> None:
    c = cache(min_prefix_tokens=128)
    c.send([seg("s", 200), b"a" * 300 + b"OLD"], 0.0)
    # the second segment parts from the cached one after 300 tokens: 500 shared, 384 read
    use = c.send([seg("s", 200), b"a" * 300 + b"NEW" + seg("z", 100)], 1.0)
    assert use == CacheUse(603, 384, 219)
    # the longest of several live siblings counts
    c.send([seg("s", 200), b"a" * 450 + b"!"], 2.0)
    assert c.send([seg("s", 200), b"a" * 460], 3.0).cached_tokens == 640  # 650 shared


def test_a_prefix_expires_after_the_ttl_since_its_last_use() -> None:
    c = cache()
    base = [seg("s", 2048)]
    c.send(base, 0.0)
    assert c.send(base, 300.0).cached_tokens == 2048  # exactly the TTL: still there
    assert c.send(base, 600.5).cached_tokens == 0  # 300.5 s after the last use: gone
    assert c.send(base, 601.0).cached_tokens == 2048  # written again by the miss


def test_a_hit_refreshes_the_prefix_it_reads() -> None:
    c = cache()
    c.send([seg("s", 2048), seg("a", 512)], 0.0)
    c.send([seg("s", 2048), seg("b", 512)], 200.0)  # reads (and refreshes) the first segment
    # 450 s: the first segment was used 250 s ago, the "a" branch 450 s ago
    use = c.send([seg("s", 2048), seg("a", 512)], 450.0)
    assert use == CacheUse(2560, 2048, 512)


def test_writes_and_costs_per_pricing() -> None:
    c = cache()
    cold = c.send([seg("s", 1500)], 0.0)
    warm = c.send([seg("s", 1500), seg("u", 500)], 5.0)
    assert (cold.write_tokens, warm.cached_tokens, warm.write_tokens) == (1500, 1408, 592)
    openai, anthropic = Pricing("r=0.1", 0.1), Pricing("r=0.1 w1.25", 0.1, 1.25)
    assert openai.cost(cold) == pytest.approx(1500)
    assert anthropic.cost(cold) == pytest.approx(1500 * 1.25)
    assert openai.cost(warm) == pytest.approx(592 + 140.8)
    assert anthropic.cost(warm) == pytest.approx(592 * 1.25 + 140.8)
    assert Pricing("r=0.5", 0.5).cost(warm) == pytest.approx(592 + 704)


def test_segments_serialise_tools_first_and_memoise_per_message() -> None:
    segments = Segments(byte_tokens)
    m = {"role": "user", "content": "hi"}
    out = segments.of([m], tools=[{"type": "function"}])
    assert out == [b'[{"type":"function"}]', b'{"content":"hi","role":"user"}']
    assert segments.of([m])[0] is out[1]  # the same message object: serialised once
    assert segments.count(out[1]) == len(out[1])
    assert serialise_message({"b": "\ud800", "a": 1}) == b'{"a": 1, "b": "\\ud800"}'


def test_common_prefix() -> None:
    a = array("I", [1, 2, 3, 4, 5])
    assert common_prefix(a, array("I", [1, 2, 3, 9])) == 3
    assert common_prefix(a, a) == 5
    assert common_prefix(a, array("I", [])) == 0
    assert common_prefix(a, array("I", [7])) == 0
