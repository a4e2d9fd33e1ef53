"""What the engine would forward for a body now, without holding or saving its session: for
``/v1/messages/count_tokens``, whose count must be of what the proxy sends, not of what the client
wrote (a block the proxy adds is billed too). The session's state is read as a snapshot; nothing
is written, so a count never changes what the next real request sees."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from proxy.principals import scoped
from proxy.protocols.base import Adapter
from proxy.rewrite.offload import command_bytes, current_lane, items_of
from proxy.rewrite.session_key import session_key

if TYPE_CHECKING:
    from proxy.rewrite.engine import Engine


async def forwarded_body(
    engine: Engine,
    body: dict[str, Any],
    headers: Mapping[str, str],
    now: float,
    principal: str,
    adapter: Adapter,
    raw_size: int,
    model: str | None = None,
) -> dict[str, Any]:
    """The body ``engine.rewrite`` would forward (its first pass: no resolver model, no rescue).
    ``model``: the model, where the body does not name it (Gemini's path)."""
    from proxy.rewrite.request_context import _Request

    items = items_of(body)
    heavy = engine.offload.heavy(raw_size, items)
    hint = scoped(principal, session_key(headers, body, [], engine.session_salt))
    lowered = await engine.offload.maybe(heavy, adapter.lower, body, hint)
    if not heavy:  # few bytes, but commands (and a redacting restore) cost more a byte, as in
        # ``Engine.prepare``: a count's 38 KB of `mv` lines held the loop 0.3 s inline
        commands = command_bytes(lowered.messages, raw_size)
        heavy = engine.offload.weighed(raw_size, items, commands, engine.restores_history)
    sid = scoped(principal, session_key(headers, body, lowered.conversation(), engine.session_salt))
    # the reads take pooled connections (a snapshot waits out another replica's save), within
    # the principal's share of the pool, as a request's hold does (``hold_slots``)
    async with engine.hold_slots.slot(current_lane(principal)):
        state, parent = await engine.store.load_state(sid)
        ancestors = await engine.store.ancestors(parent) if parent else []
        feedback = await engine.store.cache_feedback.get(sid)
    request = _Request(body, lowered, adapter, now, sid, None, heavy, model)
    cache = engine.costs.facts(request.model, feedback)
    ctx = engine._context(request, state, ancestors, cache)
    outcome = await engine.offload.maybe(heavy, engine._run, ctx, lowered)
    forwarded, _ = await engine.offload.maybe(heavy, engine._lift, ctx, request, outcome)
    return forwarded
