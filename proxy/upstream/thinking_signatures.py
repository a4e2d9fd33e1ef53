"""Thinking blocks only the provider that signed them can take back.

A Messages client bridged to another provider (``proxy.upstream.bridge``) is answered with
thinking blocks litellm made of that provider's reasoning: signed with the other provider's
token (a Gemini thought signature), or not at all (``"signature": ""``). The client keeps them
in its history, and when its user switches back to a Claude model (Claude Code's ``/model``)
Anthropic refuses the whole history with a 400, "Invalid `signature` in `thinking` block", on
every retry.

So a signature a bridge relays is marked as the bridge's (``MARK`` before it), the mark taken
off again before a bridge reads the history (the provider that made it gets it back as it was),
and on the way to Anthropic itself (``verifiable``) a thinking block that is unsigned or marked
is left out: Anthropic lets earlier turns' thinking go. A final assistant turn that held tool
calls after such a block is left without one, which Anthropic refuses while thinking is on: that
request goes without ``thinking`` (the model's next step is taken without extended thinking,
rather than refused)."""

from __future__ import annotations

import logging
import re
from typing import Any

import orjson

from proxy.protocols.anthropic_mend import EMPTY_TEXT

log = logging.getLogger("ctxproxy.upstream")

MARK = "ctxproxy-bridged:"
# a marked or unsigned block, however the client spaced its JSON (one pass over the bytes, no
# backtracking: each run of spaces taken whole)
_SUSPECT = re.compile(re.escape(MARK.encode()) + rb'|"(?:signature|data)"[ \t\r\n]*+:[ \t\r\n]*+""')
_THINKING = ("thinking", "redacted_thinking")


# ----- the bridge's answers, and its requests -----


def marked_event(chunk: bytes) -> bytes:
    """SSE events of a bridged Messages stream, each signature in them marked."""
    if b'"signature"' not in chunk:
        return chunk
    events = chunk.split(b"\n\n")
    return b"\n\n".join(_marked_one(e) if b'"signature"' in e else e for e in events)


def _marked_one(event: bytes) -> bytes:
    head, sep, data = event.partition(b"data:")
    try:
        payload = orjson.loads(data)
    except orjson.JSONDecodeError:
        return event
    if not isinstance(payload, dict):
        return event
    holder = payload.get("delta") or payload.get("content_block")
    if not isinstance(holder, dict) or not _mark_in(holder):
        return event
    return head + sep + b" " + orjson.dumps(payload)


def marked_answer(answer: Any) -> Any:
    """A bridged Messages answer (JSON), its thinking blocks' signatures marked."""
    content = answer.get("content") if isinstance(answer, dict) else None
    for block in content if isinstance(content, list) else ():
        if isinstance(block, dict) and block.get("type") == "thinking":
            _mark_in(block)
    return answer


def _mark_in(holder: dict[str, Any]) -> bool:
    signature = holder.get("signature")
    if not isinstance(signature, str) or not signature or signature.startswith(MARK):
        return False
    holder["signature"] = MARK + signature
    return True


def unmarked(messages: Any) -> Any:
    """``messages`` (a Messages history, the client's objects untouched) with the bridge's mark
    taken off each signature, as the provider that made it wrote it."""
    if not isinstance(messages, list) or not any(_marked_blocks(m) for m in messages):
        return messages
    out = []
    for m in messages:
        if _marked_blocks(m):
            content = [
                {**b, "signature": b["signature"][len(MARK) :]} if _is_marked(b) else b
                for b in m["content"]
            ]
            m = {**m, "content": content}
        out.append(m)
    return out


def _marked_blocks(m: Any) -> bool:
    content = m.get("content") if isinstance(m, dict) else None
    return isinstance(content, list) and any(_is_marked(b) for b in content)


def _is_marked(block: Any) -> bool:
    if not isinstance(block, dict) or block.get("type") != "thinking":
        return False
    signature = block.get("signature")
    return isinstance(signature, str) and signature.startswith(MARK)


# ----- on the way to Anthropic -----


def verifiable(body: bytes) -> bytes:
    """``body`` (a Messages request) without the thinking blocks Anthropic cannot verify; the
    same bytes when it holds none (a scan of the bytes, no parse)."""
    if _SUSPECT.search(body) is None:
        return body
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body  # the upstream's to refuse, in its words
    messages = data.get("messages") if isinstance(data, dict) else None
    if not isinstance(messages, list):
        return body
    kept, dropped, bare_tail = _without_unverifiable(messages)
    if not dropped:
        return body
    data["messages"] = kept
    if bare_tail and isinstance(data.get("thinking"), dict):
        data.pop("thinking")
    log.info(
        "dropped %d thinking block(s) Anthropic cannot verify (another provider's or unsigned)%s",
        dropped,
        "; thinking off for this request" if bare_tail and "thinking" not in data else "",
    )
    return orjson.dumps(data)


def _unverifiable(block: Any) -> bool:
    if not isinstance(block, dict) or block.get("type") not in _THINKING:
        return False
    if block.get("type") == "redacted_thinking":
        data = block.get("data")
        return not isinstance(data, str) or not data
    signature = block.get("signature")
    return not isinstance(signature, str) or not signature or signature.startswith(MARK)


def _without_unverifiable(messages: list[Any]) -> tuple[list[Any], int, bool]:
    """The messages without unverifiable thinking, how many blocks went, and whether the last
    assistant turn holding tool calls lost its thinking."""
    out: list[Any] = []
    dropped = 0
    last_calls = max((i for i, m in enumerate(messages) if _assistant_with_calls(m)), default=-1)
    bare_tail = False
    for i, m in enumerate(messages):
        content = m.get("content") if isinstance(m, dict) else None
        if not isinstance(content, list) or m.get("role") != "assistant":
            out.append(m)
            continue
        kept = [b for b in content if not _unverifiable(b)]
        if len(kept) == len(content):
            out.append(m)
            continue
        dropped += len(content) - len(kept)
        if i == last_calls and not any(
            isinstance(b, dict) and b.get("type") in _THINKING for b in kept
        ):
            bare_tail = _tail_turn(messages, i)
        out.append({**m, "content": kept or [{"type": "text", "text": EMPTY_TEXT}]})
    return out, dropped, bare_tail


def _assistant_with_calls(m: Any) -> bool:
    content = m.get("content") if isinstance(m, dict) else None
    return (
        isinstance(content, list)
        and m.get("role") == "assistant"
        and any(isinstance(b, dict) and b.get("type") == "tool_use" for b in content)
    )


def _tail_turn(messages: list[Any], i: int) -> bool:
    """Whether assistant message ``i`` is the turn still running: only user messages after it,
    the first holding tool results (Anthropic wants thinking first in that turn alone)."""
    after = messages[i + 1 :]
    if not after or not all(isinstance(m, dict) and m.get("role") == "user" for m in after):
        return False
    content = after[0].get("content")
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )
