"""Bets paid from winnings (prune's ``bet_budget_share``, off by default): a warm cut made before
it has paid for itself, on the session's expected remaining requests (``payback``), only when its
worst case fits the session's *risk budget*.

**The ledger.** Kept in prune's memory of the session, in units of one fresh input token:

- ``won``: what the session's cuts have saved by the schedule's own accounting: for each cut
  under the budget (warm or cold), ``r`` times the tokens it freed for every request since
  (the carrying it avoided), less its price (bust plus expected loss) when it was made;
- ``rate``: the tokens those cuts freed (``won`` grows by ``r × rate`` a request);
- ``billed``: what the session has been billed so far, as the schedule prices a request: the
  tokens the previous request forwarded read at ``r``, the tokens added since written at ``w``,
  in the provider's tokens (times ``cut_price.provider_scale``, the provider's count of the
  previous prompt over the rule's), as a cut's price weighs its bust.

**The rule.** A bet of price ``P`` is made only when ``P ≤ won + ε × billed`` (``allowance``),
``ε`` the share.

**Bound.** Should the session end right after a bet, the bet cost its whole price ``P`` more than
not cutting (what carrying its tokens cost before it is paid either way), and the ledger falls
by exactly ``P``: so right after a bet ``won ≥ −ε × billed``. Between cuts ``won`` only grows
(``r × rate ≥ 0`` a request; the rate falls to 0 when the client drops messages itself or the
budget forces a compaction) and ``billed`` only grows, so at every later request, whatever the
session's length, ``won ≥ −ε × billed − Σ P_j`` over the cuts made at break-even (``paid``)
since the last bet, and the deeper ``soon`` cuts (``warm_cut``: made once carrying has cost half
their price): the bets never bring the session's accounted saving against carrying everything
(direct) below ``−ε`` of what it has been billed, beyond what break-even's own cuts risk. A
session whose cuts have paid may spend their winnings on bets; one with none may lose at most
``ε`` of its bill. The bound is in the schedule's accounting (its estimates of busts, losses
and the bill), not in the provider's invoice.

**Every warm cut** (prune's ``warm_risk_share``, ``ε'``, 0.10 by default): the same ledger, and
every cut under the budget with a warm cache (break-even's ``paid``, the deeper ``soon``, a free
one, a bet) waits until ``P ≤ won + ε' × billed``. Then right after any cut ``won ≥ −ε' ×
billed``, and between cuts neither term falls, so at every request, whatever the session's
length, ``won ≥ −ε' × billed``: the schedule's accounting bills the session at most ``ε'`` of
its bill more than never cutting (``bill ≤ direct / (1 − ε')``), with no term left for
break-even's own cuts. A cold cut is charged nothing (the prompt is billed whole anyway); a
compaction the budget forces is never held (it is the budget's, not a bet) and stops what
earlier cuts freed from earning. Not charged: the block inject adds at a compaction (its size
is inject's, known after prune; ``billed`` counts it once it is replayed), and the bill and the
bust are weighed by the previous prompt's scale, not each request's own: both make the bound the
schedule's, not the invoice's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from rules.base import CacheFacts
from rules.context.cut_price import provider_scale
from rules.context.session_memory import Memory


class Ledger(NamedTuple):
    won: float = 0.0
    rate: int = 0
    billed: float = 0.0


def load(value: object) -> Ledger:
    """The ledger kept in prune's memory of the session (none kept, or not a mapping: zeros)."""
    if not isinstance(value, Mapping):
        return Ledger()
    won, rate, billed = value.get("won"), value.get("won_rate"), value.get("billed")
    return Ledger(
        float(won) if isinstance(won, (int, float)) else 0.0,
        int(rate) if isinstance(rate, int) else 0,
        float(billed) if isinstance(billed, (int, float)) else 0.0,
    )


def dump(ledger: Ledger) -> dict[str, float | int]:
    return {"won": round(ledger.won, 1), "won_rate": ledger.rate, "billed": round(ledger.billed, 1)}


def allowances(
    value: object, bet_share: float | None, cut_share: float | None
) -> tuple[Ledger | None, float | None, float | None]:
    """The session's ledger (kept in prune's memory ``value``; None when neither share is set)
    and the risk budgets it allows now: bets' (``bet_share``) and every warm cut's
    (``cut_share``), each None when its share is unset."""
    if bet_share is None and cut_share is None:
        return None, None, None
    ledger = load(value)
    bet = None if bet_share is None else allowance(ledger, bet_share)
    return ledger, bet, None if cut_share is None else allowance(ledger, cut_share)


def allowance(ledger: Ledger, share: float) -> float:
    """The worst case a bet may have now: the session's winnings plus ``share`` of its bill."""
    return ledger.won + share * ledger.billed


def advance(
    ledger: Ledger,
    read_ratio: float,
    write_ratio: float,
    previous: int,
    arrived: int,
    cut: tuple[int, float] | None = None,
    forced: bool = False,
    scale: float = 1.0,
) -> Ledger:
    """The ledger once this request is sent: ``previous``, the tokens the previous request
    forwarded; ``arrived``, this one's before any cut; ``cut``, (tokens freed, price) of a cut
    under the budget made on it (its own tokens are not carried on it: the bust counts that);
    ``forced``, a compaction the budget forced was made on it; ``scale``, the provider's tokens
    per counted one (``cut_price.provider_scale``): the bill is in the provider's tokens, as a
    cut's price weighs its bust, so the share of it a cut may risk is the same on every wire."""
    r, w = read_ratio, max(write_ratio, read_ratio)
    fresh = max(arrived - previous, 0)
    billed = ledger.billed + scale * (r * min(previous, arrived) + w * fresh)
    # What earlier cuts freed stops earning when no world carries it any more: the client
    # dropped messages itself (fewer tokens than were forwarded: a restart, a rewind), or the
    # budget forced a compaction, which might have taken those tokens anyway.
    rate = 0 if forced or arrived < previous else ledger.rate
    won = ledger.won + r * rate
    if cut is not None:
        won, rate = won - cut[1], rate + max(cut[0], 0)
    return Ledger(won, rate, billed)


def settle(
    ledger: Ledger | None, facts: CacheFacts, memory: Memory, arrived: int, info: Mapping[str, Any]
) -> dict[str, float | int] | None:
    """The ledger to keep (``dump``; None: none kept) once prune has sent this request
    (``info``: its summary): a cut under the budget charged its price (``price`` in the
    schedule's figures; a cold one nothing, the prompt is billed whole anyway) and credited the
    tokens it freed; one the budget forced is neither (it is not the schedule's choice)."""
    if ledger is None:
        return None
    figures: Mapping[str, Any] = info.get("schedule") or {}
    cut = None
    forced = bool(info.get("compacted")) and figures.get("decision") == "forced"
    if info.get("compacted") and not forced:
        # cold: what it freed, less the stored blocks inject collapses into one
        cold = arrived - int(info.get("inject_tokens", 0)) - int(info.get("tokens_after", arrived))
        cut = (int(figures.get("freed", cold)), float(figures.get("price", 0.0)))
    r, w, previous = facts.read_ratio, facts.write_ratio, memory.last_tokens
    scale = provider_scale(facts, memory)
    return dump(advance(ledger, r, w, previous, arrived, cut, forced, scale))
