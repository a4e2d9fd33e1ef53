"""Corpus invariants across protocols: the trace corpus replayed through the real engine as Chat
Completions, and converted (``bench.protocol_convert``) as Anthropic Messages and as Responses
API requests, request by request with session state carried (as ``bench.golden`` replays it).
At every step the rules' decisions are compared with the chat replay's:

- ``repairs``: the repairs' kinds and counts (the adapters' own mends left out:
  ``ADAPTER_ONLY_REPAIRS``);
- ``entities``: the session's tracked entities (state namespace ``entities``) after the step;
- ``pruning``: prune's action per tool_call_id (and per action for turns without one);
- ``integrity``: the forwarded body passes its protocol's final check
  (``rules.chain.validator`` for chat, ``proxy.protocols.checks`` for the others), and the report
  has no ``integrity`` entry;
- ``forwarded`` (a stronger look, reported, not an invariant): the protocol's forwarded body equals
  the chat replay's forwarded body converted the same way.

A step whose decisions differ is put in a class (``classify``); the classes documented as expected
(``EXPECTED``) are not counted as failures.

    .venv/bin/python -m bench.protocol_invariants                 # whole corpus, both variants
    .venv/bin/python -m bench.protocol_invariants --limit 10 --variants defaults
    .venv/bin/python -m bench.protocol_invariants --ids mswea-pr816/... --verbose

Exit status 1 when a disagreement outside ``EXPECTED`` is found."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import logging
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network fetch on import

from bench.golden import settings_for
from bench.protocol_convert import to_anthropic, to_responses
from bench.protocol_convert_gemini import gemini_view, to_gemini
from proxy.protocols.anthropic import ANTHROPIC
from proxy.protocols.base import Adapter, strip_tag
from proxy.protocols.chat import CHAT
from proxy.protocols.checks import anthropic_violations, responses_violations
from proxy.protocols.gemini import GEMINI
from proxy.protocols.gemini_checks import pairing_violations
from proxy.protocols.responses import RESPONSES as RESPONSES_ADAPTER
from proxy.protocols.validate import validate_anthropic, validate_gemini, validate_responses
from proxy.rewrite.engine import Engine
from proxy.store.sqlite import Store
from proxy.tokens import TokenCounters
from rules.chain.validator import find_violations
from tests.support.traces import iter_conversations, request_prefixes

STEP_SECONDS = 7.0
MODEL = "gpt-4o"
# Repairs only an adapter makes, of its protocol's own shape (no chat counterpart).
ADAPTER_ONLY_REPAIRS = frozenset(
    {"empty_text_block", "thinking_rejoined", "reasoning_orphaned", "response_name_mismatch"}
)
VARIANTS: dict[str, dict[str, Any]] = {
    "defaults": {},
    # a tight budget: prune caps, supersedes, masks and drops turns on most conversations
    "budget-8k": {"pipeline": {"budget_tokens": 8000, "on_rule_error": "fail"}},
}
DIMENSIONS = ("repairs", "entities", "pruning", "integrity")  # the invariants
# ... and the forwarded body against the chat replay's, converted (a stronger look at the lift)
ALL_DIMENSIONS = (*DIMENSIONS, "forwarded")
# Disagreement classes that follow from the protocols themselves, not from a bug (see docs).
EXPECTED = {
    "merged_user_turns": "Anthropic wants roles to alternate, so the converter makes one user turn "
    "of consecutive user messages and the chat view holds one message where chat has two: a rule "
    "that reads user messages one by one (working_set's goal and latest instruction, inject's "
    "block, prune's count of dropped messages) decides on the merged text",
    "merged_assistant_turns": "Responses lowers a run of assistant items (two assistant messages "
    "in a row in chat) into ONE assistant message, so a repair of the first one's calls lands "
    "after the second one's items",
    "token_drift": "Anthropic carries a call's input as an object: the chat view re-serialises "
    "the arguments compactly, so tool calls count fewer tokens than the client's strings and a "
    "pruning decision near the budget goes the other way",
}


# Disagreements that are known findings (docs/performance.md says which): not expected,
# so they fail the run; named, so the report says what they are.
KNOWN_ISSUES = {
    "prune_skipped_encrypted_reasoning": "prune leaves a Responses conversation alone where the "
    "chat view prunes (before the fix: any input item with encrypted_content stopped it)",
}


@dataclass
class Decisions:
    repairs: Counter[str]
    entities: Any
    pruning: list[tuple[Any, str]]
    integrity: list[str]
    forwarded: Any
    tokens_before: int | None
    body: dict[str, Any]  # as forwarded
    prune_skipped: str | None  # prune's reason for leaving the conversation alone
    lowered_forwarded: Any = None  # its chat view (set for protocol steps)


@dataclass
class TraceResult:
    conv_id: str
    steps: int = 0
    agree: Counter[str] = field(default_factory=Counter)  # (protocol/dimension) -> steps agreeing
    classes: Counter[str] = field(default_factory=Counter)  # (protocol, class) -> steps
    examples: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


def _pruning(report: dict[str, Any]) -> list[tuple[Any, str]]:
    return sorted(
        ((p.get("tool_call_id") or "", p.get("action")) for p in report.get("pruning") or []),
        key=repr,
    )


def _repairs(report: dict[str, Any]) -> Counter[str]:
    kinds = Counter(r.get("kind") for r in report.get("repairs") or [])
    for k in ADAPTER_ONLY_REPAIRS:
        kinds.pop(k, None)
    return kinds


def _integrity(protocol: str, report: dict[str, Any], forwarded: dict[str, Any]) -> list[str]:
    out = [f"report: {v}" for v in report.get("integrity") or []]
    if protocol == "chat":
        out += [f"{v['kind']} at {v['index']}" for v in find_violations(forwarded["messages"])]
    elif protocol == "anthropic":
        out += anthropic_violations(forwarded)
    elif protocol == "gemini":
        out += pairing_violations(forwarded["contents"])
    else:
        out += responses_violations(forwarded)
    return out


_TEXTS = frozenset({"text", "input_text", "output_text"})


def _joined_texts(parts: list[Any]) -> list[Any]:
    """Adjacent text parts of one kind as one (joined as the adapters join them): a text the rules
    appended is one part more in the forwarded body, and one text in the converted one."""
    out: list[Any] = []
    for p in parts:
        if (
            isinstance(p, dict)
            and p.get("type") in _TEXTS
            and set(p) == {"type", "text"}
            and out
            and isinstance(out[-1], dict)
            and out[-1].get("type") == p["type"]
            and set(out[-1]) == {"type", "text"}
        ):
            out[-1] = {"type": p["type"], "text": f"{out[-1]['text']}\n\n{p['text']}"}
        else:
            out.append(p)
    return out


def _merged_turns(messages: list[Any]) -> list[Any]:
    """Anthropic messages with consecutive same-role messages merged into one, string content as a
    text block, adjacent text blocks joined: the conversation as Anthropic reads it (it combines
    consecutive turns itself)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if out and out[-1]["role"] == m.get("role"):
            out[-1]["content"] = out[-1]["content"] + list(blocks)
        else:
            out.append({**m, "content": list(blocks)})
    return [{**m, "content": _joined_texts(m["content"])} for m in out]


