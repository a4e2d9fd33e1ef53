"""From a raw request body to what will be forwarded: parse, validate, find the session, load its
state and ancestors, run the pipeline, save the state. ``ctxproxy rewrite`` calls
``Engine.rewrite``; the server calls ``Engine.prepare``, the same steps with the save (and the
cache attribution's note) left to ``Prepared.finish``, which runs once the upstream call has
started: the very same pipeline either way. A request bringing much new work is lowered, run
through the pipeline and lifted in the worker thread (``proxy.rewrite.offload``). The rules'
``Context`` of a request is made in ``proxy.rewrite.request_context``, the body to forward lifted
from the pipeline's outcome in ``proxy.rewrite.lifting``."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import sys
from collections.abc import Mapping
from typing import Any

from proxy.attribution.ledger import CacheLedger, Pending
from proxy.call_id_rules import call_id_rule
from proxy.errors import BadRequest
from proxy.principals import ANONYMOUS, scoped
from proxy.protocols.base import Adapter, Lowered
from proxy.protocols.chat import CHAT
from proxy.rewrite.cost_model import CostModel
from proxy.rewrite.hold_slots import HoldSlots, hold_bound
from proxy.rewrite.integrity import IntegritySampler
from proxy.rewrite.lifting import Lifting
from proxy.rewrite.model_windows import LearnedWindows
from proxy.rewrite.offload import OFFLOAD_BYTES as OFFLOAD_BYTES  # the tests' threshold
from proxy.rewrite.offload import Offload, command_bytes, current_lane, items_of, redacting_restore
from proxy.rewrite.pipeline import PREFIX_NAMESPACE, Pipeline, PipelineOutcome
from proxy.rewrite.prepared import Prepared
from proxy.rewrite.refused_states import RefusedStates
from proxy.rewrite.request_context import RequestContexts, _Request
from proxy.rewrite.resolver import Resolver
from proxy.rewrite.rewritten import Rewritten as Rewritten  # where callers find it
from proxy.rewrite.rewritten import Saved
from proxy.rewrite.session_key import named_session, parent_session_key, session_key
from proxy.settings import Settings
from proxy.store.base import SessionHandle, Store
from proxy.store.cache_feedback import CacheFeedback
from proxy.store.redact_state import redact_state
from proxy.tokens import TokenCounters
from proxy.workspace.pictures import Pictures
from rules.base import CacheFacts, Context, SessionState
from rules.context import budget_floor
from rules.messages import last_index, text_of

log = logging.getLogger("ctxproxy.engine")

PROXY_NAMESPACES = frozenset({PREFIX_NAMESPACE})  # only the proxy writes them: never redacted


class Engine(RequestContexts, Lifting):
    def __init__(
        self,
        settings: Settings,
        store: Store,
        counters: TokenCounters | None = None,
        budget_override: int | None = None,
        strict: bool = False,
    ) -> None:
        self.settings = settings
        self.store = store
        self.counters = counters or TokenCounters()
        self.budget_override = budget_override
        self.strict = strict  # tests: a rule's error fails the request; the adapters' bytes checked
        self.session_salt = b""  # keys a secret-like session name's hash: the server secret
        on_error = "fail" if strict else settings.pipeline.on_rule_error
        self.pipeline = Pipeline(settings.configured_rules(), on_error)
        self.restores_history = redacting_restore(self.pipeline.steps)  # ``Offload.weighed``
        self.resolver = Resolver(settings.resolver) if settings.resolver.enabled else None
        self._budgets: dict[str, int | None] = {}
        self._rooms: dict[str, int | None] = {}  # window_room_for's, cleared with _budgets
        self.costs = CostModel(settings)
        self.ledger = CacheLedger()  # each session's previous request, for the cache attribution
        # windows upstreams stated in "prompt too long" errors (proxy.server.rescue)
        self.learned = LearnedWindows()
        self.refused = RefusedStates()  # refused requests' states a later save stands on
        # one worker: the pipeline holds the GIL, so more threads would only take turns with it;
        # the server parses heavy bodies (and counts their tokens) there too
        self.offload = Offload()
        pool = settings.store.pool_size
        self.hold_slots = HoldSlots(hold_bound(store.kind, pool), pool)
        # the sampled production check that nothing memoised was changed in place (its failures
        # read at scrape time); the strict engine checks every request in ``_check``
        self.integrity = IntegritySampler(settings.memory.integrity_sample, self.pipeline)
        self.pictures = Pictures.of(settings)  # a configured workspace root's bootstrap

    def close(self) -> None:
        self.offload.close()

    async def _second_opinion(
        self,
        ctx: Context,
        outcome: PipelineOutcome,
        serialised: list[bytes | None] | None = None,
        heavy: bool = False,
    ) -> PipelineOutcome:
        """Ask the resolver model about references the rules abstained on (and, if set, to describe
        pointers from a parent session); when it answers, run the pipeline again from the same
        input with its answers as hints."""
        assert self.resolver is not None
        idx = last_index(ctx.messages, ["user"])
        user_text = text_of(ctx.messages[idx].get("content")) if idx is not None else ""
        refs = outcome.report.get("references") or []
        hints, info = await self.resolver.consult(refs, user_text)
        if info is None:
            return outcome
        if hints:
            again = ctx.evolve(hints={**ctx.hints, **hints})
            outcome = await self.offload.maybe(heavy, self.pipeline.run, again, serialised)
        outcome.report["resolver"] = info
        return outcome

    async def rewrite(
        self,
        body: dict[str, Any],
        headers: Mapping[str, str],
        now: float,
        session_id: str | None = None,
        parent_session_id: str | None = None,
        raw_size: int = 0,
        budget: int | None = None,
        adapter: Adapter = CHAT,
        principal: str = ANONYMOUS,
        fresh: int | None = None,
        model: str | None = None,
    ) -> Rewritten:
        """``body`` in ``adapter``'s protocol, validated; ``budget``: a lower budget for this call
        only (the overflow rescue's). ``session_id`` and ``parent_session_id`` name sessions as
        the client does; everything is kept under ``principal`` (``proxy.principals``).
        ``fresh``: how many of the body's ``raw_size`` bytes the session's previous body did not
        have (``BodyMemory.read``; all of them when not known): with its items, the work that
        decides whether it runs in the worker thread. ``model``: the model, where the body does
        not name it (Gemini's is the path's). The session's state is saved when it returns."""
        prepared = await self.prepare(
            body, headers, now, session_id, parent_session_id, raw_size, budget, adapter,
            principal, fresh, model,
        )  # fmt: skip
        return await prepared.finish()

    async def prepare(
        self,
        body: dict[str, Any],
        headers: Mapping[str, str],
        now: float,
        session_id: str | None = None,
        parent_session_id: str | None = None,
        raw_size: int = 0,
        budget: int | None = None,
        adapter: Adapter = CHAT,
        principal: str = ANONYMOUS,
        fresh: int | None = None,
        model: str | None = None,
    ) -> Prepared:
        """``rewrite``'s body to forward, the session still held: ``Prepared.finish`` saves its
        state, notes the request for the cache attribution and lets the session go. The server
        starts the upstream call first, so that work runs while the upstream reads the request;
        ``finish`` must be awaited once however the call ends (a failure here lets go itself)."""
        items = items_of(body)  # messages and their blocks: read once
        heavy = self.offload.heavy(raw_size if fresh is None else fresh, items)
        # the adapters reuse what they derived from the session's previous request: named before
        # lowering by what names it without the messages (a conversation's hash needs them; the
        # adapter tells conversations apart by their first message)
        salt = self.session_salt
        given = session_id or named_session(headers, body, salt)
        key = functools.partial(session_key, headers, body, salt=salt)  # of a conversation
        hint = None if adapter is CHAT else scoped(principal, given or key([]))
        lowered = await self.offload.maybe(heavy, adapter.lower, body, hint)
        sid = scoped(principal, given or key(lowered.conversation()))
        new = raw_size if fresh is None else fresh
        if not heavy:  # few new bytes, but commands (and a redacting restore) cost more a byte
            commands = command_bytes(lowered.messages, new)
            heavy = self.offload.weighed(new, items, commands, self.restores_history)
        if not heavy and fresh is not None:  # few new bytes, but perhaps not for this session
            heavy = self._cold(sid, model or str(body["model"]), lowered, raw_size, items)
        named_parent = parent_session_id or parent_session_key(headers, salt)
        parent = scoped(principal, named_parent) if named_parent else None
        named = model if model is not None else str(body["model"])
        hints = await self.pictures.hint(sid, named) if self.pictures else None
        call_ids = call_id_rule(self.settings.upstream_for(named), adapter.name)
        request = _Request(body, lowered, adapter, now, sid, budget, heavy, model, hints, call_ids)
        stack = contextlib.AsyncExitStack()  # the session: serialised across replicas
        await stack.__aenter__()
        try:
            # a lane's holds at once are bounded (its principal's, or in passthrough all those no
            # upstream answered yet: ``Principals.lane``): each takes a shared pooled connection
            slot = self.hold_slots.lease(current_lane(principal))
            known = None if parent or heavy else self.store.known_state(sid)
            ran: tuple[Context, PipelineOutcome] | None = None
            hold = self.store.session(sid, slot)
            if known is None:
                held = await stack.enter_async_context(hold)
            else:
                held, ran = await self._hold_running_ahead(stack, hold, request, *known)
            return await self._prepare_locked(stack, held, request, parent, ran)
        except BaseException:
            await stack.__aexit__(*sys.exc_info())
            raise

    def _cold(self, sid: str, model: str, lowered: Lowered, raw_size: int, items: int) -> bool:
        """Whether a body the body memory had mostly seen goes to the worker all the same: the
        session's memos do not know its messages (another session sent it, or its memos were let
        go), so the rules would work through them cold, on the event loop (``items_of``: items)."""
        if not self.offload.heavy(raw_size, items):
            return False  # inline however cold
        memos = self.pipeline.memos
        encoding = getattr(self.counters.for_model(model), "encoding_name", None)
        share = memos.unknown_share(sid, encoding, lowered.messages) if memos else 1.0
        return self.offload.heavy(int(raw_size * share), items)

    async def _hold_running_ahead(
        self,
        stack: contextlib.AsyncExitStack,
        hold: contextlib.AbstractAsyncContextManager[SessionHandle],
        request: _Request,
        state: SessionState,
        feedback: CacheFeedback | None,
    ) -> tuple[SessionHandle, tuple[Context, PipelineOutcome]]:
        """Hold the session while running the pipeline on the state this process last saw: the
        hold's round trip to the database then costs nothing when that state is still the one
        stored (the caller checks; the pipeline is pure, so its outcome stands)."""
        entering = asyncio.ensure_future(stack.enter_async_context(hold))
        try:
            await asyncio.sleep(0)  # the hold's query goes out before the pipeline takes the loop
            ctx = self._context(request, state, [], self.costs.facts(request.model, feedback))
            ran = (ctx, self._run(ctx, request.lowered))
        except BaseException:
            # the request failed or was cancelled: stop the hold rather than wait for it (a lock
            # held elsewhere could take lock_timeout_s); once entered, the stack lets it go
            entering.cancel()
            await asyncio.gather(entering, return_exceptions=True)
            raise
        return await entering, ran

    def _still_holds(
        self,
        ctx: Context,
        state: SessionState,
        cache: CacheFacts,
        parent: str | None,
        request: _Request,
    ) -> bool:
        """Whether a pipeline run ahead of the hold had the inputs it would have now: the state
        held is the very object it ran on (the store keeps it when the stored version is the one
        it knew), the same cache report and budget, and no ancestors to read."""
        return (
            ctx.state is state
            and ctx.cache == cache
            and parent is None
            and ctx.budget == self._budget(request)
            and ctx.window_room == self._hard_limit(request)
        )

    def _run(self, ctx: Context, lowered: Lowered) -> PipelineOutcome:
        return self.pipeline.run(ctx, lowered.serialised)

    async def _prepare_locked(
        self,
        stack: contextlib.AsyncExitStack,
        held: SessionHandle,
        request: _Request,
        parent: str | None,
        ahead: tuple[Context, PipelineOutcome] | None,
    ) -> Prepared:
        state, stored_parent = held.state, held.parent_id
        if stored_parent is not None or state.data:
            # a session's parent is the one it was created with: no later request re-links it
            parent = stored_parent
        ancestors = await held.ancestors(parent) if parent else []
        model, sid, now = request.model, request.sid, request.now
        cache = self.costs.facts(model, await self.store.cache_feedback.get(sid))
        if ahead is not None and self._still_holds(ahead[0], state, cache, parent, request):
            ctx, outcome = ahead  # run on the very state held now, with the same inputs
        else:
            ctx = self._context(request, state, ancestors, cache)
            # a heavy request would hold the event loop for as long as it takes: other requests
            # and /healthz keep being served while it runs in the worker thread
            outcome = await self.offload.maybe(request.heavy, self._run, ctx, request.lowered)
        lowered = request.lowered
        if self.resolver is not None:
            outcome = await self._second_opinion(ctx, outcome, lowered.serialised, request.heavy)
        outcome.report["cache"] = self.costs.summary(model, cache, now)
        pruned = outcome.report.get("prune") or {}
        if pruned.get("over_budget"):  # a session below its floor is said once (its log line)
            tokens, budget = pruned.get("tokens_after"), pruned.get("budget")
            quiet = budget_floor.was_told(outcome.state, budget)
            extra = {"session": sid, "tokens": tokens, "budget": budget}
            log.log(logging.DEBUG if quiet else logging.WARNING, "request over budget", extra=extra)
            if self.settings.pipeline.on_over_budget == "reject":
                raise BadRequest(
                    f"The conversation needs {tokens} tokens after pruning, over the budget of "
                    f"{budget} tokens (pipeline.on_over_budget: reject).",
                    param="messages",
                    code="context_over_budget",
                )
        forwarded, data = await self.offload.maybe(request.heavy, self._lift, ctx, request, outcome)
        saved = Saved(state)
        rewritten = Rewritten(
            forwarded, outcome.report, sid, parent, request.adapter.name, data,
            model=request.named_model, saved=saved,
        )  # fmt: skip
        finish = functools.partial(self._finish, held, saved, ctx, outcome, request.heavy, parent)
        return Prepared(rewritten, finish, stack)

    async def _finish(
        self,
        held: SessionHandle,
        saved: Saved,
        ctx: Context,
        outcome: PipelineOutcome,
        heavy: bool,
        parent: str | None,
    ) -> Pending:
        """What a request leaves once its body is known: the session's new state, saved (redacted
        against the state it ran on), and its facts for the cache attribution."""
        redacted = await self.offload.maybe(
            heavy, redact_state, outcome.state, saved.before, PROXY_NAMESPACES
        )
        await held.save(redacted, parent)
        saved.state = redacted
        return self.ledger.begin(ctx, outcome)

    async def take_back(self, first: Rewritten, last: Rewritten | None = None) -> bool:
        """A request the upstream refused (or the proxy, once its state was saved): its
        session put back to the state ``first`` ran on, where what is stored is still what
        ``last`` (the overflow rescue's retry, else ``first``) saved; a later request's save
        is left standing, and so is one saved between ``first`` and ``last`` (the retry ran
        on it: that is what goes back). A state refused and left standing so is put back past
        once the request that stood on it is refused too (``RefusedStates``). Whether it was
        put back."""
        last = last or first
        for noted in (last.cache, first.cache):  # the retry's first, then the request's
            if noted is not None:
                self.ledger.take_back(noted)
        kept, saved = first.saved, last.saved
        if kept is None or saved is None or last.session_id != first.session_id:
            return False
        done = saved.state
        if done is None:  # nothing saved
            return False
        back = saved.before
        mine = kept.state
        if last is not first and mine is not None and (back is mine or back.data == mine.data):
            back = kept.before  # the retry ran on what ``first`` saved: before both
        sid = first.session_id
        slot = self.hold_slots.lease(current_lane(first.principal))
        async with self.store.session(sid, slot) as held:
            if not _still_saved(held.state, done):
                self.refused.note(sid, done, back)  # a later save stands on it
                return False
            await held.save(self.refused.before(sid, back), None)
        kept.state = saved.state = None  # put back: nothing of theirs is stored
        return True


def _still_saved(now: SessionState, done: SessionState) -> bool:
    """Whether what is stored (``now``) is still the state a request saved (``done``): itself,
    an equal one (read back), or it as stored over the state bound (``limits.max_state_bytes``:
    some namespaces left out, ``proxy.store.state_bytes.stored_state``), the rest the same."""
    if now is done:
        return True
    stored, saved = now.data, done.data
    if not stored:  # none (the session pruned meanwhile) is no copy of a state: not revived
        return not saved
    return stored.keys() <= saved.keys() and all(saved[ns] == v for ns, v in stored.items())
