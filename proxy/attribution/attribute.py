"""A request's cache outcome and its cause, once the upstream's usage is known: pure arithmetic
over the request's ``probe.Facts``, the usage of it and of the session's previous request, and
the prices the schedule reads (``rules.base.CacheFacts``), so a re-bill here and a bust there are
the same figure in the same unit (a fresh input token).

- **Outcome.** The cache should hold what the previous prompt sent (``expected``: the smaller of
  it and this prompt, when it was long enough to be cached); a read short of that by more than
  the providers' rounding (``TOLERANCE``) fell: a miss when nothing was read, else a partial hit
  to the prefix read. Prompts under the provider's minimum are ``short``; a session's first is
  ``first``.
- **Cause** of a fall, first that holds: ``expiry`` (idle beyond the TTL: the prefix was gone
  whatever was sent), ``proxy`` (the forwarded prefix differs where the client's does not, naming
  the decision), ``client`` (its own bytes differ before its previous request's end, naming
  where), else ``unexplained`` (the provider dropped it early, or a breakpoint's lookback), or
  ``unknown`` when the previous request's bytes were not seen here (a restart, another replica).
- **Re-billed**: the tokens expected from the cache and not read, priced at ``w - r`` of a fresh
  token (what the schedule calls a bust).
- **Cost**: ``uncached + r × cached + (w - 1) × written`` fresh tokens (``bench.cache_emulator``'s
  formula), for what was sent and for what sending the client's bytes direct would have cost
  (``direct``: its prompt scaled from the proxy's count, its cached part the client's own shared
  prefix, under the same TTL and minimum, and at least what the provider read of the forwarded
  prompt's part that is the client's bytes: a new session reads a system prompt and tools
  another cached, sent direct or not; a request forwarded as sent costs direct what it cost)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from proxy.attribution.probe import Facts
from rules.base import CacheFacts

STEP = 128  # OpenAI reads the cache in 128-token steps: a read this much short is a full one
TOLERANCE = 0.02  # and a share of the prompt, for counts that differ by a little


@dataclass(frozen=True)
class Usage:
    """The upstream's report of one request (``proxy.upstream.usage.CacheUsage``)."""

    prompt: int
    cached: int
    written: int = 0


@dataclass(frozen=True)
class Direct:
    """The client's bytes sent direct: the emulated lane the cost line compares with.
    ``uncaching``: the provider has missed where its cache should have held the previous
    prompt, with no cause seen here, and has read nothing from it in the session (a server
    that does not cache, or Anthropic's API sent no breakpoint): direct would have read nothing
    either, and priced as read it made a proxy that halved the prompt look twice as dear."""

    at: float
    prompt: int
    uncaching: bool = False
    read_seen: bool = False  # the provider read from its cache in this session


def cost(usage: Usage, cache: CacheFacts) -> float:
    """The input cost of a request in fresh tokens: ``bench.cache_emulator.Pricing.cost``."""
    uncached = max(usage.prompt - usage.cached, 0)
    return uncached + cache.read_ratio * usage.cached + (cache.write_ratio - 1.0) * usage.written


