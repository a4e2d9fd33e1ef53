"""measure: token sizes per section of the conversation, before (as the client sent it) and after
(as it will be forwarded). Runs last; changes nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from rules.base import (
    Context,
    Message,
    Messages,
    RuleConfig,
    RuleResult,
    TokenCounter,
    frozen,
)
from rules.media import marked_media_tokens, media_tokens
from rules.messages import (
    ABSORBED,
    INJECT_CLOSE,
    INJECT_OPEN,
    MEDIA_TOKENS,
    PLACEHOLDER_PREFIX,
    call_arguments_text,
    call_name,
    role,
    shared_prefix,
    text_of,
    tool_calls,
)
from rules.report import Section

SECTIONS = (
    "system",
    "tools",
    "user",
    "assistant",
    "tool_calls",
    "tool_results",
    "injected",
    "placeholders",
)


MEMO = "measure"  # its table in ``Context.table``: message -> message_sections(message)
SENT_MEMO = "measure_sent"  # ``Context.memo`` names: the session's last lists and their sums
FORWARDED_MEMO = "measure_forwarded"


class Config(RuleConfig):
    pass


_CLOSE_LEN = len(INJECT_CLOSE)
_TAIL_PEEK = 64  # characters read first to tell whether a text ends with the closing marker


def _split_injected(text: str) -> tuple[str, str]:
    """(text without the proxy's block, the block) for one content string. Only a block at the
    very end, its markers on lines of their own, counts (inject appends it to a user or tool
    message, or sends it as a message of its own): the same markers inside a tool's output or
    quoted by the user are their text."""
    # Most texts do not end with the marker: tell from their last characters, without copying
    # the whole text to strip it (exact unless the trailing whitespace is longer than the peek).
    end = text[-_TAIL_PEEK:].rstrip()
    if (len(end) >= _CLOSE_LEN or len(text) <= _TAIL_PEEK) and not end.endswith(INJECT_CLOSE):
        return text, ""
    tail = text.rstrip()
    if not tail.endswith(INJECT_CLOSE):
        return text, ""
    start = tail.rfind(INJECT_OPEN, 0, len(tail) - _CLOSE_LEN)
    # inject writes the markers on lines of their own: "… <ctxproxy-context>x</…>" is a log line
    if (
        start < 0
        or (start > 0 and text[start - 1] != "\n")
        or tail[start + len(INJECT_OPEN)] != "\n"
    ):
        return text, ""
    return text[:start], text[start:]


def message_sections(m: Message, tokens: TokenCounter) -> list[tuple[str, int]]:
    """(section, tokens) contributions of one message. Media parts (``rules.media``) count in the
    section of the message's own text, as the counter counts them in the message."""
    out: list[tuple[str, int]] = []
    r = role(m)  # a role that is not a string ("") lands in "user"
    content = m.get("content")
    if content.__class__ is str:
        text, media = content, 0
    else:
        text, media = text_of(content), media_tokens(content)
    if MEDIA_TOKENS in m or ABSORBED in m:  # a result's blocks its adapter holds
        media += marked_media_tokens(m)
    if r == "user" or r == "tool":
        own, injected = _split_injected(text)
        if injected:
            out.append(("injected", tokens.count_text(injected)))
    else:
        own = text
    if own.startswith(PLACEHOLDER_PREFIX):
        out.append(("placeholders", tokens.count_text(own) + media))
    elif r == "system" or r == "developer":
        out.append(("system", tokens.count_text(own) + media))
    elif r == "tool" or r == "function":
        out.append(("tool_results", tokens.count_text(own) + media))
    elif r == "assistant":
        out.append(("assistant", tokens.count_text(own) + media))
        if m.get("tool_calls"):  # missing, null or empty: no calls
            for call in tool_calls(m):
                n = tokens.count_text(call_name(call)) + tokens.count_text(
                    call_arguments_text(call)
                )
                out.append(("tool_calls", n))
    else:
        out.append(("user", tokens.count_text(own) + media))
    return out


def measure_sections(
    messages: Sequence[Message],
    tools: Sequence[Any] | None,
    tokens: TokenCounter,
    per_message: Callable[[Message], Sequence[tuple[str, int]]] | None = None,
) -> dict[str, int]:
    sizes = dict.fromkeys(SECTIONS, 0)
    sizes["tools"] = tokens.count_tools(tools)
    _add(sizes, messages, per_message or (lambda m: message_sections(m, tokens)))
    return sizes


def _add(
    sizes: dict[str, int],
    messages: Sequence[Message],
    per_message: Callable[[Message], Sequence[tuple[str, int]]],
    sign: int = 1,
) -> None:
    for m in messages:
        for section, n in per_message(m):
            sizes[section] += sign * n


def apply(ctx: Context, cfg: Config) -> RuleResult:
    original, forwarded, tokens = ctx.original_messages, ctx.messages, ctx.tokens
    # per message object, for the request (the runner may know them from an earlier request)
    memo = ctx.table(MEMO)
    lookup = memo.get

    def sections_of(m: Message) -> Sequence[tuple[str, int]]:
        # a list computed now, or the tuple the runner kept from an earlier request
        hit = lookup(id(m))
        if hit is None or hit[0] is not m:
            hit = memo[id(m)] = (m, message_sections(m, tokens))
        return hit[1]

    def add(sizes: dict[str, int], messages: Iterable[Message]) -> None:
        # every message of every request: ``_add`` with its ``per_message`` inlined
        for m in messages:
            hit = lookup(id(m))
            if hit is None or hit[0] is not m:
                hit = memo[id(m)] = (m, message_sections(m, tokens))
            for section, n in hit[1]:
                sizes[section] += n

    def totals(name: str, messages: Messages) -> dict[str, int]:
        # the sections of ``messages`` summed; a session's next request resends its last one's
        # messages (the same objects): the last list's sums, less what it does not share, plus
        # what is new (``Context.memo``: the session's, one list and its sums for each side)
        kept = ctx.memo.get(name)
        last, sums = kept[0] if kept else ((), {})
        k = shared_prefix(last, messages)
        if kept and k == len(last) == len(messages):
            return dict(sums)  # the very same messages again (a resent body)
        if k and len(last) - k <= k:  # less to take back than to add up again
            sums = dict(sums)
            _add(sums, last[k:], sections_of, -1)
        else:
            k, sums = 0, dict.fromkeys(SECTIONS, 0)
        add(sums, messages[k:])
        ctx.memo[name] = [(frozen(messages), sums)]
        return dict(sums)

    tools = tokens.count_tools(ctx.tools)
    before = totals(SENT_MEMO, original)
    after = totals(FORWARDED_MEMO, forwarded)
    before["tools"] = after["tools"] = tools
    sections: dict[str, Section] = {
        name: {"before": before[name], "after": after[name]} for name in SECTIONS
    }
    return RuleResult.unchanged(ctx, {"sections": sections})
