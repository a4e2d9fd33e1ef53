"""Whether a compaction paid for itself. It re-bills the prefix from its earliest edit on once
(its bust, ``attribute``'s ``rebilled_cost``: nothing when the cache was cold anyway); every later
request of the session then leaves out what it freed, saving those tokens at the price that
request paid per prompt token (``r`` for what was read from the cache, a fresh token for the
rest). It has paid back once its savings reach its bust; when the session's next compaction comes
first, it never did (the next one's bust starts a new account, as the schedule's ``carried``
does). Pure: the ledger keeps one open account per session.

The schedule priced the same compaction before it was sent (``rules.context.schedule``: what the
request costs compacted less what it would have cost as it was, in fresh tokens): its figure,
scaled to the provider's tokens, is kept beside the billed one, ``net_bust``: the re-bill less
what reading the freed tokens from the cache would have cost (``freed × r``)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from rules.base import CacheFacts

PENDING, PAID_BACK, NOT_PAID_BACK = "pending", "paid_back", "not_paid_back"


@dataclass(frozen=True)
class Account:
    request_id: str  # the compacting request
    freed: int  # tokens it left out, in the provider's units
    bust: float  # what it re-billed, in fresh tokens
    # the schedule's bust: this request compacted less as it was (its re-bill net of what it
    # left out, so below zero when leaving out saved more than the re-bill)
    schedule_bust: float
    expected_saving: float  # the schedule's figure (its carried cost, for a break-even cut)
    read: float = 0.1  # a cached token, in fresh tokens (the schedule's ``r``)
    realised: float = 0.0  # saved so far on later requests, in fresh tokens
    requests: int = 0  # later requests counted
    state: str = PENDING

    def view(self) -> dict[str, Any]:
        return {
            "request_id": self.request_id,
            "freed": self.freed,
            "bust": round(self.bust, 1),
            "schedule_bust": round(self.schedule_bust, 1),
            # the same as billed: the re-bill less reading the freed tokens from the cache, which
            # this request no longer did
            "net_bust": round(self.bust - self.freed * self.read, 1),
            "expected_saving": round(self.expected_saving, 1),
            "realised": round(self.realised, 1),
            "requests": self.requests,
            "state": self.state,
        }


def open_account(
    request_id: str, compaction: dict[str, Any], scale: float, bust: float, read: float = 0.1
) -> Account:
    """A compaction's account: ``compaction`` is ``probe.Facts.compaction``; ``scale`` turns the
    proxy's token counts into the provider's; ``read``: the schedule's ``r``."""
    account = Account(
        request_id=request_id,
        freed=round(float(compaction.get("freed") or 0) * scale),
        bust=bust,
        # the schedule counts in the proxy's tokens: scaled to the provider's, as the re-bill is
        schedule_bust=float(compaction.get("bust_cost") or 0) * scale,
        expected_saving=float(compaction.get("expected_saving") or 0) * scale,
        read=read,
    )
    return replace(account, state=PAID_BACK) if bust <= 0 else account


def carry(account: Account, prompt: int, cached: int, cache: CacheFacts) -> Account:
    """The account after one later request (``prompt`` tokens, ``cached`` read from the cache):
    the freed tokens would have cost that request's mean price per prompt token."""
    if prompt <= 0:
        return account
    share = min(cached, prompt) / prompt
    price = share * cache.read_ratio + (1 - share) * 1.0
    realised = account.realised + account.freed * price
    state = account.state
    if state == PENDING and realised >= account.bust:
        state = PAID_BACK
    return replace(account, realised=realised, requests=account.requests + 1, state=state)


def close(account: Account) -> Account:
    """The session compacted again: an account still pending never paid back."""
    return replace(account, state=NOT_PAID_BACK) if account.state == PENDING else account
