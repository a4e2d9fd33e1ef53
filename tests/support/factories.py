"""Factories for table-driven tests: messages (user(), system(), assistant(), call(), result() …),
request bodies, and what a rule is handed: ctx() builds a rules ``Context`` around messages,
counting with FakeTokens (a deterministic ``TokenCounter``), so rule tests need nothing from
``proxy``; apply_rules() chains rules as the runner would, prefix_reuse() measures stickiness."""

from __future__ import annotations

import functools
import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson

from rules.base import Context, Message, RuleConfig, RuleResult, SessionState, TokenCounter
from rules.messages import call_arguments_text, call_name, text_of, tool_calls


def system(text: str = "You are a coding agent.") -> dict[str, Any]:
    return {"role": "system", "content": text}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str | None = None, *calls: dict[str, Any]) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        msg["tool_calls"] = list(calls)
    return msg


def call(call_id: str, name: str = "bash", **arguments: Any) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": orjson.dumps(arguments).decode()},
    }


def shell(call_id: str, command: str, name: str = "bash") -> dict[str, Any]:
    return call(call_id, name, command=command)


def result(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def request(*messages: dict[str, Any], model: str = "gpt-4o", **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": list(messages), **extra}


def chat_completion(content: str = "ok") -> dict[str, Any]:
    """An upstream's non-streaming answer, with usage."""
    return {
        "id": "c1",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }


# ----- what a rule is handed -----

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD = 4  # role and separators, as real chat formats add (and proxy.tokens counts)
CALL_OVERHEAD = 3
REPLY_PRIMING = 3


class FakeTokens:
    """A deterministic ``rules.base.TokenCounter``: one token per 4 characters (rounded up) of a
    text, a message counted as its parts plus a fixed overhead, like the real counter (content,
    then each call's name and arguments), so section sizes add up to message sizes. No tiktoken:
    counts are easy to compute by hand and the same on every machine. ``calls`` counts the
    ``count_text`` calls, for tests of memoisation."""

    def __init__(self, chars_per_token: int = CHARS_PER_TOKEN) -> None:
        self.chars_per_token = chars_per_token
        self.calls = 0

    def count_text(self, text: str) -> int:
        self.calls += 1
        return -(-len(text) // self.chars_per_token)

    def count_message(self, message: Message) -> int:
        n = MESSAGE_OVERHEAD + self.count_text(text_of(message.get("content")))
        for c in tool_calls(message):
            n += (
                CALL_OVERHEAD
                + self.count_text(call_name(c))
                + self.count_text(call_arguments_text(c))
            )
        return n

    def count_messages(self, messages: Sequence[Message]) -> int:
        return sum(self.count_message(m) for m in messages) + REPLY_PRIMING

    def count_tools(self, tools: Sequence[Any] | None) -> int:
        return self.count_text(orjson.dumps(list(tools)).decode()) if tools else 0


class TiktokenTokens(FakeTokens):
    """FakeTokens' way of counting messages with a real tokenizer's text counts (tiktoken's
    ``o200k_base``, read offline from the copy litellm ships): the very numbers the proxy's
    counter gives for gpt-4o, without importing ``proxy``. For tests whose thresholds were set
    on realistic token counts (the trace corpus: prose, code and logs weigh differently)."""

    def __init__(self, encoding: str = "o200k_base") -> None:
        super().__init__()
        if not os.environ.get("TIKTOKEN_CACHE_DIR"):
            spec = importlib.util.find_spec("litellm")
            if spec and spec.submodule_search_locations:
                root = Path(next(iter(spec.submodule_search_locations)))
                os.environ["TIKTOKEN_CACHE_DIR"] = str(root / "litellm_core_utils" / "tokenizers")
        import tiktoken

        encode = tiktoken.get_encoding(encoding).encode_ordinary
        self._count = functools.lru_cache(maxsize=1 << 16)(lambda text: len(encode(text)))

    def count_text(self, text: str) -> int:
        self.calls += 1
        return self._count(text) if text else 0


@functools.lru_cache(maxsize=1)
def tiktoken_tokens() -> TiktokenTokens:
    """One shared TiktokenTokens (loading the encoding takes a moment)."""
    return TiktokenTokens()


TOKENS: TokenCounter = FakeTokens()


def ctx(
    *messages: Message | list[Message],
    model: str = "gpt-4o",
    now: float = 0.0,
    state: SessionState | None = None,
    budget: int | None = None,
    tools: list[Any] | None = None,
    tokens: TokenCounter | None = None,
    session_id: str = "s",
    original: list[Message] | None = None,
    **fields: Any,
) -> Context:
    """A rules ``Context`` around ``messages`` (given one by one, or as one list, kept as that very
    object so "same list = unchanged" can be asserted). ``original_messages`` is that list unless
    ``original`` is given; other ``Context`` fields (request, ancestors, hints, report …) pass
    through ``fields``."""
    one_list = len(messages) == 1 and isinstance(messages[0], list)
    msgs: list[Message] = messages[0] if one_list else list(messages)  # type: ignore[arg-type,assignment]
    return Context(
        messages=msgs,
        original_messages=msgs if original is None else original,
        model=model,
        tokens=TOKENS if tokens is None else tokens,
        now=now,
        session_id=session_id,
        state=SessionState() if state is None else state,
        budget=budget,
        tools=tools,
        **fields,
    )


def apply_rules(context: Context, *rules: tuple[ModuleType, RuleConfig]) -> RuleResult:
    """``(module, config)`` rules applied in order, each seeing the messages, state and report
    the ones before left (list values of report fragments appended, others set), as the proxy's
    runner chains them, but nothing else of it (no timing, error containment, final integrity
    check or prefix tracking): a rule test runs the rules alone."""
    report: Any = {}  # a rules.report.Report, built up as the runner does
    context = context.evolve(report=report)
    for module, config in rules:
        out = module.apply(context, config)
        for key, value in out.report.items():
            if isinstance(value, list) and isinstance(report.get(key), list):
                report[key].extend(value)
            else:
                report[key] = list(value) if isinstance(value, list) else value
        if out.messages is not context.messages or out.state is not context.state:
            context = context.evolve(messages=out.messages, state=out.state)
    return RuleResult(context.messages, context.state, report)


def prefix_reuse(
    previous: Sequence[Message], messages: Sequence[Message], tokens: TokenCounter = TOKENS
) -> float | None:
    """The share of ``messages``' tokens in its leading run of messages equal to ``previous``'s
    (what a provider's prompt cache could reuse), None when there is nothing to compare."""
    shared = 0
    for mine, theirs in zip(messages, previous, strict=False):
        if mine != theirs:
            break
        shared += 1
    total = sum(tokens.count_message(m) for m in messages)
    if not previous or not total:
        return None
    return sum(tokens.count_message(m) for m in messages[:shared]) / total


def anthropic_message(
    text: str = "ok",
    model: str = "claude-sonnet-4-5",
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A scripted Anthropic Messages answer (what litellm's anthropic/… calls get back)."""
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": usage or {"input_tokens": 12, "output_tokens": 4},
    }
