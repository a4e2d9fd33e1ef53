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
from typing import Any

import orjson

from proxy.protocols.anthropic_mend import EMPTY_TEXT
from proxy.upstream.json_scan import values_of

log = logging.getLogger("ctxproxy.upstream")

MARK = "ctxproxy-bridged:"
_MARKED = b'"' + MARK.encode()  # a signature's value that begins with the mark


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
    same bytes when it holds none (one scan of the bytes, no parse)."""
    if not _suspect(body):
        return body
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body  # the upstream's to refuse, in its words
    mended = without_unverifiable(data) if isinstance(data, dict) else None
    return body if mended is None else orjson.dumps(mended)


def _suspect(body: bytes) -> bool:
    """Whether ``body`` may hold a block Anthropic cannot verify: a signature empty, null or
    marked, a redacted block's data empty or null (one pass over its signatures: about 40 µs a
    request on a 50 KB body of Claude Code's with thinking). A block without any signature key
    is read as unverifiable only where the body is parsed for another one: litellm writes an
    unsigned block with ``""`` or ``null``."""
    if b"thinking" not in body:
        return False  # no thinking block at all
    for value in values_of(body, b"signature", len(_MARKED)):
        if value[:2] == b'""' or value[:1] == b"n" or value == _MARKED:
            return True
    if b"redacted_thinking" not in body:
        return False
    return any(v == b'""' or v[:1] == b"n" for v in values_of(body, b"data"))


def without_unverifiable(data: dict[str, Any]) -> dict[str, Any] | None:
    """A Messages request (parsed; never changed) without the thinking blocks Anthropic cannot
    verify, or None when it holds none. Where the turn in progress (its tool results being sent)
    is left without thinking at its start, Anthropic refuses it while thinking is on: that request
    goes with thinking disabled, every thinking block and thinking edit left out with it."""
    messages = data.get("messages")
    if not isinstance(messages, list):
        return None
    kept, dropped = _kept(messages)
    if not dropped:
        return None
    out = {**data, "messages": kept}
    thinking = data.get("thinking")
    bare = isinstance(thinking, dict) and thinking.get("type") != "disabled" and _bare_turn(kept)
    if bare:
        out["thinking"] = {"type": "disabled"}
        out["messages"] = _kept(kept, every=True)[0]
        _without_thinking_edits(out)
    log.info(
        "dropped %d thinking block(s) Anthropic cannot verify (another provider's or unsigned)%s",
        dropped,
        "; thinking off for the turn in progress" if bare else "",
    )
    return out


def _unverifiable(block: Any) -> bool:
    if not isinstance(block, dict) or block.get("type") not in _THINKING:
        return False
    if block.get("type") == "redacted_thinking":
        data = block.get("data")
        return not isinstance(data, str) or not data
    signature = block.get("signature")
    return not isinstance(signature, str) or not signature or signature.startswith(MARK)


def _thinking(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") in _THINKING


def _kept(messages: list[Any], every: bool = False) -> tuple[list[Any], int]:
    """The messages without unverifiable thinking (``every``: without any), and how many blocks
    went. A message left empty says so, but the last (a prefill may be empty)."""
    out: list[Any] = []
    dropped = 0
    last = len(messages) - 1
    for i, m in enumerate(messages):
        content = m.get("content") if isinstance(m, dict) else None
        if not isinstance(content, list) or m.get("role") != "assistant":
            out.append(m)
            continue
        drop = _thinking if every else _unverifiable
        kept = [b for b in content if not drop(b)]
        if len(kept) == len(content):
            out.append(m)
            continue
        dropped += len(content) - len(kept)
        filler = [] if i == last else [{"type": "text", "text": EMPTY_TEXT}]
        out.append({**m, "content": kept or filler})
    return out, dropped


def _bare_turn(messages: list[Any]) -> bool:
    """Whether the turn in progress (its last message a user's holding tool results) starts
    without thinking: Anthropic wants it before the first assistant message since the user's
    last own words, however many tool rounds followed."""
    if not messages or not _results_only(messages[-1]):
        return False
    start = next((i for i in range(len(messages) - 1, -1, -1) if _said_by_user(messages[i])), -1)
    first = messages[start + 1] if start + 1 < len(messages) else None
    content = first.get("content") if isinstance(first, dict) else None
    if not isinstance(first, dict) or first.get("role") != "assistant":
        return False
    return not (isinstance(content, list) and content and _thinking(content[0]))


def _results_only(m: Any) -> bool:
    content = m.get("content") if isinstance(m, dict) else None
    return (
        (
            m.get("role") == "user"
            and isinstance(content, list)
            and bool(content)
            and all(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
        )
        if isinstance(m, dict)
        else False
    )


def _said_by_user(m: Any) -> bool:
    """A user's message of their own (not only tool results)."""
    return isinstance(m, dict) and m.get("role") == "user" and not _results_only(m)


def _without_thinking_edits(data: dict[str, Any]) -> None:
    """``context_management`` without the edits that clear thinking (they need it on)."""
    management = data.get("context_management")
    if not isinstance(management, dict) or not isinstance(management.get("edits"), list):
        return
    edits = management["edits"]
    kept = [e for e in edits if not (isinstance(e, dict) and str(e.get("type", "")).startswith(
        "clear_thinking"))]  # fmt: skip
    if len(kept) == len(edits):
        return
    rest = {k: v for k, v in management.items() if k != "edits"}
    if kept:
        data["context_management"] = {**rest, "edits": kept}
    elif rest:
        data["context_management"] = rest
    else:
        data.pop("context_management")
