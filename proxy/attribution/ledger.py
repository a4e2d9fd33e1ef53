"""Each session's memory for the attribution: what its previous request sent (``probe.Sent``), the
upstream's usage of it, the direct lane's last prompt and the open compaction's account. Kept in
memory, per scoped session (``principal/name``), bounded by sessions and bytes: over a bound, the
principal holding most (sessions, or bytes) loses its least recently used session, so one
tenant's many sessions or large tools do not push another's out; finding it costs O(log
principals) (``proxy.fair_lru``), never a walk over other tenants' sessions. A session it no
longer holds starts over (its next request is compared by the cache feedback's time and usage
only).
``begin`` runs while the engine holds the session (the comparison with the previous request is
made then: deferred, it would keep the request's lists and token counts alive until the answer
is settled, a long stream's end), ``settle`` when the answer's usage is known."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from proxy.attribution import payback
from proxy.attribution.attribute import Direct, Usage, attribute
from proxy.attribution.probe import Facts, Sent, decision_of, digests, observe, tools_digest_sized
from proxy.fair_lru import FairLRU
from proxy.principals import split_scoped
from rules.base import CacheFacts, Context, Message
from rules.report import Report

MAX_SESSIONS = 20_000
MAX_BYTES = 64 * 1024 * 1024


@dataclass
class _Session:
    sent: Sent | None = None
    usage: Usage | None = None
    direct: Direct | None = None
    account: payback.Account | None = None
    response_id: str | None = None  # its previous answer's id (the provider's diagnostics)
    # the tools last seen, their digest and their bytes (charged): the same object again (the
    # body memory's, the adapters' declarations read once) is not serialised and hashed again
    tools: tuple[Any, bytes, int] | None = None

    @property
    def size(self) -> int:
        return (self.sent.size if self.sent is not None else 0) + (
            self.tools[2] if self.tools is not None else 0
        )


class Outcome(Protocol):
    """What the pipeline made of a request (``proxy.rewrite.pipeline.PipelineOutcome``)."""

    @property
    def messages(self) -> Sequence[Message]: ...
    @property
    def hashes(self) -> Sequence[str]: ...  # the forwarded messages' content hashes
    @property
    def history(self) -> Sequence[str]: ...  # the client's messages' content hashes
    @property
    def report(self) -> Report: ...


@dataclass(frozen=True)
class Pending:
    """A request rewritten, waiting for its usage: what ``settle`` needs."""

    session_id: str
    facts: Facts
    cache: CacheFacts
    diagnose: bool = False  # the provider was asked for its diagnosis (``diagnostics``)
    compared_with: str | None = None  # the previous answer's id it was asked against
    sent: Sent | None = None  # what it noted as the session's previous request
    replaced: Sent | None = None  # what that was before (``take_back``)


@dataclass
class CacheLedger:
    max_sessions: int = MAX_SESSIONS
    max_bytes: int = MAX_BYTES
    # scoped session id -> its memory, each charged its size, its principal the id's own
    _sessions: FairLRU[str, _Session] = field(init=False)

    def __post_init__(self) -> None:
        self._sessions = FairLRU(self.max_sessions, self.max_bytes)

    def begin(self, ctx: Context, outcome: Outcome) -> Pending:
        """This request's facts against the session's previous one; it becomes the previous."""
        sid = ctx.session_id
        session = self._sessions.peek(sid)
        if session is None:
            session = _Session()
        tools_tokens = ctx.tokens.count_tools(ctx.tools)
        counts = outcome.report.get("tokens")
        before, after = (counts["before"], counts["after"]) if counts else (0, 0)
        client = ctx.original_messages
        seen = session.tools
        if seen is None or seen[0] is not ctx.tools:
            digest, size = tools_digest_sized(ctx.tools)
            session.tools = seen = (ctx.tools, digest, size)
        sent = Sent(
            at=ctx.now,
            model=ctx.model,
            client=digests(outcome.history),
            forwarded=digests(outcome.hashes),
            tools=seen[1],
            client_tokens=before + tools_tokens,
            tokens=after + tools_tokens,
            decision=decision_of(outcome.report),
        )
        facts = observe(
            session.sent, sent, client, outcome.messages, ctx.tokens, tools_tokens, outcome.report,
            ctx.cache.last_at,
        )  # fmt: skip
        replaced, session.sent = session.sent, sent
        self._keep(sid, session)
        return Pending(sid, facts, ctx.cache, sent=sent, replaced=replaced)

    def take_back(self, pending: Pending) -> None:
        """A request refused: the session's previous request is again the one before it,
        unless a later one was noted since (a refused request was never cached upstream)."""
        session = self._sessions.peek(pending.session_id)
        if session is not None and pending.sent is not None and session.sent is pending.sent:
            session.sent = pending.replaced

    def previous_response(self, session_id: str) -> str | None:
        """The id of the session's latest answer, as its upstream named it."""
        session = self._sessions.peek(session_id)
        return session.response_id if session is not None else None

    def settle(
        self,
        pending: Pending,
        request_id: str,
        usage: Usage | None,
        response_id: str | None = None,
    ) -> tuple[dict[str, Any], list[str]]:
        """The request's cache line, and the compaction outcomes it decided (``paid_back``,
        ``not_paid_back``) for the metrics."""
        session = self._sessions.peek(pending.session_id)
        if session is None:  # dropped meanwhile: attributed without the session's past
            session = _Session()
        facts, cache = pending.facts, pending.cache
        previous = session.usage or _reported(cache)
        line, session.direct = attribute(facts, usage, previous, cache, session.direct)
        decided: list[str] = []
        account = session.account
        if account is not None and usage is not None and facts.compaction is None:
            carried = payback.carry(account, usage.prompt, usage.cached, cache)
            if carried.state != account.state:
                decided.append(carried.state)
            session.account = account = carried
        if facts.compaction is not None:
            if account is not None:
                closed = payback.close(account)
                if closed.state != account.state:
                    decided.append(closed.state)
            scale = usage.prompt / facts.tokens if usage is not None and facts.tokens else 1.0
            bust = float(line.get("rebilled_cost") or 0) if line.get("cause") == "proxy" else 0.0
            read = cache.read_ratio
            account = payback.open_account(request_id, facts.compaction, scale, bust, read)
            if account.state == payback.PAID_BACK:
                decided.append(payback.PAID_BACK)
            session.account = account
            line["compaction"] = account.view()
        elif account is not None:
            line["payback"] = account.view()
        if usage is not None:
            session.usage = usage
        if response_id is not None:
            session.response_id = response_id
        self._sessions.get(pending.session_id)  # its principal's most recently used, if kept
        return line, decided

    def _keep(self, sid: str, session: _Session) -> None:
        """Keep ``session`` (changed in place, or new) charged its size now; then evict."""
        self._sessions.put(sid, session, split_scoped(sid)[0], session.size)

def _reported(cache: CacheFacts) -> Usage | None:
    """The session's previous usage as the cache feedback kept it (the ledger lost it)."""
    if cache.last_prompt_tokens is None:
        return None
    return Usage(
        cache.last_prompt_tokens, cache.last_cached_tokens or 0, cache.last_cache_write_tokens or 0
    )
