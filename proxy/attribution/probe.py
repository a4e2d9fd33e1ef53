"""What a request changed against the session's previous one, taken while the session is held
(so requests of a session are compared in the order they were rewritten): where the client's own
bytes first differ (system prompt, tools, model, an earlier message), where the forwarded bytes
first differ, and which of the proxy's decisions made a forwarded prefix differ where the client's
did not. Sizes are the proxy's token counts (messages plus the tools schema)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from rules.base import Message, TokenCounter
from rules.report import Report

DIGEST = 10  # bytes of ``rules.base.content_hash`` (20 hex digits)


@dataclass(frozen=True)
class Sent:
    """What one request sent, kept for the session's next: the client's messages and the
    forwarded ones as digests (``DIGEST`` bytes each), the tools schema's digest, the model."""

    at: float
    model: str
    client: bytes
    forwarded: bytes
    tools: bytes
    client_tokens: int
    tokens: int
    decision: str = "rewrite"  # the proxy's decision that made what it made (``decision_of``)

    @property
    def size(self) -> int:
        return len(self.client) + len(self.forwarded) + 200


@dataclass(frozen=True)
class Facts:
    """This request against the session's previous one (``previous_at`` None: none known)."""

    at: float
    previous_at: float | None
    tokens: int  # forwarded, tools schema included
    client_tokens: int  # as the client sent them
    previous_tokens: int | None
    shared_tokens: int | None  # forwarded tokens the previous forwarded request began with
    client_shared: int | None  # client tokens its previous request began with
    changed_by: str | None  # client | proxy: whose edit made the forwarded prefix differ
    where: str | None  # the client's change: system, tools, model, messages[i] (role)
    decision: str | None  # the proxy's: compaction (forced|paid|cold), block, repair (kind)
    compaction: dict[str, Any] | None  # this request compacted: freed tokens, schedule figures
    compared: bool = True  # the previous request's bytes were known (False: only its time)
    # tokens the forwarded prompt begins with as the client sent them (all: nothing changed)
    as_sent: int | None = None

    @property
    def idle_s(self) -> float | None:
        return None if self.previous_at is None else max(0.0, self.at - self.previous_at)


def digests(hashes: Sequence[str]) -> bytes:
    return bytes.fromhex("".join(hashes))


def tools_digest(tools: Any) -> bytes:
    return tools_digest_sized(tools)[0]


