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
    """(text without proxy blocks, the proxy blocks) for one content string."""
    start = text.find(INJECT_OPEN)
    if start < 0:
        return text, ""
    end = text.find(INJECT_CLOSE, start)
    end = len(text) if end < 0 else end + len(INJECT_CLOSE)
    rest, more = _split_injected(text[end:])
    return text[:start] + rest, text[start:end] + more


def message_sections(m: Message, tokens: TokenCounter) -> list[tuple[str, int]]:
    """(section, tokens) contributions of one message."""
    out: list[tuple[str, int]] = []
    r = role(m)
    own, injected = _split_injected(text_of(m.get("content")))
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