def attribute(
    facts: Facts,
    usage: Usage | None,
    previous: Usage | None,
    cache: CacheFacts,
    direct_before: Direct | None,
) -> tuple[dict[str, Any], Direct | None]:
    """The request's cache line (JSON), and the direct lane's state after it."""
    out: dict[str, Any] = {"idle_s": _round(facts.idle_s), "tokens": facts.tokens}
    if facts.changed_by:
        out["changed_by"] = facts.changed_by
        if facts.where:
            out["where"] = facts.where
        if facts.decision:
            out["decision"] = facts.decision
    if facts.shared_tokens is not None:
        out["shared_tokens"] = facts.shared_tokens
    if usage is None:
        out["outcome"] = "unreported"
        return out, direct_before
    out.update(prompt=usage.prompt, cached=usage.cached, written=usage.written)
    outcome, lost = _outcome(facts, usage, previous, cache)
    out["outcome"] = outcome
    if outcome in ("miss", "partial"):
        out["cause"] = cause = _cause(facts, cache)
        w = max(cache.write_ratio, cache.read_ratio)
        out["rebilled"] = lost
        out["rebilled_cost"] = round(lost * (w - cache.read_ratio), 1)
        if cause == "client" and not facts.where:
            out["where"] = "messages"
    if outcome == "partial":
        out["prefix"] = usage.cached
    out["cost"] = round(cost(usage, cache), 1)
    read_seen = usage.cached > 0 or (direct_before is not None and direct_before.read_seen)
    uncaching = not read_seen and (
        out.get("cause") == "unexplained" or (direct_before is not None and direct_before.uncaching)
    )
    direct, lane = _direct(facts, usage, cache, direct_before, uncaching)
    lane = replace(lane, uncaching=uncaching, read_seen=read_seen)
    out["direct_cost"] = round(cost(direct, cache), 1)
    if cache.input_price:
        out["usd"] = round(out["cost"] * cache.input_price, 6)
        out["direct_usd"] = round(out["direct_cost"] * cache.input_price, 6)
        if "rebilled_cost" in out:
            out["rebilled_usd"] = round(out["rebilled_cost"] * cache.input_price, 6)
    return out, lane


def _outcome(
    facts: Facts, usage: Usage, previous: Usage | None, cache: CacheFacts
) -> tuple[str, int]:
    """(outcome, tokens expected from the cache and not read)."""
    if usage.prompt < cache.min_prefix_tokens and usage.cached == 0:
        return "short", 0
    if facts.previous_at is None or previous is None:  # nothing known of an earlier request
        return ("first" if usage.cached == 0 else "hit"), 0
    if previous.prompt < cache.min_prefix_tokens:
        return ("short" if usage.cached == 0 else "hit"), 0
    expected = min(previous.prompt, usage.prompt)
    lost = max(expected - usage.cached, 0)
    if lost <= max(STEP, int(expected * TOLERANCE)):
        return "hit", 0
    return ("miss" if usage.cached == 0 else "partial"), lost


def _cause(facts: Facts, cache: CacheFacts) -> str:
    idle = facts.idle_s
    if idle is not None and idle > cache.ttl_s:
        return "expiry"
    if facts.changed_by in ("proxy", "client"):
        return facts.changed_by
    return "unexplained" if facts.compared else "unknown"


def _direct(
    facts: Facts, usage: Usage, cache: CacheFacts, before: Direct | None, uncaching: bool
) -> tuple[Usage, Direct]:
    """What the client's own bytes would have been billed: its prompt in the provider's units
    (scaled by this request's reported/counted ratio), read from the cache up to its own shared
    prefix when its previous request is live and was long enough, and the provider is not
    known not to cache (``uncaching``)."""
    scale = usage.prompt / facts.tokens if facts.tokens else 1.0
    if facts.as_sent is not None and facts.as_sent >= facts.tokens == facts.client_tokens:
        # forwarded as sent: direct is what was billed, whatever the cache held from before
        # (a new session reading a system prompt and tools another one cached)
        return usage, Direct(facts.at, usage.prompt)
    prompt = round(facts.client_tokens * scale)
    cached = 0
    live = before is not None and facts.at - before.at <= cache.ttl_s
    if live and before is not None and before.prompt >= cache.min_prefix_tokens and not uncaching:
        shared = facts.client_shared if facts.client_shared is not None else 0
        cached = min(round(shared * scale), before.prompt, prompt)
    if facts.as_sent is not None:
        # the provider read ``usage.cached`` of the forwarded prompt, whose first ``as_sent``
        # tokens are the client's own: sent direct, that much of it was read as well
        cached = max(cached, min(usage.cached, round(facts.as_sent * scale), prompt))
    if prompt < cache.min_prefix_tokens:
        cached = 0
    writes = cache.write_ratio > 1.0 and prompt >= cache.min_prefix_tokens
    written = prompt - cached if writes else 0
    return Usage(prompt, cached, written), Direct(facts.at, prompt)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
