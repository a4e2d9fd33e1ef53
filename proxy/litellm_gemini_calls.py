"""A call a Gemini client cannot be given, through litellm's Gemini adapter, ends the answer as
Gemini ends it: ``MALFORMED_FUNCTION_CALL``.

A bridged model may write a call whose arguments are not JSON, or JSON that is not an object (a
model of an OpenAI-compatible server, a list or a string). litellm's adapter made the first
``args: {}`` in a whole answer (the tool run with no arguments), dropped it from a stream (a
``STOP`` with no call, which an agent takes for the model's last word), and passed the second on
as the call's ``args``, which Gemini's own schema makes an object. Here such an answer keeps its
text, loses its calls, and ends with Gemini's own finish for a call it could not read, which the
Gemini CLI retries.

Used by ``proxy.litellm_gemini_ids``, which owns the adapter's answer and stream."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

MALFORMED = "MALFORMED_FUNCTION_CALL"
_CALL_KEYS = ("functionCall", "function_call")
_MAX_NAMED = 200  # characters of a function's name in the finish message


def object_args(text: str) -> Mapping[str, object]:
    """A call's arguments as an object; anything else raises as JSON that does not parse (the
    adapter's stream then keeps accumulating it: at the answer's end it is unreadable)."""
    args = json.loads(text)
    if not isinstance(args, dict):
        raise json.JSONDecodeError("the arguments are not a JSON object", text, 0)
    return args


def readable(arguments: object) -> bool:
    """Whether a call's arguments can be given to a Gemini client (none at all can: ``{}``)."""
    if arguments is None or arguments == "":
        return True
    if not isinstance(arguments, str):
        return False
    try:
        object_args(arguments)
    except ValueError:
        return False
    return True


def unreadable_answer_calls(response: Any) -> list[str]:
    """The names of a whole chat answer's calls whose arguments are unreadable."""
    choice = response.choices[0] if getattr(response, "choices", None) else None
    calls = getattr(getattr(choice, "message", None), "tool_calls", None) or []
    names: list[str] = []
    for call in calls:
        function = getattr(call, "function", None)
        if function is not None and not readable(getattr(function, "arguments", None)):
            names.append(str(getattr(function, "name", "") or ""))
    return names


def unreadable_pending(pending: Mapping[int, Mapping[str, str]]) -> list[str]:
    """The names of the calls a stream still accumulates at its finish whose arguments never
    parsed as an object (one with no arguments at all is complete: ``{}``)."""
    return [data["name"] for data in pending.values() if not readable(data["arguments"])]


def malformed(answer: Any, names: Iterable[str]) -> Any:
    """``answer`` (a Gemini answer or stream chunk, changed in place) without its calls,
    ending ``MALFORMED_FUNCTION_CALL``, its message naming the calls."""
    shown = ", ".join(sorted({n[:_MAX_NAMED] for n in names if n})) or "a function"
    candidates = answer.get("candidates") if isinstance(answer, dict) else None
    for candidate in candidates if isinstance(candidates, list) else ():
        if not isinstance(candidate, dict):
            continue
        content = candidate.get("content")
        parts = content.get("parts") if isinstance(content, dict) else None
        if isinstance(parts, list):
            parts[:] = [p for p in parts if not (isinstance(p, dict) and _is_call(p))]
        candidate["finishReason"] = MALFORMED
        candidate["finishMessage"] = f"Malformed function call: arguments of {shown} unreadable."
    return answer


def _is_call(part: Mapping[str, Any]) -> bool:
    return any(key in part for key in _CALL_KEYS)
