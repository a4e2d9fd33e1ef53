"""Text the chain repair writes (always tagged with ``PLACEHOLDER_PREFIX`` so ``measure`` counts
it), and the last-resort flattening used only if a repair still fails the validator."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from rules.base import Message, Messages
from rules.chain.validator import answered_otherwise, empty_content
from rules.messages import (
    PLACEHOLDER_PREFIX,
    append_text,
    call_arguments_text,
    id_text,
    role,
    text_of,
)

if TYPE_CHECKING:
    from rules.chain.calls import Slot

SYNTHETIC_RESULT = f"{PLACEHOLDER_PREFIX} the call was interrupted; no result was recorded]"
NULL_RESULT = f"{PLACEHOLDER_PREFIX} the tool returned no content]"
EMPTY_ASSISTANT = f"{PLACEHOLDER_PREFIX} empty assistant turn]"
LATE_RESULT = f"{PLACEHOLDER_PREFIX} this call's result came later; it ends the conversation]"


def runaway_note(dropped: list[Slot]) -> str:
    """One bounded note for the calls left out of a runaway turn: count, names, the first three."""
    names = Counter(s.name or "unknown_tool" for s in dropped)
    top = sorted(names.items(), key=lambda x: (-x[1], x[0]))[:5]
    summary = ", ".join(f"{n} ×{c}" for n, c in top)
    first = "; ".join(f"{s.name}({call_arguments_text(s.call)[:120]})" for s in dropped[:3])
    return (
        f"{PLACEHOLDER_PREFIX} {len(dropped)} tool calls in this turn were interrupted before any "
        f"result was recorded and are left out ({summary}); the first: {first}]"
    )


def orphan_text(t: Message, late: bool = False) -> str:
    """A result whose call is gone (``late``: whose call was answered by later turns), as
    readable text with a prefix that says so."""
    tid = id_text(t.get("tool_call_id"))
    name = f" ({t['name']})" if isinstance(t.get("name"), str) and t["name"] else ""
    why = "came after later turns" if late else "had no matching call"
    return (
        f"{PLACEHOLDER_PREFIX} tool result for call {tid if tid is not None else '?'}"
        f"{name} {why}]\n{text_of(t.get('content'))}"
    )


def flatten(messages: Messages) -> Messages:
    """Last resort if a repair still fails the validator (a bug): calls and results as text."""
    out: Messages = []
    for m in messages:
        r = role(m)
        if r == "tool":
            out.append(
                {
                    "role": "user",
                    "content": f"{PLACEHOLDER_PREFIX} tool result]\n" + text_of(m.get("content")),
                }
            )
        elif r == "assistant" and "tool_calls" in m:
            calls = "; ".join(str(c) for c in m.get("tool_calls") or [])
            flat = {k: v for k, v in m.items() if k != "tool_calls"}
            flat = append_text(flat, f"{PLACEHOLDER_PREFIX} tool calls: {calls}]")
            out.append(flat)
        elif r == "assistant" and empty_content(m.get("content")) and not answered_otherwise(m):
            out.append({**m, "content": EMPTY_ASSISTANT})
        else:
            out.append(m)
    return out
