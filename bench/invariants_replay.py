"""The cross-protocol replay (``bench.protocol_invariants``): the corpus's conversations request
by request through one engine per protocol (and per protocol's chat view), each step's decisions
compared with the chat replay's and each disagreement classified."""

from __future__ import annotations

import sys
import time
from typing import Any

from bench.golden import settings_for
from bench.invariants_classes import VIEW, classify, describe, same
from bench.invariants_steps import (
    ALL_DIMENSIONS,
    DIMENSIONS,
    MODEL,
    Decisions,
    TraceResult,
    forwarded_view,
    integrity_of,
    joined_items,
    merged_turns,
    pruning_of,
    repairs_of,
)
from bench.protocol_convert import to_anthropic, to_responses
from bench.protocol_convert_gemini import gemini_view, to_gemini
from proxy.protocols.anthropic import ANTHROPIC
from proxy.protocols.base import Adapter, strip_tag
from proxy.protocols.chat import CHAT
from proxy.protocols.gemini import GEMINI
from proxy.protocols.gemini_lift import EMPTY_USER_TURN
from proxy.protocols.responses import RESPONSES as RESPONSES_ADAPTER
from proxy.protocols.validate import validate_anthropic, validate_gemini, validate_responses
from proxy.rewrite.engine import Engine
from proxy.store.sqlite import Store
from proxy.tokens import TokenCounters
from tests.support.traces import request_prefixes

STEP_SECONDS = 7.0
_FILLER = {"role": "user", "parts": [{"text": EMPTY_USER_TURN}]}


class Replayer:
    """One engine (own in-memory store) per protocol, so sessions never share anything."""

    def __init__(self, overrides: dict[str, Any], system: str, encrypted: bool = True) -> None:
        self.overrides = overrides
        self.system = system
        self.encrypted = encrypted
        self.engines: dict[str, tuple[Engine, Store]] = {}
        self.counters = TokenCounters()

    async def open(self) -> None:
        for name in ("chat", "anthropic", "responses", "gemini", *VIEW.values()):
            store = Store(":memory:", batch_window_s=0)
            await store.open()
            engine = Engine(settings_for(self.overrides), store, self.counters, strict=True)
            self.engines[name] = (engine, store)

    async def close(self) -> None:
        for engine, store in self.engines.values():
            engine.close()
            await store.close()

    def body(self, protocol: str, prefix: list[dict[str, Any]]) -> tuple[dict[str, Any], Adapter]:
        if protocol.startswith("view:"):
            body, adapter = self.body(protocol[5:], prefix)
            lowered = adapter.lower(body)
            view = [strip_tag(m) for m in lowered.messages]
            return {"model": MODEL, "messages": view}, CHAT
        chat = {"model": MODEL, "messages": prefix}
        if protocol == "anthropic":
            body = to_anthropic(chat).body
            validate_anthropic(body)
            return body, ANTHROPIC
        if protocol == "responses":
            body = to_responses(chat, self.system, self.encrypted).body
            validate_responses(body)
            return body, RESPONSES_ADAPTER
        if protocol == "gemini":
            body = to_gemini(chat).body
            validate_gemini(body)
            return body, GEMINI
        return chat, CHAT

    async def step(
        self, protocol: str, prefix: list[dict[str, Any]], sid: str, now: float
    ) -> Decisions:
        engine, store = self.engines[protocol]
        body, adapter = self.body(protocol, prefix)
        model = MODEL if adapter is GEMINI else None  # Gemini's model is the path's
        done = await engine.rewrite(body, {}, now=now, session_id=sid, adapter=adapter, model=model)
        state, _ = await store.load_state(sid)
        report: dict[str, Any] = dict(done.report)
        return Decisions(
            repairs=repairs_of(report),
            entities=state.get("entities"),
            pruning=pruning_of(report),
            integrity=integrity_of(protocol, report, done.body),
            forwarded=forwarded_view(protocol, done.body),
            tokens_before=(report.get("tokens") or {}).get("before"),
            body=done.body,
            prune_skipped=(report.get("prune") or {}).get("skipped"),
        )

    def converted_body(self, protocol: str, chat_messages: list[dict[str, Any]]) -> dict[str, Any]:
        chat = {"model": MODEL, "messages": chat_messages}
        if protocol == "anthropic":
            return to_anthropic(chat).body
        if protocol == "gemini":
            return to_gemini(chat).body
        return to_responses(chat, self.system, self.encrypted).body

    def converted(self, protocol: str, chat_forwarded: list[dict[str, Any]]) -> Any:
        """A chat replay's forwarded messages converted into ``protocol``, compared as
        ``forwarded_view`` shows a forwarded body."""
        return forwarded_view(protocol, self.converted_body(protocol, chat_forwarded))

    @staticmethod
    def lowered_view(protocol: str, body: dict[str, Any]) -> list[Any]:
        """A protocol body's chat view (its adapter's lowering, tags stripped)."""
        if protocol == "anthropic":  # consecutive turns read as one, as Anthropic reads them
            lowered = ANTHROPIC.lower({**body, "messages": merged_turns(body["messages"])})
        elif protocol == "gemini":  # likewise, consecutive contents of a role as one
            contents = body["contents"]
            if contents and contents[0] == _FILLER:  # before a history that starts with calls
                contents = contents[1:]  # (``call_turn_order``): no turn of the conversation
            lowered = GEMINI.lower({**body, "contents": gemini_view(contents)})
        else:
            lowered = RESPONSES_ADAPTER.lower({**body, "input": joined_items(body["input"])})
        return [strip_tag(m) for m in lowered.messages]


async def replay_conversation(
    rp: Replayer, conv: dict[str, Any], protocols: tuple[str, ...], verbose: bool = False
) -> TraceResult:
    started = time.perf_counter()
    result = TraceResult(conv["id"])
    now = 1_000_000.0
    for k, prefix in enumerate(request_prefixes(conv["messages"])):
        now += STEP_SECONDS
        sid = f"inv-{conv['id']}"
        chat = await rp.step("chat", prefix, sid, now)
        result.steps += 1
        for dim in DIMENSIONS:
            if dim == "integrity" and chat.integrity:
                result.classes["chat", "unexplained:integrity"] += 1
        for protocol in protocols:
            other = await rp.step(protocol, prefix, sid, now)
            converted = rp.converted(protocol, chat.forwarded)
            ref = await rp.step(VIEW[protocol], prefix, sid, now)
            view = (ref, rp.lowered_view(protocol, rp.converted_body(protocol, ref.forwarded)))
            other.lowered_forwarded = rp.lowered_view(protocol, other.body)
            for dim in ALL_DIMENSIONS:
                if same(dim, chat, other, converted):
                    result.agree[protocol, dim] += 1
                    continue
                cls = classify(protocol, dim, prefix, chat, other, view)
                result.classes[protocol, cls] += 1
                key = f"{protocol} {cls} {dim}"
                if key not in result.examples:
                    result.examples[key] = f"step {k} ({len(prefix)} msgs): " + describe(
                        dim, chat, other, converted
                    )
                    if verbose:
                        print(f"  {conv['id']}: {key}: {result.examples[key]}", file=sys.stderr)
    result.seconds = time.perf_counter() - started
    return result


async def run_variant(
    overrides: dict[str, Any],
    conversations: list[dict[str, Any]],
    protocols: tuple[str, ...],
    system: str,
    verbose: bool = False,
    encrypted: bool = True,
) -> list[TraceResult]:
    rp = Replayer(overrides, system, encrypted)
    await rp.open()
    try:
        return [await replay_conversation(rp, c, protocols, verbose) for c in conversations]
    finally:
        await rp.close()
