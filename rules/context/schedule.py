"""When prune compacts, and how deep: the choice with the least expected cost under the provider's
prompt cache (design section 4). Pure arithmetic over figures prune gathers; costs are in units of
one fresh input token.

- **Cache state.** Cold when the session's previous request is older than the provider's TTL, or
  the upstream reported no cached tokens for a prompt above the minimum although that request kept
  its predecessor's prefix; warm when it was recent; unknown before the first answer.
- **This request.** ``(T - C) × w + C × r``: ``C`` tokens read from the cache at ``r``, the rest
  written at ``w`` (1, or Anthropic's 1.25). A compaction changes the prompt from its earliest
  edit on, so ``C`` shrinks to the tokens before it: that is the bust.
- **Later requests.** Over the horizon ``H`` (the session's expected remaining requests, from the
  corpus' session lengths given the requests made so far), each carries the compacted prompt at
  ``r``; growth ``g`` per request brings the next forced compaction sooner when the prompt is
  left close to the budget, each costing a re-bill of the compacted prompt.
- **What is lost.** Each stage's tokens carry a weight: the expected cost of the model needing
  them again (supersede 0: stale copies).

Cold: the stale stages run for free. Over the budget: the cheapest cut that fits. Warm under the
budget: the cheapest cut, when it beats not compacting at all."""

from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rules.base import CacheFacts
from rules.packs import load_pack

STALE = ("supersede", "mask")  # what a cold cache clears for free


@dataclass(frozen=True)
class Memory:
    """prune's memory of the session's requests (kept in its namespace)."""

    requests: int = 0  # forwarded before this one
    last_at: float | None = None
    last_tokens: int = 0  # the previous forwarded request's tokens
    growth: float = 0.0  # tokens added per request, smoothed
    expect_hit: bool = False  # the previous request kept its predecessor's prefix

    @classmethod
    def load(cls, value: Any) -> Memory:
        v = value if isinstance(value, Mapping) else {}
        at = v.get("last_at")
        return cls(
            int(v.get("requests") or 0),
            float(at) if isinstance(at, (int, float)) else None,
            int(v.get("last_tokens") or 0),
            float(v.get("growth") or 0.0),
            bool(v.get("expect_hit")),
        )

    def after(self, now: float, tokens: int, compacted: bool, stored: Any) -> Any:
        """The memory once this request (``tokens`` forwarded) is sent; the stored one as it was
        when this is the very request it last saw (a rule applied twice sees one request)."""
        if self.last_at == now and self.last_tokens == tokens and isinstance(stored, dict):
            return stored
        step = tokens - self.last_tokens
        growth = self.growth
        if self.requests and not compacted and step >= 0:
            growth = step if not self.growth else 0.7 * self.growth + 0.3 * step
        return {
            "requests": self.requests + 1,
            "last_at": now,
            "last_tokens": tokens,
            "growth": round(growth, 1),
            "expect_hit": bool(self.requests) and not compacted,
        }


def cache_state(facts: CacheFacts, memory: Memory, now: float) -> tuple[str, str]:
    """(warm | cold | unknown, why)."""
    last_at = facts.last_at if facts.last_at is not None else memory.last_at
    if last_at is None:
        return "unknown", "no earlier request"
    idle = now - last_at
    if idle > facts.ttl_s:
        return "cold", f"idle {idle:.0f} s > ttl {facts.ttl_s:.0f} s"
    prompt, cached = facts.last_prompt_tokens, facts.last_cached_tokens
    if (
        memory.expect_hit
        and prompt is not None
        and prompt >= facts.min_prefix_tokens
        and cached == 0
    ):
        return "cold", f"upstream read 0 of {prompt} prompt tokens from its cache"
    return "warm", f"idle {idle:.0f} s"


@functools.lru_cache(maxsize=1)
def _lengths() -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The corpus' session lengths, sorted, and the sum of those from each index on."""
    pack = load_pack("horizon")
    table = tuple(sorted(int(x) for x in pack.get("lengths") or [] if int(x) > 0))
    sums = [0]
    for x in reversed(table):
        sums.append(sums[-1] + x)
    return table, tuple(reversed(sums))


def horizon(requests: int, lengths: Sequence[int] | None = None) -> float:
    """Expected requests still to come after ``requests`` were made: the mean of ``L - n`` over
    corpus sessions longer than ``n``; past the longest, as many as made so far (a session that
    has lasted long tends to last as long again)."""
    n = max(requests, 1)
    if lengths is not None:
        table = tuple(lengths)
        longer = table[bisect.bisect_right(table, n) :]
        return sum(x - n for x in longer) / len(longer) if longer else float(n)
    table, sums = _lengths()  # every request asks: a bisection and the stored sums
    i = bisect.bisect_right(table, n)
    count = len(table) - i
    return (sums[i] - n * count) / count if count else float(n)


@dataclass(frozen=True)
class Step:
    """One planned edit, in stage order: its stage, tokens freed, the earliest message index it
    changes."""

    stage: str
    freed: int
    first: int
    messages: tuple[int, ...] = ()  # what it edits (a dropped turn: all its messages)
    reason: str = ""


@dataclass(frozen=True)
class Choice:
    steps: int  # how many planned steps to take (0: none)
    tokens_after: int
    figures: dict[str, Any]


