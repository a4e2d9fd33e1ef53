"""The cache lines of the request log (``proxy.attribution``) as people read them: one request's
(``show``: outcome, cause, re-billed tokens, a compaction's payback), and a session's cost against
sending direct (``/ui``'s session page, ``ctxproxy logs --cost``), at the model's prices (in
dollars where the price is known, else in fresh input tokens)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

CAUSES = ("expiry", "client", "proxy", "unexplained", "unknown")
SESSION_ROWS = 5000  # a session's requests read for its cost line (the newest)
SCAN = 5000  # the latest requests whose sessions ``logs --cost`` lists


def line_of(row: dict[str, Any]) -> dict[str, Any] | None:
    found = row.get("cache")
    return found if isinstance(found, dict) else None


def request_text(row: dict[str, Any]) -> str | None:
    """The request's cache line in words; None when it has none."""
    line = line_of(row)
    if line is None:
        return None
    outcome = str(line.get("outcome"))
    prompt, cached = line.get("prompt"), line.get("cached")
    if outcome == "hit":
        text = f"hit: {cached} of {prompt} prompt tokens read from the cache"
    elif outcome == "partial":
        text = f"partial hit to a prefix of {line.get('prefix')} of {prompt} prompt tokens"
    elif outcome == "miss":
        text = f"miss: none of {prompt} prompt tokens read from the cache"
    elif outcome == "first":
        text = "first request of the session: nothing cached yet"
    elif outcome == "short":
        text = f"not cached: {prompt} prompt tokens, under the provider's minimum"
    else:
        text = "the upstream reported no cache usage"
    cause = line.get("cause")
    if cause:
        text += f"; cause: {cause_text(line)}"
        text += f"; re-billed {line.get('rebilled')} tokens ({_money(line, 'rebilled')})"
    if line.get("idle_s") is not None:
        text += f"; idle {line['idle_s']:.0f} s"
    return text


def cache_lines(row: dict[str, Any]) -> list[str]:
    """The request's cache line, its compaction's account and the provider's verdict, in words
    (``show``, the /ui request page)."""
    text = request_text(row)
    lines = [f"Cache: {text}"] if text else []
    return lines + [t for t in (payback_text(row), provider_text(row)) if t]


def cause_text(line: dict[str, Any]) -> str:
    cause = line.get("cause")
    if cause == "expiry":
        return "expiry (idle beyond the cache's lifetime)"
    if cause == "client":
        return f"the client's own change ({line.get('where') or 'messages'})"
    if cause == "proxy":
        return f"a proxy edit ({line.get('decision') or 'rewrite'})"
    if cause == "unknown":
        return "unknown (the previous request was not seen here: a restart, another replica)"
    return "unexplained (the prefix was unchanged)"


def payback_text(row: dict[str, Any]) -> str | None:
    """A compaction's account: as it stands now (``with_account_now``), as opened by this
    request, or as it stood at this one."""
    line = line_of(row) or {}
    account = row.get("account_now") or line.get("compaction") or line.get("payback")
    if not isinstance(account, dict):
        return None
    which = "this compaction" if "compaction" in line else f"compaction {account['request_id']}"
    state = str(account.get("state")).replace("_", " ")
    return (
        f"{which}: freed {account.get('freed')} tokens, re-billed {account.get('bust')} "
        f"(the schedule's bust {account.get('schedule_bust')}, net {account.get('net_bust')}), "
        f"saved {account.get('realised')} over {account.get('requests')} later requests: "
        f"{state} (fresh-token units)"
    )


async def with_account_now(store: Any, row: dict[str, Any]) -> dict[str, Any]:
    """A compacting request's row with its account as it stands now (``account_now``): the one
    the session's latest request carried, read from the session's newest rows."""
    line = line_of(row) or {}
    opened = line.get("compaction")
    if not isinstance(opened, dict) or not row.get("session_id"):
        return row
    rows = await store.list_requests(session=row["session_id"], limit=SESSION_ROWS, bodies=False)
    for later in rows:  # newest first
        account = (line_of(later) or {}).get("payback")
        if isinstance(account, dict) and account.get("request_id") == opened.get("request_id"):
            return {**row, "account_now": account}
    return row


def provider_text(row: dict[str, Any]) -> str | None:
    found = (line_of(row) or {}).get("provider")
    if not isinstance(found, dict):
        return None
    return "provider: " + ", ".join(f"{k} {v}" for k, v in sorted(found.items()))


