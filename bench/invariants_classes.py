"""The classes of a disagreement between a protocol's replay step and the chat replay's
(``bench.protocol_invariants``): those that follow from the protocols themselves (``EXPECTED``),
known findings (``KNOWN_ISSUES``), and the adapter's own (``adapter:<dimension>``), told apart by
replaying the protocol's own chat view as chat."""

from __future__ import annotations

import itertools
from typing import Any

import orjson

from bench.invariants_steps import Decisions

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


def first_difference(a: Any, b: Any) -> str:
    key = next(k for k in ("messages", "input", "contents") if k in a)
    if a.get("system", a.get("instructions")) != b.get("system", b.get("instructions")):
        return "system/instructions differ"
    la, lb = a[key], b[key]
    for i, (x, y) in enumerate(zip(la, lb, strict=False)):
        if x != y:
            a_end, b_end = orjson.dumps(x)[-300:], orjson.dumps(y)[-300:]
            return f"{key}[{i}]: chat's converted {a_end!r} / other {b_end!r}"
    return f"{key}: {len(la)} vs {len(lb)} entries"


def describe(dimension: str, chat: Decisions, other: Decisions, converted: Any) -> str:
    if dimension == "forwarded":
        return first_difference(converted, other.forwarded)
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