def _outlook(facts: CacheFacts, memory: Memory, total: int) -> tuple[float, float, float]:
    """(write price ratio, horizon, growth per request). Growth is smoothed once two requests
    were seen, else the session's average so far."""
    w = max(facts.write_ratio, facts.read_ratio)
    g = max(memory.growth, 0.0) if memory.requests >= 2 else total / max(memory.requests, 1)
    return w, horizon(memory.requests), g


def could_pay(
    freed: int,
    kept_prefix: int,
    total: int,
    facts: CacheFacts,
    memory: Memory,
    min_gain: int,
) -> bool:
    """Whether a compaction under the budget, with a warm cache, could pay at all: ``freed`` is
    a bound of what it could free and ``kept_prefix`` of the tokens before its earliest edit.
    A cheap test, so the full plan is made only when it might."""
    if freed <= 0 or freed < min_gain:
        return False
    r = facts.read_ratio
    w, h, g = _outlook(facts, memory, total)
    bust = w * (total - freed) - (w - r) * min(kept_prefix, total) - r * total
    if r * freed * h <= bust:
        return False
    return r <= 0 or freed >= math.sqrt(2 * max(bust, 0.0) * g / r)


def choose(
    steps: Sequence[Step],
    prefix_tokens: Sequence[int],
    total: int,
    room: int,
    floor: int,
    facts: CacheFacts,
    memory: Memory,
    state: str,
    loss: Mapping[str, float],
    min_gain: int,
) -> Choice:
    """How many of ``steps`` to take. ``prefix_tokens[i]``: tokens before message ``i``."""
    r = facts.read_ratio
    w, h, g = _outlook(facts, memory, total)
    # Unknown (no earlier request seen): the prompt may be cached all the same, as far as we
    # know; assuming it is keeps a first request from being rewritten for a gain it may not have.
    seen = total if state == "unknown" else min(memory.last_tokens, total)
    cached0 = seen if state != "cold" else 0
    cached0 = cached0 if cached0 >= facts.min_prefix_tokens else 0

    def now_cost(after: int, cached: int) -> float:
        return (after - cached) * w + cached * r

    def rate(after: int) -> float:
        """Cost per later request when the prompt is brought back to ``after`` each time the
        budget forces it: cache reads of the average prompt, plus the re-bill amortised over
        the requests the room lasts."""
        return r * (after + room) / 2 + (w - r) * after * g / max(room - after, 1)

    figures: dict[str, Any] = {
        "cache": state,
        "read_ratio": r,
        "horizon": round(h, 1),
        "growth": round(g, 1),
    }
    forced = total > room
    if state == "unknown" and not forced:  # nothing known of the cache: leave it be
        figures.update(decision="none", bust_cost=0, expected_saving=0)
        return Choice(0, total, figures)
    if state == "cold" and not forced:
        k = sum(1 for s in steps if s.stage in STALE)
        freed = sum(s.freed for s in steps[:k])
        figures.update(decision="cold" if freed > 0 else "none", bust_cost=0)
        return Choice(k if freed > 0 else 0, total - freed, figures)
    kept_trail = total - sum(s.freed for s in steps if s.stage != "drop")
    needs_drop = kept_trail > room
    best: tuple[float, int, int, float, float] | None = None  # cost, k, after, bust, saving
    freed = 0
    lost = 0.0
    first = len(prefix_tokens)
    for k, step in enumerate(steps, 1):
        if step.stage == "drop" and not (forced and needs_drop):
            break  # turns are dropped only when nothing else makes the request fit
        freed += step.freed
        lost += step.freed * loss.get(step.stage, 1.0)
        first = min(first, step.first)
        after = total - freed
        if forced and after < floor and k > 1 and total - (freed - step.freed) <= room:
            break  # deeper than the floor, and the step before already fits
        if forced and after > room and k < len(steps):
            continue
        cached = min(cached0, prefix_tokens[first] if first < len(prefix_tokens) else cached0)
        bust = now_cost(after, cached) - now_cost(total, cached0)
        if forced:
            if after > room and freed < min_gain:
                continue  # it cannot fit and frees too little to be worth the bust
            cost = now_cost(after, cached) + lost + h * rate(after)
            if best is None or cost < best[0]:
                best = (cost, k, after, bust, 0.0)
            continue
        # Under the budget the compaction must pay over the horizon, and not come before its
        # time: like an order of stock, the saving piles up at r a token a request while the
        # bust is paid once, so the least cost per request is reached by compacting when at
        # least sqrt(2 × bust × growth / r) tokens can go (the economic order quantity).
        saving = r * freed * h
        due = math.sqrt(2 * max(bust, 0.0) * g / r) if r > 0 else 0.0
        if freed < max(min_gain, due) or saving <= bust + lost:
            continue
        net = saving - bust - lost
        if best is None or -net < best[0]:
            best = (-net, k, after, bust, saving)
    if best is None:
        figures.update(decision="none", bust_cost=0, expected_saving=0)
        return Choice(0, total, figures)
    _, k, after, bust, saving = best
    figures.update(
        decision="forced" if forced else "pays",
        bust_cost=round(bust),
        expected_saving=round(saving),
    )
    return Choice(k, after, figures)
