"""When a compaction the budget does not force is made, the cache warm: break-even, or earlier
when the session's expected remaining requests say it pays, within a stated worst case (the
latter with prune's ``bet_on_length``, off by default).

A cut frees ``F`` tokens that every later request would otherwise read at ``r`` (carrying them),
and costs its bust ``B`` (the prompt re-billed from its earliest edit on) plus its expected loss
once: its price ``P``. ``carried`` is what carrying its tokens has cost since the last compaction
(a warm partial cut leaves the steps it did not take their share).

- **Paid** (break-even, ski rental): ``carried ≥ P``. It has paid for itself in hindsight,
  whatever the session's length: at most 2× the best schedule's carrying and busts.
- **Expected**: ``r × F × E[remaining] ≥ MARGIN × P`` and ``carried ≥ GUARD × P``.
  ``E[remaining]`` is a survival estimate of the session: the requests that a share ``SURE`` (3 in
  4) of the sessions of the corpus' train half longer than the ``n`` requests made so far go on
  for beyond ``n`` (``rules/packs/survival.yaml``, ``bench/survival.py``). ``MARGIN`` (2): the bet
  repays its price even if the session lasts half as long as the estimate. The guard bounds the
  worst case whatever the estimate says: should the session end right after a cut made at
  ``carried = x ≥ GUARD × P``, it cost ``x + P`` where the best schedule paid ``min(x, P) ≥
  GUARD × P`` (carry to the end, or cut at once), a ratio of at most ``(1 + GUARD) / GUARD``: 3×
  with ``GUARD = 1/2``. Should the session go on, the cut carries nothing more and the ratio only
  falls. When the estimate is right and the session long, the cut comes at ``GUARD × P`` of
  carrying instead of ``P``: it costs ``1 + GUARD`` times the best schedule's instead of 2 (the
  ski-rental rule with a prediction, after Purohit, Svitkina and Kumar, NeurIPS 2018).

A cut on the estimate takes only the steps whose loss is priced (``schedule._break_even``): a
stage weighed at no loss (supersede, by default) waits for break-even.

Of the cuts that qualify, the one whose value over the session is largest: what carrying its
tokens has cost and is expected to cost (``carried`` share + ``r × F × E[remaining]``) less its
price."""

from __future__ import annotations

import bisect
import functools
from collections.abc import Sequence

from rules.packs import load_pack

SURE = 0.75  # the estimate: what this share of the sessions that got this far reaches
MARGIN = 2.0  # a bet on the estimate must repay its price this many times
GUARD = 0.5  # a cut on the estimate waits until carrying has cost this share of its price


def mean_remaining(requests: int, table: Sequence[int], sums: Sequence[int]) -> float:
    """The mean of ``L − n`` over the sorted lengths ``table`` longer than ``n`` (``sums[i]``:
    the sum of ``table[i:]``); past the longest, ``n`` (a session that has lasted long tends to
    last as long again)."""
    n = max(requests, 1)
    i = bisect.bisect_right(table, n)
    count = len(table) - i
    return (sums[i] - n * count) / count if count else float(n)


def suffix_sums(table: Sequence[int]) -> tuple[int, ...]:
    sums = [0]
    for x in reversed(table):
        sums.append(sums[-1] + x)
    return tuple(reversed(sums))


@functools.lru_cache(maxsize=1)
def _survival() -> tuple[tuple[int, ...], tuple[int, ...]]:
    lengths = load_pack("survival").get("lengths")
    if not isinstance(lengths, list) or not all(type(x) is int and x > 0 for x in lengths):
        raise ValueError("survival pack: 'lengths' is not a list of positive request counts")
    table = tuple(sorted(lengths))
    return table, suffix_sums(table)


def sure_remaining(requests: int, table: Sequence[int], sure: float = SURE) -> float:
    """Requests still to come after ``n`` in a share ``sure`` of the sessions in the sorted
    lengths ``table`` that lasted longer than ``n``; past the longest, ``n``."""
    n = max(requests, 1)
    i = bisect.bisect_right(table, n)
    longer = len(table) - i
    return float(table[i + int((1 - sure) * longer)] - n) if longer else float(n)


def remaining(requests: int, lengths: Sequence[int] | None = None) -> float:
    """Requests still to come after ``requests`` in a share ``SURE`` of the sessions that got
    this far (the train half's, or ``lengths``)."""
    table = tuple(sorted(lengths)) if lengths is not None else _survival()[0]
    return sure_remaining(requests, table)


def verdict(
    carried: float, future: float, price: float, share: float = 1.0, risk: float | None = None
) -> str | None:
    """``paid``, ``expected`` or None (see the module docstring): ``carried``, what carrying the
    cut's tokens has cost; ``future``, what it is expected to cost from now on; ``price``, the
    bust plus the expected loss; ``share``, of the price carrying must reach to pay (1:
    break-even; less: a drawn threshold, ``ski_draw``); ``risk``: the session's risk budget
    (``risk_budget``), which then guards a bet instead of ``GUARD``: its worst case, the whole
    price, must fit it."""
    if carried >= share * price:
        return "paid"
    guarded = carried >= GUARD * price if risk is None else price <= risk
    if guarded and future >= MARGIN * price:
        return "expected"
    return None


def soon(carried: float, next_requests: float, price: float, share: float = 1.0) -> bool:
    """Whether a cut that has carried ``carried`` pays within the next few requests, whose
    carrying at today's rate is ``next_requests`` (pays: reaches ``share`` of its ``price``, the
    share a randomised threshold waits for), and has carried at least ``GUARD`` of its whole
    ``price`` (the bound of a cut made early: at most ``(1 + GUARD) / GUARD`` times the best
    schedule, whatever the session's length and the share drawn; see the module docstring)."""
    return carried >= GUARD * price and carried + next_requests >= share * price
