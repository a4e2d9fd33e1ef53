"""What carrying the reclaimable tokens has cost, kept in prune's memory of the session: the
hindsight the break-even rule (``schedule``) weighs a warm cut's price against.

Carrying a token costs ``r`` each request it is read from the cache. The memory keeps it step by
step (``stale``, each planned edit by its message's anchor): at every look, a step's carried cost
grows by ``r`` times what it freed at the previous look, for each request since, and a step no
longer offered (a result now needed again, a message the client dropped) leaves with its figure.
A cut is then credited with the carrying of its own steps: what the stale results it removes have
really cost, not a share of the session's sum by size (which credited a fresh result at the tail
with what an old one had cost, and kept crediting a result that had become needed again). With a
look every request (``prune.WARM_LOOK_EVERY``) the figure is exact hindsight."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


def step_key(stage: str, anchor: str) -> str:
    """A planned step's identity across requests: its stage and its first message's anchor."""
    return f"{stage}:{anchor}"


def carry(
    stale: Mapping[str, tuple[float, int]], offered: Iterable[tuple[str, int]], requests: int,
    read_ratio: float,
) -> dict[str, tuple[float, int]]:  # fmt: skip
    """Each offered step's (carried, freed) now: what it had carried at the last look plus ``r``
    times what it freed then, for each of the ``requests`` since; a step new to the offer starts
    at nothing (it has cost nothing yet). Steps not offered are left out."""
    out: dict[str, tuple[float, int]] = {}
    for key, freed in offered:
        carried, before = stale.get(key, (0.0, 0))
        out[key] = (carried + read_ratio * before * max(requests, 0), freed)
    return out


def seed(carried: float, offered: Iterable[tuple[str, int]]) -> dict[str, tuple[float, int]]:
    """Per-step figures from a session's sum alone (a memory kept without them): each step its
    share by the tokens it frees."""
    pairs = list(offered)
    total = sum(freed for _, freed in pairs)
    return {key: (carried * freed / total if total else 0.0, freed) for key, freed in pairs}


def _stale(value: Any) -> dict[str, tuple[float, int]]:
    """The stored per-step figures (a JSON object of [carried, freed]); anything else: none."""
    out: dict[str, tuple[float, int]] = {}
    if isinstance(value, Mapping):
        for key, v in value.items():
            if isinstance(v, list) and len(v) == 2 and all(isinstance(x, (int, float)) for x in v):
                out[str(key)] = (float(v[0]), int(v[1]))
    return out


@dataclass(frozen=True)
class Memory:
    """prune's memory of the session's requests (kept in its namespace)."""

    requests: int = 0  # forwarded before this one
    last_at: float | None = None
    last_tokens: int = 0  # the previous forwarded request's tokens
    growth: float = 0.0  # tokens added per request, smoothed
    expect_hit: bool = False  # the previous request kept its predecessor's prefix
    carried: float = 0.0  # carrying's cost since the last compaction (or partial cut's share left)
    looked: int = 0  # the request (``requests``) of the last look at what is reclaimable
    reclaimable: int = 0  # what that look found a compaction could free
    # each reclaimable step's own figures at that look (``step_key``): (carried, tokens freed)
    stale: Mapping[str, tuple[float, int]] = field(default_factory=dict)
    last_cut: int | None = None  # the request (``requests``) of the session's last compaction

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
            float(v.get("carried") or 0.0),
            int(v.get("looked") or 0),
            int(v.get("reclaimable") or 0),
            _stale(v.get("stale")),
            v["last_cut"] if type(v.get("last_cut")) is int else None,
        )

    def carried_now(self, read_ratio: float) -> float:
        """``carried`` once the requests since the last look are counted, at that look's
        reclaimable tokens (between looks they only grow: a lower bound)."""
        return self.carried + read_ratio * self.reclaimable * max(self.requests - self.looked, 0)

    def after(
        self,
        now: float,
        tokens: int,
        compacted: bool,
        stored: Any,
        look: tuple[float, int] | None = None,
        min_prefix: int = 0,
        stale: Mapping[str, tuple[float, int]] | None = None,
    ) -> Any:
        """The memory once this request (``tokens`` forwarded) is sent; the stored one as it was
        when this is the very request it last saw (a rule applied twice sees one request).
        ``look``: (carried, reclaimable) when this request looked at what a compaction could
        free (carried then counts from here at the new figure); after a warm cut, what is left
        of both (the steps it did not take keep what carrying them has cost). The next request
        expects a cache hit when this one kept its predecessor's prefix and that predecessor
        was long enough to be cached (``min_prefix``). ``stale``: each step's figures after this
        request's look (its cut steps gone); None: as they were, or none after a compaction."""
        if self.last_at == now and self.last_tokens == tokens and isinstance(stored, dict):
            return stored
        step = tokens - self.last_tokens
        growth = self.growth
        if self.requests and not compacted and step >= 0:
            growth = step if not self.growth else 0.7 * self.growth + 0.3 * step
        carried, looked, reclaimable = self.carried, self.looked, self.reclaimable
        if look is not None:  # a look, or a warm cut that left steps (what they have cost)
            carried, looked, reclaimable = look[0], self.requests, look[1]
        elif compacted:
            carried, looked, reclaimable = 0.0, self.requests, 0
        kept = dict(stale) if stale is not None else {} if compacted else dict(self.stale)
        cut = self.requests if compacted else self.last_cut
        return {
            "requests": self.requests + 1,
            "last_at": now,
            "last_tokens": tokens,
            "growth": round(growth, 1),
            "expect_hit": bool(self.requests) and not compacted and self.last_tokens >= min_prefix,
            "carried": round(carried, 1),
            "looked": looked,
            "reclaimable": reclaimable,
            **({"stale": {k: [round(c, 1), f] for k, (c, f) in kept.items()}} if kept else {}),
            **({"last_cut": cut} if cut is not None else {}),
        }
