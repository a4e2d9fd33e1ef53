"""One step of the cross-protocol replay (``bench.protocol_invariants``): what the rules decided
(repairs, entities, pruning, integrity) and the forwarded body's conversation in a view that
compares across protocols (turns merged and texts joined as each protocol reads them)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bench.protocol_convert_gemini import gemini_view
from proxy.protocols.checks import anthropic_violations, responses_violations
from proxy.protocols.gemini_checks import pairing_violations
from rules.chain.validator import find_violations

MODEL = "gpt-4o"
# Repairs only an adapter makes, of its protocol's own shape (no chat counterpart).
ADAPTER_ONLY_REPAIRS = frozenset(
    {
        "empty_text_block",
        "thinking_rejoined",
        "reasoning_orphaned",
        "response_name_mismatch",
        "call_turn_order",
    }
)
DIMENSIONS = ("repairs", "entities", "pruning", "integrity")  # the invariants
# ... and the forwarded body against the chat replay's, converted (a stronger look at the lift)
ALL_DIMENSIONS = (*DIMENSIONS, "forwarded")


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
    # (protocol, dimension) -> steps agreeing; (protocol, class) -> steps
    agree: Counter[tuple[str, str]] = field(default_factory=Counter)
    classes: Counter[tuple[str, str]] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


def pruning_of(report: dict[str, Any]) -> list[tuple[Any, str]]:
    return sorted(
        ((p.get("tool_call_id") or "", p.get("action")) for p in report.get("pruning") or []),
        key=repr,
    )


def repairs_of(report: dict[str, Any]) -> Counter[str]:
    kinds = Counter(r.get("kind") for r in report.get("repairs") or [])
    for k in ADAPTER_ONLY_REPAIRS:
        kinds.pop(k, None)
    return kinds


def integrity_of(protocol: str, report: dict[str, Any], forwarded: dict[str, Any]) -> list[str]:
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


def joined_texts(parts: list[Any]) -> list[Any]:
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


def merged_turns(messages: list[Any]) -> list[Any]:
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
    return [{**m, "content": joined_texts(m["content"])} for m in out]


def joined_items(items: list[Any]) -> list[Any]:
    return [
        {**it, "content": joined_texts(it["content"])}
        if isinstance(it, dict) and isinstance(it.get("content"), list)
        else it
        for it in items
    ]


def forwarded_view(protocol: str, forwarded: dict[str, Any]) -> Any:
    """The conversation part of a forwarded body, to compare with the chat replay's converted."""
    if protocol == "anthropic":
        return {"system": forwarded.get("system"), "messages": merged_turns(forwarded["messages"])}
    if protocol == "responses":
        return {
            "instructions": forwarded.get("instructions"),
            "input": joined_items(forwarded["input"]),
        }
    if protocol == "gemini":
        return {
            "systemInstruction": forwarded.get("systemInstruction"),
            "contents": gemini_view(forwarded["contents"]),
        }
    return forwarded["messages"]
