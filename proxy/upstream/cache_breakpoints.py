"""Prompt-cache breakpoints for Claude reached through litellm (``anthropic``, and Claude models on
``bedrock`` and ``vertex_ai``). Anthropic caches a prompt's prefix only up to a block marked
``cache_control``; a client speaking OpenAI's format rarely marks any, so without these it gets no
cache at all. OpenAI, Gemini and DeepSeek cache implicitly and are left alone (litellm would turn
Gemini's markers into paid context-cache objects).

Where, at most four in all (Anthropic's limit), in this order of priority:

- **tail**: the last message, as forwarded, so the next request (which repeats it) reads what
  this one writes. A tool result is as good a tail as a user message: in an agent loop it is what
  the next request repeats. ctxproxy's own ``<ctxproxy-context>`` block belongs to the tail too,
  whether appended to the last message or a trailing message of its own: inject's blocks are
  sticky (by default), replayed byte for byte in the same place on later requests, so the next
  prefix carries it. (With ``sticky: false`` the block changes every time and the tail's mark
  reads nothing next time; the previous tail's mark, of the request before, still does.)
- **previous tail**: the message just before the last run of assistant messages, which was the
  tail of the previous request: this request reads what that one wrote, however many blocks the
  answer and the new results add (Anthropic looks back only 20 blocks from a mark).
- **system**: the last of the leading system (or developer) messages, covering tools and system.
- **tools**: the last tool definition.

A client's own breakpoints are all kept, byte for byte. It may well want ours too (a client that
marks only its system prompt still gains from a cached conversation), so ours fill the free
slots, up to four in all, never in a section the client marked itself (the tools, the system
messages, or that message), and never before a client mark with a longer TTL than ours (Anthropic
rejects a long TTL after a short one). ``cache_breakpoints: off`` on the upstream turns this off.

A mark whose prefix is below the model's minimum cacheable prompt (1,024 tokens; 2,048 for Haiku;
estimated as characters / 4, an image as its estimated tokens) would cache nothing and is not
placed; nor is one on empty content.

In litellm's OpenAI-format input, the marks it carries to Anthropic are: a content part's
``cache_control`` (text, image, file, document), a message's own for string content and for tool
results, and a tool's (top level or in ``function``). A message's own on list content is dropped,
and so is a developer message's, so text messages are marked on their last part (a string
becomes one text part, as litellm renders it anyway). The client's body is never changed: changed
messages and tools are new dicts. Same body in, same body out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from proxy.settings import UpstreamSettings
from rules.media import media_tokens
from rules.messages import role, text_of, tool_calls

MAX_BREAKPOINTS = 4  # Anthropic's limit per request, the client's included
_SYSTEM_ROLES = frozenset({"system", "developer"})
_RESULT_ROLES = frozenset({"tool", "function"})
_USER_PARTS = frozenset({"text", "image_url", "file", "document"})  # parts litellm marks
_SHORT_TTL = "5m"  # what a mark without ``ttl`` gets: ours


def wants_breakpoints(upstream: UpstreamSettings, provider: str, model: str) -> bool:
    """Whether requests for ``model`` through ``upstream`` get breakpoints: Claude models only,
    whose caching is explicit, and only on providers where litellm carries the marks."""
    if upstream.cache_breakpoints == "off":
        return False
    return provider == "anthropic" or (
        provider in ("bedrock", "vertex_ai") and "claude" in model.lower()
    )


def min_cacheable_tokens(model: str) -> int:
    return 2048 if "haiku" in model.lower() else 1024


def with_breakpoints(
    upstream: UpstreamSettings, provider: str, body: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``body`` with our breakpoints (a new dict when any is placed), and what was done for the
    log row: ``placed`` (names, in prompt order), ``client`` (how many marks the client sent),
    ``skipped: short`` when the prompt is below the minimum. None when this upstream and model
    get none."""
    model = body.get("model")
    messages = body.get("messages")
    if not isinstance(model, str) or not wants_breakpoints(upstream, provider, model):
        return body, None
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        return body, None
    raw_tools = body.get("tools")
    tools = raw_tools if isinstance(raw_tools, list) and raw_tools else None
    plan = _Plan(messages, tools, min_cacheable_tokens(model))
    chosen = plan.choose()
    report: dict[str, Any] = {"placed": [s.name for s in chosen], "client": len(plan.client)}
    if not chosen:
        if plan.short:
            report["skipped"] = "short"
        return body, report
    out = dict(body)
    out["messages"], new_tools = plan.apply(chosen)
    if new_tools is not None:
        out["tools"] = new_tools
    return out, report


@dataclass(frozen=True)
class _Spot:
    name: str  # tools, system, previous_tail, tail
    order: tuple[int, int]  # where in the rendered prompt: (0 tools | 1 system | 2 messages, i)
    prefix_tokens: int  # an estimate of everything up to and including it


