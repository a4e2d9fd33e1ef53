"""Message factories for table-driven tests: user(), system(), assistant(), call(), result()."""

from __future__ import annotations

from typing import Any

import orjson


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
