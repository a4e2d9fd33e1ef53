"""measure: token sizes per section of the conversation, before (as the client sent it) and after
(as it will be forwarded). Runs last; changes nothing."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rules.base import Context, Message, RuleConfig, RuleResult, TokenCounter
from rules.messages import (
    INJECT_CLOSE,
    INJECT_OPEN,
    PLACEHOLDER_PREFIX,
    call_arguments_text,
    call_name,
    role,
    text_of,
    tool_calls,
)

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


class Config(RuleConfig):
    pass


def _split_injected(text: str) -> tuple[str, str]:
    """(text without the proxy's block, the block) for one content string. Only a block at the
    very end, its markers on lines of their own, counts (inject appends it to a user or tool
    message, or sends it as a message of its own): the same markers inside a tool's output or
    quoted by the user are their text."""
    tail = text.rstrip()
    if not tail.endswith(INJECT_CLOSE):
        return text, ""
    start = tail.rfind(INJECT_OPEN, 0, len(tail) - len(INJECT_CLOSE))
    # inject writes the markers on lines of their own: "… <ctxproxy-context>x</…>" is a log line
    if (
        start < 0
        or (start > 0 and text[start - 1] != "\n")
        or tail[start + len(INJECT_OPEN)] != "\n"
    ):
        return text, ""
    return text[:start], text[start:]


def message_sections(m: Message, tokens: TokenCounter) -> list[tuple[str, int]]:
    """(section, tokens) contributions of one message."""
    out: list[tuple[str, int]] = []
    r = role(m)
    text = text_of(m.get("content"))
    own, injected = _split_injected(text) if r in ("user", "tool") else (text, "")
    if injected:
        out.append(("injected", tokens.count_text(injected)))
    if own.startswith(PLACEHOLDER_PREFIX):
        out.append(("placeholders", tokens.count_text(own)))
    elif r in ("system", "developer"):
        out.append(("system", tokens.count_text(own)))
    elif r == "tool" or r == "function":
        out.append(("tool_results", tokens.count_text(own)))
    elif r == "assistant":
        out.append(("assistant", tokens.count_text(own)))
        for call in tool_calls(m):
            n = tokens.count_text(call_name(call)) + tokens.count_text(call_arguments_text(call))
            out.append(("tool_calls", n))
    else:
        out.append(("user", tokens.count_text(own)))
    return out


def measure_sections(
    messages: Sequence[Message],
    tools: Sequence[Any] | None,
    tokens: TokenCounter,
    per_message: Callable[[Message], list[tuple[str, int]]] | None = None,
) -> dict[str, int]:
    sizes = dict.fromkeys(SECTIONS, 0)
    sizes["tools"] = tokens.count_tools(tools)
    for m in messages:
        parts = per_message(m) if per_message else message_sections(m, tokens)
        for section, n in parts:
            sizes[section] += n
    return sizes


def apply(ctx: Context, cfg: Config) -> RuleResult:
    memo: dict[int, tuple[Message, list[tuple[str, int]]]] = {}

    def per_message(m: Message) -> list[tuple[str, int]]:
        # most forwarded messages are the client's own objects: measure each once
        hit = memo.get(id(m))
        if hit is None or hit[0] is not m:
            hit = memo[id(m)] = (m, message_sections(m, ctx.tokens))
        return hit[1]

    before = measure_sections(ctx.original_messages, ctx.tools, ctx.tokens, per_message)
    after = measure_sections(ctx.messages, ctx.tools, ctx.tokens, per_message)
    sections = {name: {"before": before[name], "after": after[name]} for name in SECTIONS}
    return RuleResult.unchanged(ctx, {"sections": sections})