class _Plan:
    """The candidate spots of one request, the client's own marks, and the choice."""

    def __init__(
        self, messages: list[dict[str, Any]], tools: list[Any] | None, minimum: int
    ) -> None:
        self.messages = messages
        self.tools = tools
        self.minimum = minimum
        self.client = _client_marks(messages, tools)
        self.short = False

    def choose(self) -> list[_Spot]:
        """Our spots, in prompt order: the free slots filled by priority."""
        slots = MAX_BREAKPOINTS - len(self.client)
        if slots <= 0:
            return []
        candidates = self._candidates()
        if candidates and max(s.prefix_tokens for s in candidates) < self.minimum:
            self.short = True
            return []
        # a long-TTL client mark must not follow a short one: ours go after the last of them
        floor = max((o for o, ttl in self.client if ttl not in (None, _SHORT_TTL)), default=None)
        # the client marked that section (tools, system) or that message: it chose for it
        sections = {o[0] for o, _ in self.client if o[0] < 2}
        marked = {o for o, _ in self.client}
        chosen = [
            s
            for s in candidates
            if s.prefix_tokens >= self.minimum
            and (floor is None or s.order > floor)
            and s.order[0] not in sections
            and s.order not in marked
        ][:slots]
        return sorted(chosen, key=lambda s: s.order)

    def _candidates(self) -> list[_Spot]:
        """Every spot that can carry a mark, in order of priority."""
        messages = self.messages
        tools_tokens = len(orjson.dumps(self.tools)) // 4 if self.tools else 0
        # litellm moves every system message into Anthropic's system, ahead of the messages
        system_chars = sum(_chars(m) for m in messages if role(m) in _SYSTEM_ROLES)
        head_tokens = tools_tokens + system_chars // 4
        spots: list[_Spot] = []
        tail = len(messages) - 1
        if tail >= 0 and role(messages[tail]) not in _SYSTEM_ROLES:
            previous = _previous_tail(messages, tail)
            for name, i in (("tail", tail), ("previous_tail", previous)):
                if i is not None and _marked(messages[i]):
                    chars = sum(
                        _chars(m) for m in messages[: i + 1] if role(m) not in _SYSTEM_ROLES
                    )
                    spots.append(_Spot(name, (2, i), head_tokens + chars // 4))
        lead = _leading_system(messages)
        if lead is not None and _marked(messages[lead]):
            spots.append(_Spot("system", (1, lead), head_tokens))
        if self.tools is not None and isinstance(self.tools[-1], dict):
            spots.append(_Spot("tools", (0, len(self.tools) - 1), tools_tokens))
        return spots

    def apply(self, chosen: list[_Spot]) -> tuple[list[dict[str, Any]], list[Any] | None]:
        """New messages (and tools, when marked) carrying the chosen marks."""
        messages: list[dict[str, Any]] = list(self.messages)
        tools: list[Any] | None = None
        for spot in chosen:
            section, i = spot.order
            if section == 0:
                assert self.tools is not None
                tools = [*self.tools[:i], {**self.tools[i], "cache_control": _mark()}]
            else:
                marked = _marked(messages[i])
                assert marked is not None
                messages[i] = marked
        return messages, tools


def _mark() -> dict[str, str]:
    return {"type": "ephemeral"}  # a new dict each time: nothing shared between messages


def _client_marks(
    messages: list[dict[str, Any]], tools: list[Any] | None
) -> list[tuple[tuple[int, int], Any]]:
    """The client's marks, each as (where, its ttl), wherever litellm might carry one: on a
    message, its parts, its tool calls, a tool or its function. Counted even where litellm drops
    them, so the total stays within four whatever it carries."""
    found: list[tuple[tuple[int, int], Any]] = []
    for i, tool in enumerate(tools or ()):
        if isinstance(tool, dict):
            function = tool.get("function")
            for holder in (tool, function if isinstance(function, dict) else {}):
                if holder.get("cache_control") is not None:
                    found.append(((0, i), _ttl(holder)))
    for i, message in enumerate(messages):
        where = (1 if role(message) in _SYSTEM_ROLES else 2, i)
        content = message.get("content")
        parts = content if isinstance(content, list) else []
        for holder in (message, *parts, *tool_calls(message)):
            if isinstance(holder, dict) and holder.get("cache_control") is not None:
                found.append((where, _ttl(holder)))
    return found


def _ttl(holder: dict[str, Any]) -> Any:
    control = holder["cache_control"]
    return control.get("ttl") if isinstance(control, dict) else None


def _chars(message: dict[str, Any]) -> int:
    calls = tool_calls(message)
    extra = sum(len(orjson.dumps(c.get("function"))) for c in calls) if calls else 0
    content = message.get("content")
    # an image is as long as the text of its estimated tokens (``rules.media``)
    return len(text_of(content)) + extra + 4 * media_tokens(content)


def _previous_tail(messages: list[dict[str, Any]], tail: int) -> int | None:
    """The message before the last run of assistant messages ahead of ``tail``: the tail of the
    request that run answered."""
    i = tail - 1
    while i >= 0 and role(messages[i]) != "assistant":
        i -= 1
    while i >= 0 and role(messages[i]) == "assistant":
        i -= 1
    if i < 0 or role(messages[i]) in _SYSTEM_ROLES:
        return None
    return i


def _leading_system(messages: list[dict[str, Any]]) -> int | None:
    """The last of the system messages the conversation starts with."""
    last = None
    for i, message in enumerate(messages):
        if role(message) not in _SYSTEM_ROLES:
            break
        last = i
    return last


def _marked(message: dict[str, Any]) -> dict[str, Any] | None:
    """A marked copy of ``message``, or None when it has nothing a mark can go on (no content,
    empty text, or a last part litellm would not carry a mark on)."""
    content = message.get("content")
    if role(message) in _RESULT_ROLES:  # litellm puts it on the tool_result block
        if not text_of(content) and not (isinstance(content, list) and content):
            return None
        return {**message, "cache_control": _mark()}
    if isinstance(content, str):
        parts: list[Any] = [{"type": "text", "text": content}] if content else []
    elif isinstance(content, list):
        parts = content
    else:
        return None
    last = parts[-1] if parts else None
    if not isinstance(last, dict) or not _part_markable(role(message), last):
        return None
    return {**message, "content": [*parts[:-1], {**last, "cache_control": _mark()}]}


def _part_markable(message_role: str, part: dict[str, Any]) -> bool:
    kind = part.get("type")
    if kind == "text":
        return isinstance(part.get("text"), str) and bool(part["text"])
    return message_role == "user" and isinstance(kind, str) and kind in _USER_PARTS
