"""The emulated Anthropic cache of bench/cost.py (bench/breakpoint_cache.py): a breakpoint reads
the longest live prefix ending at it or at most 20 blocks before it, each breakpoint writes its
prefix, the tokens from the read to the last breakpoint are billed as written, prefixes expire
300 s after their last use (a hit refreshes), nothing under 1,024 tokens is cached; and Claude
Code's breakpoints (bench/protocol_convert.py) as the cache reads them. A toy tokeniser (one
token per byte) keeps every length exact."""

from __future__ import annotations

from bench.breakpoint_cache import BreakpointCache, anthropic_blocks
from bench.cache_emulator import CacheUse, Pricing, Segments
from bench.protocol_convert import to_anthropic, with_breakpoints


def byte_tokens(text: str) -> list[int]:
    return list(text.encode())


def blocks(n: int, marks: tuple[int, ...], size: int = 100) -> list[tuple[bytes, bool]]:
    """``n`` distinct blocks of ``size`` tokens; a breakpoint on the blocks numbered in
    ``marks`` (1-based: the prefix of that many blocks)."""
    return [(f"{k:04d}".encode().ljust(size, b"."), k + 1 in marks) for k in range(n)]


def cache() -> BreakpointCache:
    return BreakpointCache(Segments(byte_tokens))


def test_a_breakpoint_reads_a_prefix_written_up_to_20_blocks_before_it() -> None:
    c = cache()
    # 30 blocks, marked at 25: 2,500 tokens written, the 500 after the breakpoint at 1×
    assert c.send(blocks(30, (25,)), 0.0) == CacheUse(3000, 0, 2500)
    # marked at 45: the entry at 25 is 20 blocks before, found; 45 - 25 blocks written
    assert c.send(blocks(45, (45,)), 5.0) == CacheUse(4500, 2500, 2000)


def test_a_prefix_more_than_20_blocks_before_every_breakpoint_is_missed() -> None:
    c = cache()
    c.send(blocks(30, (25,)), 0.0)
    assert c.send(blocks(46, (46,)), 5.0) == CacheUse(4600, 0, 4600)
    # an earlier breakpoint within reach of the old entry finds it
    assert cache_after(blocks(30, (25,))).send(blocks(46, (30, 46)), 5.0) == CacheUse(
        4600, 2500, 2100
    )


def cache_after(first: list[tuple[bytes, bool]]) -> BreakpointCache:
    c = cache()
    c.send(first, 0.0)
    return c


def test_the_longest_live_prefix_over_every_breakpoint_is_read() -> None:
    c = cache()
    c.send(blocks(12, (12,)), 0.0)
    c.send(blocks(20, (20,)), 1.0)
    assert c.send(blocks(24, (12, 24)), 2.0) == CacheUse(2400, 2000, 400)


def test_a_prefix_expires_300_s_after_its_last_use_and_a_hit_refreshes_it() -> None:
    c = cache()
    c.send(blocks(20, (20,)), 0.0)
    assert c.send(blocks(20, (20,)), 300.0).cached_tokens == 2000  # at the TTL: alive
    # refreshed at 300: alive at 550, though 550 s after it was written
    assert c.send(blocks(20, (20,)), 550.0).cached_tokens == 2000
    assert c.send(blocks(20, (20,)), 851.0) == CacheUse(2000, 0, 2000)  # expired, written anew


def test_nothing_under_the_minimum_prefix_is_read_or_written() -> None:
    c = cache()
    assert c.send(blocks(10, (5, 10)), 0.0) == CacheUse(1000, 0, 0)
    assert c.send(blocks(20, (5, 20)), 1.0) == CacheUse(2000, 0, 2000)
    assert c.send(blocks(20, (5, 20)), 2.0) == CacheUse(2000, 2000, 0)


def test_writes_are_billed_at_the_write_price() -> None:
    use = cache().send(blocks(30, (25,)), 0.0)
    assert Pricing("w", 0.1, 1.25).cost(use) == 3000 + 0.25 * 2500
    assert Pricing("r", 0.1).cost(use) == 3000


def test_claude_codes_breakpoints_are_read_as_markers_not_content() -> None:
    chat = {
        "model": "m",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "more"},
        ],
    }
    plain = to_anthropic(chat).body
    marked = with_breakpoints(plain)
    assert marked["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert marked["messages"][-1]["content"] == [
        {"type": "text", "text": "more", "cache_control": {"type": "ephemeral"}}
    ]
    assert marked["messages"][:-1] == plain["messages"][:-1]
    assert "cache_control" not in str(plain)  # the body converted is left as it was
    # the same blocks, whether marked or not, and a string content is one text block
    got = anthropic_blocks(marked)
    assert [d for d, _ in got] == [d for d, _ in anthropic_blocks(plain)]
    assert [m for _, m in got] == [True, False, False, True]