def _joined_items(items: list[Any]) -> list[Any]:
    return [
        {**it, "content": _joined_texts(it["content"])}
        if isinstance(it, dict) and isinstance(it.get("content"), list)
        else it
        for it in items
    ]


def _forwarded_view(protocol: str, forwarded: dict[str, Any]) -> Any:
    """The conversation part of a forwarded body, to compare with the chat replay's converted."""
    if protocol == "anthropic":
        return {"system": forwarded.get("system"), "messages": _merged_turns(forwarded["messages"])}
    if protocol == "responses":
        return {
            "instructions": forwarded.get("instructions"),
            "input": _joined_items(forwarded["input"]),
        }
    if protocol == "gemini":
        return {
            "systemInstruction": forwarded.get("systemInstruction"),
            "contents": gemini_view(forwarded["contents"]),
        }
    return forwarded["messages"]


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
            repairs=_repairs(report),
            entities=state.get("entities"),
            pruning=_pruning(report),
            integrity=_integrity(protocol, report, done.body),
            forwarded=_forwarded_view(protocol, done.body),
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
        ``_forwarded_view`` shows a forwarded body."""
        return _forwarded_view(protocol, self.converted_body(protocol, chat_forwarded))

    @staticmethod
    def lowered_view(protocol: str, body: dict[str, Any]) -> list[Any]:
        """A protocol body's chat view (its adapter's lowering, tags stripped)."""
        if protocol == "anthropic":  # consecutive turns read as one, as Anthropic reads them
            lowered = ANTHROPIC.lower({**body, "messages": _merged_turns(body["messages"])})
        elif protocol == "gemini":  # likewise, consecutive contents of a role as one
            lowered = GEMINI.lower({**body, "contents": gemini_view(body["contents"])})
        else:
            lowered = RESPONSES_ADAPTER.lower({**body, "input": _joined_items(body["input"])})
        return [strip_tag(m) for m in lowered.messages]


def has_run(messages: list[dict[str, Any]], role: str) -> bool:
    roles = [m.get("role") for m in messages]
    return any(a == b == role for a, b in itertools.pairwise(roles))


# The chat replay a protocol is held to exactly: the protocol's own chat view (its adapter's
# lowering of the converted body) sent as a chat request. A protocol's step must agree with it on
# every dimension (a difference there is the adapter's); where it agrees with it but not with
# plain chat, the difference comes from the view itself and is classified by what the view changed.
VIEW = {"anthropic": "view:anthropic", "responses": "view:responses", "gemini": "view:gemini"}
MERGED = {"anthropic": ("user", "merged_user_turns"),
          "responses": ("assistant", "merged_assistant_turns"),
          "gemini": ("user", "merged_user_turns")}  # fmt: skip


def same(dimension: str, a: Decisions, b: Decisions, converted: Any) -> bool:
    """Whether ``b`` (a protocol's step) agrees with ``a`` (a chat replay's, ``converted`` its
    forwarded body in the protocol's view) on ``dimension``."""
    if dimension == "integrity":
        return not a.integrity and not b.integrity
    if dimension == "forwarded":
        return bool(converted == b.forwarded)
    return bool(getattr(a, dimension) == getattr(b, dimension))


def classify(
    protocol: str,
    dimension: str,
    prefix: list[dict[str, Any]],
    chat: Decisions,
    other: Decisions,
    view: tuple[Decisions, Any],
) -> str:
    """The class of one disagreement with plain chat (see ``EXPECTED``); ``adapter:<dimension>``
    when the protocol disagrees with its own chat view run as chat too (the adapter's doing:
    lowering, lifting or its report). ``view``: that replay's step and its forwarded body,
    converted and lowered."""
    if dimension == "integrity":
        return "adapter:integrity"
    ref, ref_forwarded = view
    if other.prune_skipped and not ref.prune_skipped and dimension in ("pruning", "forwarded"):
        return "prune_skipped_encrypted_reasoning"
    if dimension == "forwarded":
        agrees = ref_forwarded == other.lowered_forwarded
    else:
        agrees = same(dimension, ref, other, None)
    if not agrees:
        return f"adapter:{dimension}"
    role, merged = MERGED[protocol]
    if has_run(prefix, role):
        return merged
    if chat.tokens_before != ref.tokens_before:
        return "token_drift"
    return f"view:{dimension}"


def _first_difference(a: Any, b: Any) -> str:
    key = next(k for k in ("messages", "input", "contents") if k in a)
    if a.get("system", a.get("instructions")) != b.get("system", b.get("instructions")):
        return "system/instructions differ"
    la, lb = a[key], b[key]
    for i, (x, y) in enumerate(zip(la, lb, strict=False)):
        if x != y:
            a_end, b_end = orjson.dumps(x)[-300:], orjson.dumps(y)[-300:]
            return f"{key}[{i}]: chat's converted {a_end!r} / other {b_end!r}"
    return f"{key}: {len(la)} vs {len(lb)} entries"


def _describe(dimension: str, chat: Decisions, other: Decisions, converted: Any) -> str:
    if dimension == "forwarded":
        return _first_difference(converted, other.forwarded)
    a, b = getattr(chat, dimension), getattr(other, dimension)
    if dimension == "pruning":
        sa, sb = set(a), set(b)
        return f"chat only {sorted(sa - sb)[:4]}, other only {sorted(sb - sa)[:4]}"
    if dimension == "entities":
        a, b = a or [], b or []
        return (
            f"chat {len(a)} events, other {len(b)}; first diff "
            + next((f"{x} != {y}" for x, y in zip(a, b, strict=False) if x != y), "(length)")[:300]
        )
    return f"chat {a!s:.300} / other {b!s:.300}"


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
                    result.examples[key] = f"step {k} ({len(prefix)} msgs): " + _describe(
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


def unexpected(results: list[TraceResult]) -> Counter[tuple[str, str]]:
    out: Counter[tuple[str, str]] = Counter()
    for r in results:
        for (protocol, cls), n in r.classes.items():
            if cls not in EXPECTED:
                out[protocol, cls] += n
    return out


def summarise(name: str, results: list[TraceResult], protocols: tuple[str, ...]) -> list[str]:
    steps = sum(r.steps for r in results)
    lines = [f"## {name}: {len(results)} conversations, {steps} steps"]
    for protocol in protocols:
        agree = {d: sum(r.agree[protocol, d] for r in results) for d in ALL_DIMENSIONS}
        all_agree = sum(
            1 for r in results if all(r.agree[protocol, d] == r.steps for d in DIMENSIONS)
        )
        cells = ", ".join(f"{d} {agree[d] / max(steps, 1):.2%}" for d in ALL_DIMENSIONS)
        lines.append(
            f"{protocol}: steps agreeing: {cells}; traces agreeing on every step "
            f"(repairs, entities, pruning, integrity): {all_agree}/{len(results)}"
        )
        classes: Counter[str] = Counter()
        traces: Counter[str] = Counter()
        for r in results:
            for (p, cls), n in r.classes.items():
                if p == protocol:
                    classes[cls] += n
                    traces[cls] += 1
        for cls, n in classes.most_common():
            tag = (
                "expected"
                if cls in EXPECTED
                else "KNOWN ISSUE"
                if cls in KNOWN_ISSUES
                else "UNEXPECTED"
            )
            lines.append(f"  {cls} ({tag}): {n} step-dimensions in {traces[cls]} traces")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="first N conversations only")
    parser.add_argument("--ids", nargs="*", help="these conversation ids only")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--protocols", nargs="+", default=["anthropic", "responses"])
    parser.add_argument("--system", choices=["instructions", "developer"], default="instructions")
    parser.add_argument(
        "--no-encrypted-reasoning",
        action="store_true",
        help="Responses reasoning items without encrypted_content",
    )
    parser.add_argument("--per-trace", action="store_true", help="a line per trace")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--json", help="write per-trace results here")
    args = parser.parse_args(argv)
    logging.getLogger("ctxproxy").setLevel(logging.CRITICAL)
    conversations = list(iter_conversations())
    if args.ids:
        conversations = [c for c in conversations if c["id"] in set(args.ids)]
    conversations = conversations[: args.limit]
    protocols = tuple(args.protocols)
    bad = 0
    dump: dict[str, Any] = {}
    for name in args.variants:
        started = time.perf_counter()
        results = asyncio.run(
            run_variant(
                VARIANTS[name],
                conversations,
                protocols,
                args.system,
                args.verbose,
                not args.no_encrypted_reasoning,
            )
        )
        for line in summarise(name, results, protocols):
            print(line)
        if args.per_trace:
            for r in results:
                cls = ", ".join(f"{p}:{c}×{n}" for (p, c), n in sorted(r.classes.items()))
                print(f"  {r.conv_id}: {r.steps} steps, {cls or 'all agree'}")
        for r in results:
            for key, text in r.examples.items():
                if not any(c in key for c in (*EXPECTED, *KNOWN_ISSUES)):
                    print(f"  example {r.conv_id}: {key}: {text}")
        print(f"  ({time.perf_counter() - started:.0f} s)")
        bad += sum(unexpected(results).values())
        dump[name] = {
            r.conv_id: {
                "steps": r.steps,
                "agree": {f"{p}/{d}": n for (p, d), n in r.agree.items()},
                "classes": {f"{p}/{c}": n for (p, c), n in r.classes.items()},
                "examples": r.examples,
            }
            for r in results
        }
    if args.json:
        with open(args.json, "wb") as f:
            f.write(orjson.dumps(dump, option=orjson.OPT_INDENT_2))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
