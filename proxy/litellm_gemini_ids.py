"""Tool-call ids through litellm's Gemini adapter (``litellm.google_genai``), both ways.

- Into the provider: litellm named every call and response ``call_<name>``, whatever id it had.
  Now a call goes with the id it has and a response with its call's
  (``proxy.upstream.gemini_call_ids`` gives every pair one before litellm is called); a response
  whose id answers no call before it goes as the user's text (a tool message no call precedes is
  a 400 at OpenAI and Anthropic), after the turn's tool messages (OpenAI refuses a user message
  between a call and its result). Thought parts are left out (the model's earlier reasoning,
  which another provider cannot verify; litellm sent their text as the answer's), and a system
  instruction keeps all its text parts (litellm kept the first).
- Back to the client: the answer's calls had no id (the Gemini CLI then invents one, so the next
  request named the call by its place only); each now carries the provider's (``toolu_…``,
  ``call_…``), in JSON and in a stream. A call streamed without arguments ("", which never parses
  as JSON) was dropped by litellm's stream: it now ends the answer, with ``{}`` arguments.

Installed once, when litellm is first imported (``proxy.providers.load_litellm``); litellm is
pinned by the lock, and ``tests/proxy/upstream/test_gemini_bridge_ids.py`` fails if a release
moves what this replaces."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

from proxy.litellm_gemini_calls import (
    malformed,
    object_args,
    unreadable_answer_calls,
    unreadable_pending,
)

_installed = False
_CALL_KEYS = ("functionCall", "function_call")
_RESPONSE_KEYS = ("functionResponse", "function_response")


def install() -> None:
    global _installed
    if _installed:
        return
    from litellm.google_genai.adapters import transformation

    adapter: Any = transformation.GoogleGenAIAdapter
    wrapper: Any = transformation.GoogleGenAIStreamWrapper
    answered = adapter.translate_completion_to_generate_content

    def translate_completion_to_generate_content(self: Any, response: Any) -> Any:
        answer = answered(self, response)
        choice = response.choices[0] if response.choices else None
        calls = getattr(getattr(choice, "message", None), "tool_calls", None) or []
        ids = [getattr(call, "id", None) for call in calls if getattr(call, "function", None)]
        _named(_answer_parts(answer), iter(ids))
        unreadable = unreadable_answer_calls(response)
        return malformed(answer, unreadable) if unreadable else answer

    # a call's arguments that are JSON but no object are not a call's (``litellm_gemini_calls``)
    adapter._parse_tool_call_args = staticmethod(object_args)
    wrapper._parse_accumulated_args = staticmethod(object_args)
    adapter._transform_contents_to_messages = _messages
    adapter.translate_completion_to_generate_content = translate_completion_to_generate_content
    wrapper.async_google_genai_sse_wrapper = _sse_with_ids
    _installed = True


def _messages(self: Any, contents: Any, system_instruction: Any = None) -> list[Any]:
    """Gemini contents as chat messages, each call and response with its own id."""
    from litellm.google_genai.adapters import transformation as t

    system = _system_text(system_instruction)
    out: list[Any] = [{"role": "system", "content": system}] if system else []
    called: set[str] = set()
    for content in contents if isinstance(contents, list) else [contents]:
        if not isinstance(content, Mapping):
            continue
        parts = [p for p in t._genai_content_parts(content.get("parts", ())) if not _thought(p)]
        role = content.get("role", "user")
        if role == "model":
            out.extend(_model_message(t, parts, called))
        elif role == "user":
            out.extend(_user_messages(t, parts, called))
    return out


def _model_message(t: Any, parts: list[Any], called: set[str]) -> list[Any]:
    calls = []
    for part in parts:
        call = t._genai_tool_call(part)
        if call is None:
            continue
        sent = _id(part, _CALL_KEYS)
        if sent:
            call["id"] = sent
        called.add(call["id"])
        calls.append(call)
    converted = t._genai_message_parts(parts)
    text = "".join(p["text"] for p in converted if p["type"] == "text")
    mixed = any(p["type"] != "text" for p in converted)
    message: dict[str, Any] = {
        "role": "assistant",
        "content": list(converted) if mixed else text or None,
    }
    if calls:
        message["tool_calls"] = calls
    return [message] if calls or message["content"] else []


def _user_messages(t: Any, parts: list[Any], called: set[str]) -> list[Any]:
    results: list[Any] = []
    unanswered: list[Any] = []
    for part in parts:
        result = t._genai_tool_response(part)
        if result is None:
            continue
        sent = _id(part, _RESPONSE_KEYS) or result["tool_call_id"]
        if sent in called:
            result["tool_call_id"] = sent
            results.append(result)
        else:  # answers no call: its text, for the model to read
            unanswered.append({"type": "text", "text": _response_text(part)})
    converted = [*t._genai_message_parts(parts), *unanswered]
    if not converted:
        return results
    if len(converted) == 1 and converted[0]["type"] == "text":
        return [*results, {"role": "user", "content": converted[0]["text"]}]
    return [*results, {"role": "user", "content": converted}]


def _system_text(system: Any) -> str:
    if isinstance(system, str):
        return system
    parts = system.get("parts") if isinstance(system, Mapping) else None
    if isinstance(parts, Mapping):
        parts = [parts]
    if not isinstance(parts, list):
        return ""
    texts = [p["text"] for p in parts if isinstance(p, Mapping) and isinstance(p.get("text"), str)]
    return "\n\n".join(texts)


def _thought(part: Any) -> bool:
    return isinstance(part, Mapping) and part.get("thought") is True


def _id(part: Any, keys: tuple[str, str]) -> str:
    for key in keys:
        holder = part.get(key) if isinstance(part, Mapping) else None
        if isinstance(holder, Mapping):
            value = holder.get("id")
            return value if isinstance(value, str) else ""
    return ""


def _response_text(part: Mapping[str, Any]) -> str:
    response = part.get("functionResponse") or part.get("function_response") or {}
    name = response.get("name", "") if isinstance(response, Mapping) else ""
    value = response.get("response", {}) if isinstance(response, Mapping) else {}
    return f"[result of {name}] {json.dumps(value, ensure_ascii=False)}"


def _answer_parts(answer: Any) -> list[Any]:
    """The parts of a Gemini answer's (or stream chunk's) first candidate."""
    try:
        parts = answer["candidates"][0]["content"]["parts"]
    except (KeyError, IndexError, TypeError):
        return []
    return parts if isinstance(parts, list) else []


def _named(parts: list[Any], ids: Any) -> None:
    """The answer's own calls given, in order, the provider's ids (``ids``, an iterator)."""
    for part in parts:
        call = part.get("functionCall") if isinstance(part, dict) else None
        if isinstance(call, dict) and "id" not in call:
            cid = next(ids, None)
            if isinstance(cid, str) and cid:
                call["id"] = cid


async def _sse_with_ids(self: Any) -> AsyncIterator[bytes]:
    """litellm's ``async_google_genai_sse_wrapper``, its calls given the provider's ids, and a
    call streamed without arguments kept (with ``{}``) instead of dropped."""
    from litellm.google_genai.adapters.transformation import GoogleGenAIAdapter
    from litellm.types.utils import ModelResponseStream

    adapter = GoogleGenAIAdapter()
    ids: dict[int, str] = {}
    async for chunk in self.completion_stream:
        if isinstance(chunk, dict):
            yield _event(chunk)
        elif isinstance(chunk, ModelResponseStream):
            order = _noted(chunk, ids, self.accumulated_tool_calls)
            out = adapter.translate_streaming_completion_to_generate_content(chunk, self)
            held = out if isinstance(out, dict) else self.finish_chunk_awaiting_usage
            done = [k for k in order if k not in self.accumulated_tool_calls]
            _named(_answer_parts(held), iter([ids.get(k) for k in done]))
            if _finished(chunk) and self.accumulated_tool_calls and held is not None:
                unreadable = unreadable_pending(self.accumulated_tool_calls)
                _answer_parts(held).extend(_left_over(self, ids))
                if unreadable:  # not dropped in silence: Gemini's own end for it
                    malformed(held, unreadable)
            if isinstance(out, dict):
                yield _event(out)
        elif hasattr(chunk, "encode"):
            yield chunk.encode()
        else:
            yield str(chunk).encode()
    parts = _left_over(self, ids) if self.accumulated_tool_calls else []
    if parts:
        yield _event({"candidates": [{"content": {"parts": parts, "role": "model"}, "index": 0}]})
    finish = self.take_finish_chunk_awaiting_usage()
    if finish:
        yield _event(finish)


def _noted(chunk: Any, ids: dict[int, str], pending: Mapping[int, Any]) -> list[int]:
    """The indexes of the calls ``chunk`` streams, in its order, their ids noted in ``ids``: a
    call's first id, or a new call's at an index whose call is done (a server that streams each
    of its parallel calls at index 0)."""
    order: list[int] = []
    for choice in chunk.choices[:1]:
        for call in getattr(getattr(choice, "delta", None), "tool_calls", None) or ():
            index = getattr(call, "index", None)
            if not isinstance(index, int):
                continue
            cid = getattr(call, "id", None)
            if isinstance(cid, str) and cid and (index not in ids or index not in pending):
                ids[index] = cid
            if index not in order:
                order.append(index)
    return order


def _finished(chunk: Any) -> bool:
    return any(getattr(choice, "finish_reason", None) for choice in chunk.choices[:1])


def _left_over(wrapper: Any, ids: dict[int, str]) -> list[Any]:
    """The calls still accumulating, as parts (no arguments: ``{}``; arguments cut short, as
    by a length limit, are dropped, as litellm drops them); cleared."""
    parts: list[Any] = []
    for index, data in sorted(wrapper.accumulated_tool_calls.items()):
        if not data["name"] and not data["arguments"]:
            continue  # an empty delta after its call was done: litellm opened its place anew
        try:
            args = object_args(data["arguments"] or "{}")
        except ValueError:
            continue
        call: dict[str, Any] = {"name": data["name"] or "undefined_tool_name", "args": args}
        if ids.get(index):
            call["id"] = ids[index]
        parts.append({"functionCall": call})
    wrapper.accumulated_tool_calls.clear()
    return parts


def _event(data: Any) -> bytes:
    return f"data: {json.dumps(data)}\n\n".encode()
