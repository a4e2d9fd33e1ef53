"""prune's memory of a session's requests (its ``prune_session`` namespace), which the schedule
(``schedule``) reads: their count and times, the growth per request, the carrying counted since
the last compaction (in all, and step by step: ``carrying``), when that compaction came, and
when the next warm look is due."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rules.context import carrying

HEADROOM = 5  # requests of growth a forced compaction leaves room for


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
    # each reclaimable step's own figures at the last look, as stored in their own namespace
    # (``carrying.load`` reads them); None: none kept (the session's ``carried`` is shared)
    stale: Any = None
    due: int = -1  # the request by which some cut may have paid (``carrying.due``); -1: unknown
    last_cut: int = -1  # the request (``requests``) of the last compaction of any kind

    @classmethod
    def load(cls, value: Any, stale: Any = None) -> Memory:
        """The memory from its namespace, and the per-step figures from theirs (``stale``: they
        change only at a look, so they are not written again on every request)."""
        v = value if isinstance(value, Mapping) else {}
        at, due = v.get("last_at"), v.get("due")
        last_cut = v.get("last_cut")
        memory = object.__new__(cls)
        # every request loads it: the fields set at once, not one ``object.__setattr__`` each as
        # a frozen dataclass's ``__init__`` sets them
        memory.__dict__.update(
            requests=int(v.get("requests") or 0),
            last_at=float(at) if isinstance(at, (int, float)) else None,
            last_tokens=int(v.get("last_tokens") or 0),
            growth=float(v.get("growth") or 0.0),
            expect_hit=bool(v.get("expect_hit")),
            carried=float(v.get("carried") or 0.0),
            looked=int(v.get("looked") or 0),
            reclaimable=int(v.get("reclaimable") or 0),
            stale=stale,
            due=int(due) if isinstance(due, int) else -1,
            last_cut=int(last_cut) if isinstance(last_cut, int) else -1,
        )
        return memory

    def cut_within(self, requests: int) -> bool:
        """Whether the session's last compaction came fewer than ``requests`` requests ago."""
        return self.last_cut >= 0 and self.requests - self.last_cut < requests

    def carried_now(self, read_ratio: float) -> float:
        """``carried`` once the requests since the last look are counted, at that look's
        reclaimable tokens (between looks they only grow: a lower bound)."""
        return self.carried + read_ratio * self.reclaimable * max(self.requests - self.looked, 0)

    def steps(self) -> dict[str, tuple[float, int]]:
        """Each reclaimable step's (carried, freed) at the last look (``carrying.load``)."""
        return carrying.load(self.stale)

    def look_due(self, every: int) -> bool:
        """Whether this request looks at what a warm cut could free: every ``every``-th request
        at the latest, and from the request by which the last look's figures said some cut may
        have paid (``due``)."""
        return self.requests % every == 0 or 0 <= self.due <= self.requests

    def after(
        self,
        now: float,
        tokens: int,
        compacted: bool,
        stored: Any,
        look: tuple[float, int] | None = None,
        min_prefix: int = 0,
        arrived: int | None = None,
        due: int = -1,
        ledger: Mapping[str, Any] | None = None,
    ) -> Any:
        """The memory once this request (``tokens`` forwarded) is sent; the stored one as it was
        when this is the very request it last saw (a rule applied twice sees one request).
        ``look``: (carried, reclaimable) when this request looked at what a compaction could
        free (carried then counts from here at the new figure); after a warm cut, what is left
        of both (the steps it did not take keep what carrying them has cost). The next request
        expects a cache hit when this one kept its predecessor's prefix and that predecessor
        was long enough to be cached (``min_prefix``). ``arrived``: this request's tokens as it
        came, the previous cuts replayed (before this one's): less the last forwarded, what the
        session added since, whether or not this request is then compacted. ``due``: the request by
        which the next look is due (``look_due``), with ``look``; -1: unknown. ``ledger``: the
        session's risk ledger (``risk_budget.dump``), kept when bets are paid from winnings."""
        if self.last_at == now and self.last_tokens == tokens and isinstance(stored, dict):
            return stored
        step = (tokens if arrived is None else arrived) - self.last_tokens
        growth = self.growth
        # A compacted request's step is counted only while the session has no growth measured
        # (cut on every request from its first, it would have none): counted always, a burst
        # that came with a cut raised the growth a forced cut leaves room for, and on the corpus
        # support and the bill got worse (see prune.md). A held request's step is counted.
        # Negative: the client dropped messages itself (a restart); nothing to measure.
        if self.requests and step >= 0 and (not compacted or not self.growth):
            growth = step if not self.growth else 0.7 * self.growth + 0.3 * step
        carried, looked, reclaimable, next_due = (
            self.carried,
            self.looked,
            self.reclaimable,
            self.due,
        )
        if look is not None:  # a look, or a warm cut that left steps (what they have cost)
            carried, looked, reclaimable, next_due = look[0], self.requests, look[1], due
        elif compacted:
            carried, looked, reclaimable, next_due = 0.0, self.requests, 0, -1
        last_cut = self.requests if compacted else self.last_cut
        return {
            "requests": self.requests + 1,
            "last_at": now,
            "last_tokens": tokens,
            "growth": round(growth, 1),
            "expect_hit": bool(self.requests) and not compacted and self.last_tokens >= min_prefix,
            "carried": round(carried, 1),
            "looked": looked,
            "reclaimable": reclaimable,
            **({"due": next_due} if next_due >= 0 else {}),
            **({"last_cut": last_cut} if last_cut >= 0 else {}),
            **(ledger or {}),
        }


def trigger(room: int, budget: int | None, memory: Memory) -> int:
    """The size over which the budget forces a compaction: ``room`` (the budget less the
    reserve kept for the block inject renders at a compaction), but the budget itself fewer than
    ``HEADROOM`` requests after the session's last compaction, whose block is already in the
    prompt (replayed as history): the reserve would only bring the next compaction sooner."""
    return budget if memory.cut_within(HEADROOM) and budget is not None else room
