"""How ``bench.cost``'s methods rewrite a request other than through ctxproxy's pipeline (the
baselines' masking), what the checks compare (inject's blocks set aside, the chain's violations),
and the other protocols' side: a request as their client sends it, what the provider's cache reads
of a body, the chat view the checks read."""

from __future__ import annotations

import re
from typing import Any

from bench.protocol_convert import to_anthropic, to_responses, with_breakpoints
from bench.protocol_convert_gemini import to_gemini
from proxy.protocols.anthropic import ANTHROPIC
from proxy.protocols.base import Adapter, strip_tag
from proxy.protocols.checks import anthropic_violations, responses_violations
from proxy.protocols.gemini import GEMINI
from proxy.protocols.gemini_checks import pairing_violations
from proxy.protocols.responses import RESPONSES
from rules.base import Message
from rules.chain import validator as chain_validator
from rules.messages import INJECT_CLOSE, INJECT_OPEN, role, with_content


def mask_older(messages: list[Message], keep: int, placeholder: str) -> list[Message]:
    """Every tool result but the last ``keep`` replaced by ``placeholder``."""
    tools = [i for i, m in enumerate(messages) if role(m) == "tool"]
    old = set(tools[: max(0, len(tools) - keep)])
    return [with_content(m, placeholder) if i in old else m for i, m in enumerate(messages)]


_BLOCK = re.compile(r"(?:\n\n)?" + re.escape(INJECT_OPEN) + ".*?" + re.escape(INJECT_CLOSE), re.S)


def _is_block(part: Any) -> bool:
    text = part.get("text") if isinstance(part, dict) else None
    return isinstance(text, str) and text.startswith(INJECT_OPEN)


def without_injected(messages: list[Message], client: set[int]) -> list[Message]:
    """``messages`` with inject's blocks set aside (appended text, a content part or a message of
    their own, wherever they are: blocks are sticky history), so the evidence checks compare the
    client's own messages. ``client``: ids of the messages the client sent (left as they are)."""
    out: list[Message] = []
    changed = False
    for m in messages:
        content = m.get("content")
        if id(m) in client:
            out.append(m)
        elif isinstance(content, str) and INJECT_OPEN in content:
            changed = True
            text = _BLOCK.sub("", content)
            if text or role(m) != "user":  # else a block of its own: gone
                out.append(with_content(m, text))
        elif isinstance(content, list) and any(_is_block(p) for p in content):
            changed = True
            parts = [p for p in content if not _is_block(p)]
            if parts or role(m) != "user":
                out.append(with_content(m, parts))
        else:
            out.append(m)
    return out if changed else messages


def _signatures(
    messages: list[Message], memo: dict[int, tuple[Any, Any]] | None = None
) -> set[tuple[str, str]]:
    """Violations by kind and call id (indices move when a rule drops or repairs messages).
    ``memo``: the validator's per-message checks, kept across the requests of a replay."""
    return {
        (str(v.get("kind")), str(v.get("tool_call_id")))
        for v in chain_validator.find_violations(messages, memo)
    }


_ADAPTERS: dict[str, Adapter] = {"anthropic": ANTHROPIC, "responses": RESPONSES, "gemini": GEMINI}
_WIRE_CHECKS = {
    "anthropic": anthropic_violations,
    "responses": responses_violations,
    "gemini": lambda body: pairing_violations(body.get("contents")),
}


def convert(
    protocol: str, model: str, prefix: list[Message], breakpoints: bool = False
) -> dict[str, Any]:
    """The request ``prefix`` as a client of ``protocol`` would send it
    (``bench.protocol_convert``; Responses: the first system message as ``instructions``,
    reasoning items with ``encrypted_content``, as Codex sends them). ``breakpoints``:
    Anthropic's ``cache_control`` markers where Claude Code puts them (``with_breakpoints``)."""
    chat = {"model": model, "messages": prefix}
    if protocol == "anthropic":
        body = to_anthropic(chat).body
        return with_breakpoints(body) if breakpoints else body
    if protocol == "responses":
        return to_responses(chat).body
    if protocol == "gemini":
        return to_gemini(chat).body
    return chat


def wire_parts(protocol: str, body: dict[str, Any]) -> list[Any]:
    """What the provider's prefix cache reads of a ``protocol`` body, in its order, one segment
    each: the tools (when any), then Anthropic's ``system`` and each message, the Responses
    ``instructions`` and each input item, or Gemini's ``systemInstruction`` and each content
    (the prompt in the order the model reads it, whatever the order of the body's keys)."""
    head: list[Any] = [body["tools"]] if body.get("tools") else []
    if protocol == "gemini":
        if body.get("systemInstruction"):
            head.append(body["systemInstruction"])
        return head + list(body["contents"])
    if protocol == "anthropic":
        if body.get("system"):
            head.append(body["system"])
        return head + list(body["messages"])
    if body.get("instructions"):
        head.append(body["instructions"])
    inp = body.get("input")
    return head + (list(inp) if isinstance(inp, list) else [inp])


def _one_text_block(m: Message) -> Message:
    """A lowered Anthropic message whose content, inject's block set aside, is one text part: as
    the adapter lowers a single text block (a string), so the client's text compares equal."""
    content = m.get("content")
    if (
        isinstance(content, list)
        and len(content) == 1
        and isinstance(content[0], dict)
        and content[0].get("type") == "text"
        and isinstance(content[0].get("text"), str)
    ):
        return with_content(m, content[0]["text"])
    return m


def chat_view(adapter: Adapter, body: dict[str, Any]) -> list[Message]:
    """A protocol body as the rules read it (its adapter's lowering, provenance tags stripped)."""
    return [strip_tag(m) for m in adapter.lower(body).messages]
