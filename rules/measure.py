"""measure: token sizes per section of the conversation, before (as the client sent it) and after
(as it will be forwarded). Runs last; changes nothing."""

from __future__ import annotations

from collections.abc import Sequence
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


def measure_sections(
    messages: Sequence[Message], tools: Sequence[Any] | None, tokens: TokenCounter
) -> dict[str, int]:
    sizes = dict.fromkeys(SECTIONS, 0)
    sizes["tools"] = tokens.count_tools(tools)
    for m in messages:
        r = role(m)
        own, injected = _split_injected(text_of(m.get("content")))
        if injected:
            sizes["injected"] += tokens.count_text(injected)
        if own.startswith(PLACEHOLDER_PREFIX):
            sizes["placeholders"] += tokens.count_text(own)
        elif r in ("system", "developer"):
            sizes["system"] += tokens.count_text(own)
        elif r == "tool" or r == "function":
            sizes["tool_results"] += tokens.count_text(own)
        elif r == "assistant":
            sizes["assistant"] += tokens.count_text(own)
            for call in tool_calls(m):
                sizes["tool_calls"] += tokens.count_text(call_name(call)) + tokens.count_text(
                    call_arguments_text(call)
                )
        else:
            sizes["user"] += tokens.count_text(own)
    return sizes


def apply(ctx: Context, cfg: Config) -> RuleResult:
    before = measure_sections(ctx.original_messages, ctx.tools, ctx.tokens)
    after = measure_sections(ctx.messages, ctx.tools, ctx.tokens)
    sections = {name: {"before": before[name], "after": after[name]} for name in SECTIONS}
    return RuleResult.unchanged(ctx, {"sections": sections})