def tools_digest_sized(tools: Any) -> tuple[bytes, int]:
    """The tools' digest and the bytes it was taken of (what keeping them alive costs)."""
    if not tools:
        return b"", 0
    try:
        data = orjson.dumps(tools, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        data = repr(tools).encode("utf-8", "replace")
    return hashlib.blake2b(data, digest_size=DIGEST).digest(), len(data)


def first_difference(mine: bytes, theirs: bytes) -> int:
    """How many leading messages two digest strings share."""
    n = min(len(mine), len(theirs)) // DIGEST
    if mine[: n * DIGEST] == theirs[: n * DIGEST]:
        return n
    lo, hi = 0, n  # the shared prefix is monotone: a bisection on slice equality
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if mine[: mid * DIGEST] == theirs[: mid * DIGEST]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def observe(
    previous: Sent | None,
    sent: Sent,
    client_messages: Sequence[Message],
    forwarded_messages: Sequence[Message],
    tokens: TokenCounter,
    tools_tokens: int,
    report: Report,
    last_at: float | None = None,
) -> Facts:
    """The facts of ``sent`` against ``previous``: the earliest change of each side inside the
    previous request (an append past its end changes nothing cached). Without ``previous`` (a
    restart, another replica), ``last_at`` is when the upstream last answered the session, if
    the cache feedback knows: its time only, its bytes unknown."""
    compaction = _compaction(report)
    as_sent = _as_sent(sent, forwarded_messages, tokens, tools_tokens)
    if previous is None:
        return Facts(
            sent.at, last_at, sent.tokens, sent.client_tokens, None, None, None, None, None, None,
            compaction, compared=False, as_sent=as_sent,
        )  # fmt: skip
    prev_fwd = len(previous.forwarded) // DIGEST
    fwd = first_difference(sent.forwarded, previous.forwarded)
    cli = first_difference(sent.client, previous.client)
    same_head = sent.model == previous.model and sent.tools == previous.tools
    shared = previous.tokens
    if fwd < prev_fwd:
        shared = tools_tokens + _count(tokens, forwarded_messages, fwd)
    client_shared = (
        previous.client_tokens
        if cli * DIGEST >= len(previous.client)
        else tools_tokens + _count(tokens, client_messages, cli)
    )
    if not same_head:
        shared = client_shared = 0
    changed_by = where = decision = None
    if not same_head:
        changed_by, where = "client", "model" if sent.model != previous.model else "tools"
    elif fwd < prev_fwd:
        made_now = _made(sent, fwd)
        client_changed = cli * DIGEST < len(previous.client)
        if made_now or not client_changed:
            changed_by = "proxy"
            # what the proxy makes now there, else what it made there before and now does not
            # replay (a placeholder for a result that has since come, a block dropped)
            decision = sent.decision if made_now or not _made(previous, fwd) else previous.decision
        else:
            changed_by, where = "client", _where(client_messages, cli)
    return Facts(
        sent.at, previous.at, sent.tokens, sent.client_tokens, previous.tokens, shared,
        client_shared, changed_by, where, decision, compaction, as_sent=as_sent,
    )  # fmt: skip


def _as_sent(
    sent: Sent, forwarded: Sequence[Message], tokens: TokenCounter, tools_tokens: int
) -> int:
    """The tokens the forwarded prompt begins with as the client sent them: all of it when
    nothing changed, else the tools and the messages before the first the proxy changed (what a
    provider's cache holds for the client's bytes as much as for the forwarded ones)."""
    if sent.forwarded == sent.client:
        return sent.tokens
    return tools_tokens + _count(tokens, forwarded, first_difference(sent.forwarded, sent.client))


def _count(tokens: TokenCounter, messages: Sequence[Message], n: int) -> int:
    return tokens.count_messages(messages[:n]) - 3 if n else 0


def _made(sent: Sent, index: int) -> bool:
    """Whether the forwarded message at ``index`` is none of the client's: the proxy made it."""
    start = index * DIGEST
    mine = sent.forwarded[start : start + DIGEST]
    client = sent.client
    return not any(client[i : i + DIGEST] == mine for i in range(0, len(client), DIGEST))


def _where(messages: Sequence[Message], index: int) -> str:
    if index >= len(messages):
        return f"messages[{index}]"
    role = messages[index].get("role") if isinstance(messages[index], dict) else None
    if index == 0 and role in ("system", "developer"):
        return "system"
    return f"messages[{index}] ({role})"


def decision_of(report: Report) -> str:
    """The proxy's decision that changed an earlier message: a compaction (with the schedule's
    reason), a block (inject's stored blocks collapsed or dropped), a repair; else a rewrite."""
    prune = report.get("prune") or {}
    if prune.get("compacted"):
        schedule = prune.get("schedule") or {}
        return f"compaction ({schedule.get('decision') or 'forced'})"
    inject = report.get("inject") or {}
    if inject.get("collapsed") or inject.get("lost") or inject.get("position") == "message":
        return "block"
    repairs = report.get("repairs") or []
    if repairs:
        return f"repair ({repairs[0].get('kind')})"
    if report.get("loops"):
        return "loop note"
    return "rewrite"


def _compaction(report: Report) -> dict[str, Any] | None:
    prune = report.get("prune") or {}
    if not prune.get("compacted"):
        return None
    schedule = prune.get("schedule") or {}
    stages = prune.get("stages") or {}
    return {
        "freed": sum(v for k, v in stages.items() if k != "cap"),
        "decision": schedule.get("decision"),
        "bust_cost": schedule.get("bust_cost"),
        "expected_saving": schedule.get("expected_saving"),
        "horizon": schedule.get("horizon"),
    }