def _money(line: dict[str, Any], key: str) -> str:
    usd = line.get(f"{key}_usd")
    if usd is not None:
        return f"${usd:.4f}"
    return f"{line.get(f'{key}_cost')} fresh-token units"


@dataclass
class SessionCost:
    """A session's requests with a cache line, added up."""

    requests: int = 0
    cost: float = 0.0  # in fresh input tokens
    direct: float = 0.0
    usd: float | None = None
    direct_usd: float | None = None
    rebilled: Counter[str] = field(default_factory=Counter)  # tokens, by cause
    busts: Counter[str] = field(default_factory=Counter)
    paid_back: int = 0
    not_paid_back: int = 0

    @property
    def saving(self) -> float | None:
        """The share of the direct cost saved (negative: it cost more)."""
        return 1 - self.cost / self.direct if self.direct else None


def session_cost(rows: Iterable[dict[str, Any]]) -> SessionCost:
    out = SessionCost()
    priced = True
    usd = direct_usd = 0.0
    for row in rows:
        line = line_of(row)
        if line is None or "cost" not in line:
            continue
        out.requests += 1
        out.cost += float(line["cost"])
        out.direct += float(line.get("direct_cost") or 0)
        if line.get("usd") is None:
            priced = False
        else:
            usd += float(line["usd"])
            direct_usd += float(line.get("direct_usd") or 0)
        cause = line.get("cause")
        if cause:
            out.busts[cause] += 1
            out.rebilled[cause] += int(line.get("rebilled") or 0)
        for decided in line.get("decided") or ():
            if decided == "paid_back":
                out.paid_back += 1
            elif decided == "not_paid_back":
                out.not_paid_back += 1
    if priced and out.requests:
        out.usd, out.direct_usd = usd, direct_usd
    return out


def cost_text(cost: SessionCost, model: str | None = None) -> str:
    """The session's cost line."""
    if not cost.requests:
        return "cost: no request with the upstream's cache usage"
    prices = f" at {model}'s prices" if model else ""
    if cost.usd is not None and cost.direct_usd is not None:
        money = f"${cost.usd:.4f} against ${cost.direct_usd:.4f} direct"
    else:
        money = f"{cost.cost:.0f} against {cost.direct:.0f} direct (fresh-token units)"
    saving = cost.saving
    delta = f" ({signed_share(-saving)})" if saving is not None else ""
    busts = ", ".join(f"{c} {cost.busts[c]}" for c in CAUSES if cost.busts[c]) or "none"
    return (
        f"input {money}{delta}{prices} over {cost.requests} "
        f"request{'' if cost.requests == 1 else 's'}; cache busts: {busts}; "
        f"compactions paid back {cost.paid_back}, not {cost.not_paid_back}"
    )


def signed_share(value: float) -> str:
    """``value`` as a signed percentage to one decimal, unsigned when it rounds to zero: "0.0%",
    never "-0.0%" or "+0.0%"."""
    text = f"{value:+.1%}"
    return text[1:] if text[1:] == "0.0%" else text


async def session_costs(
    store: Any, session: str | None, principal: str | None, limit: int
) -> list[tuple[str, str | None, SessionCost]]:
    """(session id, its latest model, its cost) for ``session``, else for the sessions of the
    latest requests (of ``principal`` when given), newest first, at most ``limit``."""
    if session is not None:
        ids = [session]
    else:
        ids = [s["session_id"] for s in await store.recent_sessions(SCAN, limit, principal)]
    out = []
    for sid in ids:
        rows = await store.list_requests(
            session=sid, principal=principal, limit=SESSION_ROWS, bodies=False
        )
        if rows:
            out.append((sid, rows[0].get("model"), session_cost(rows)))
    return out


def cost_record(session: str, model: str | None, cost: SessionCost) -> dict[str, object]:
    """``logs --cost --json``: one session's figures (costs in fresh input tokens)."""
    return {
        "session": session,
        "model": model,
        "requests": cost.requests,
        "cost_tokens": round(cost.cost, 1),
        "direct_tokens": round(cost.direct, 1),
        "saving": cost.saving,
        "usd": cost.usd,
        "direct_usd": cost.direct_usd,
        "rebilled_tokens": dict(cost.rebilled),
        "busts": dict(cost.busts),
        "paid_back": cost.paid_back,
        "not_paid_back": cost.not_paid_back,
    }


def session_cost_line(session: str, model: str | None, cost: SessionCost) -> str:
    """``logs --cost``: one session on one line."""
    return f"{session}  {cost_text(cost, model)}"
