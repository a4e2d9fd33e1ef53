"""A request's comparison with the session's previous one is worked out when its cache line is
settled, after the answer: it must be what it was when the request was rewritten, whatever the
session's later requests and whoever holds the report did meanwhile."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from proxy.attribution.ledger import CacheLedger
from proxy.attribution.probe import compaction_of, observe
from proxy.tokens import RequestTokens, TiktokenCounter
from rules.base import Context
from rules.messages import content_hash


@dataclass
class Outcome:
    messages: list[Any]
    hashes: list[str]
    history: list[str]
    report: dict[str, Any]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def request(
    texts: list[str], now: float, forwarded: list[str] | None = None
) -> tuple[Context, Outcome]:
    client = [user(t) for t in texts]
    sent = [user(t) for t in forwarded] if forwarded is not None else client
    ctx = Context(
        messages=client, model="gpt-4o", tokens=RequestTokens(TiktokenCounter("gpt-4o")), now=now,
        session_id="p/s", original_messages=client,
    )  # fmt: skip
    report: dict[str, Any] = {"tokens": {"before": 10 * len(client), "after": 10 * len(sent)}}
    if forwarded is not None:
        report["prune"] = {
            "compacted": True,
            "stages": {"mask": 40},
            "schedule": {"decision": "paid"},
        }
    hashes = [content_hash(m) for m in sent]
    return ctx, Outcome(sent, hashes, [content_hash(m) for m in client], report)


def eager(ledger: CacheLedger, ctx: Context, outcome: Outcome) -> Any:
    """The facts as the request's rewrite would have taken them (its previous ``Sent`` then)."""
    session = ledger._sessions.get("p/s")
    previous = session.sent if session is not None else None
    pending = ledger.begin(ctx, outcome)
    sent = ledger._sessions["p/s"].sent
    tools = ctx.tokens.count_tools(ctx.tools)
    want = observe(
        previous, sent, ctx.original_messages, outcome.messages, ctx.tokens, tools,  # type: ignore[arg-type]
        compaction_of(outcome.report), ctx.cache.last_at,  # type: ignore[arg-type]
    )  # fmt: skip
    return pending, want


def test_facts_read_after_later_requests_are_those_of_the_requests_own_time() -> None:
    ledger = CacheLedger()
    turns = [
        (["S", "u1"], None),
        (["S", "u1", "a1", "u2"], None),
        (["S", "u1", "a1", "u2", "a2", "u3"], ["S", "u1", "[pruned]", "u2", "a2", "u3"]),
        (["S", "changed", "a1"], None),
        (["S", "changed", "a1", "u4"], None),
    ]
    pendings = []
    for step, (texts, forwarded) in enumerate(turns):
        ctx, outcome = request(texts, 1000.0 + step, forwarded)
        pending, want = eager(ledger, ctx, outcome)
        # what holds the report later may change it (a breakpoints note, a rescue's figures)
        outcome.report["prune"] = {"compacted": not outcome.report.get("prune"), "stages": {}}
        pendings.append((pending, want))
    # read last, after every later request of the session began: each its own comparison
    for pending, want in pendings:
        assert pending.facts == want
    firsts = [p.facts for p, _ in pendings]
    assert firsts[0].compared is False and firsts[1].compared
    assert firsts[2].compaction is not None and firsts[2].changed_by == "proxy"
    assert firsts[3].changed_by == "client" and firsts[4].compaction is None


def test_a_settled_line_is_the_same_read_early_or_late() -> None:
    lines = []
    for read_early in (True, False):
        ledger = CacheLedger()
        for step, texts in enumerate((["S", "u1"], ["S", "u1", "a1", "u2"])):
            ctx, outcome = request(texts, 1000.0 + step)
            pending = ledger.begin(ctx, outcome)
            if read_early:
                pending.facts  # noqa: B018  # worked out at once, as before
            # a later request of the session is rewritten before this one's answer is in
            ledger.begin(*request([*texts, "a", "u"], 2000.0 + step))
            lines.append(ledger.settle(pending, f"r{step}", None)[0])
    assert lines[:2] == lines[2:]
