"""Gemini ``contents`` with an id on every function call and response, for a bridge to a
provider that pairs them by id (OpenAI, Anthropic and what litellm reaches).

Gemini pairs a model turn's calls with the next turn's responses by name and order; an id is
optional, and a Gemini client sends the one a call came with (the Gemini CLI invents its own,
``name-time-random``, for a call that had none, and sends it on the response only). litellm's
adapter ignores both and names every call ``call_<name>``: two parallel calls of one tool got one
id (Anthropic kept the second tool_use's result for the first), and the same id came back on
every turn (Anthropic: 400 "tool_use ids must be unique", on every retry).

Here each call keeps its own id where it has one, else gets ``call_<content>_<part>`` (its place:
the same on every request, so the prefix stays cached), fitted to the upstream's rule
(``rules.chain.call_ids``) and unique in the conversation; each response takes the id of the call
it answers: the open call of the turn before it with the id the client gave (else the one
given here), else the first with its name.
A response that answers none loses its id (the adapter then sends it as text)."""

from __future__ import annotations

from collections import deque
from typing import Any

from rules.chain.call_ids import CallIdRule

_CALL_KEYS = ("functionCall", "function_call")
_RESPONSE_KEYS = ("functionResponse", "function_response")


class _Call:
    __slots__ = ("id", "name", "sent", "used")

    def __init__(self, name: Any, sent: str, final: str) -> None:
        self.name, self.sent, self.id, self.used = name, sent, final, False


class _Open:
    """A model turn's calls not yet answered, found by the id the client gave, by the id given
    here, and by name, each in the calls' order; linear in the calls and responses however many
    share an id or a name (a hostile body of thousands would otherwise hold the loop)."""

    def __init__(self, calls: list[_Call]) -> None:
        self._by: dict[tuple[str, Any], deque[_Call]] = {}
        for call in calls:
            for key in (("sent", call.sent), ("id", call.id), ("name", _name_key(call.name))):
                if key[1] is not None and key[1] != "":
                    self._by.setdefault(key, deque()).append(call)

    def take(self, sent: str, name: Any) -> _Call | None:
        """The call a response answers: the first open one the client gave its id (the id a
        client knows), else the one given it here, else the first of its name."""
        keys = (("sent", sent), ("id", sent)) if sent else ()
        for key in (*keys, ("name", _name_key(name))):
            queue = self._by.get(key)
            while queue and queue[0].used:
                queue.popleft()
            if queue:
                call = queue.popleft()
                call.used = True
                return call
        return None


def with_call_ids(contents: list[Any], rule: CallIdRule) -> list[Any]:
    """``contents`` with the ids above (new contents and parts where one changed; the client's
    objects are never changed)."""
    taken: set[str] = set()
    counts: dict[str, int] = {}  # the next number to try after a taken id
    open_calls = _Open([])
    out: list[Any] = []
    for i, content in enumerate(contents):
        parts = content.get("parts") if isinstance(content, dict) else None
        if not isinstance(parts, list):
            out.append(content)
            continue
        if content.get("role") == "model":
            parts, calls = _calls_named(i, parts, rule, taken, counts)
            open_calls = _Open(calls)
        else:
            parts = _responses_paired(parts, open_calls)
        out.append({**content, "parts": parts})
    return out


def _calls_named(
    i: int, parts: list[Any], rule: CallIdRule, taken: set[str], counts: dict[str, int]
) -> tuple[list[Any], list[_Call]]:
    named: list[Any] = []
    calls: list[_Call] = []
    for j, part in enumerate(parts):
        key, call = _field(part, _CALL_KEYS)
        if call is None:
            named.append(part)
            continue
        sent = _id_of(call)
        base = final = rule.fit(sent or f"call_{i}_{j}")
        k = counts.get(base, 1)
        while final in taken:  # a client that reused an id, or two that fit to one
            final, k = rule.numbered(base, k), k + 1
        counts[base] = k
        taken.add(final)
        calls.append(_Call(call.get("name"), sent, final))
        named.append({**part, key: {**call, "id": final}})
    return named, calls


def _responses_paired(parts: list[Any], open_calls: _Open) -> list[Any]:
    paired: list[Any] = []
    for part in parts:
        key, response = _field(part, _RESPONSE_KEYS)
        if response is None:
            paired.append(part)
            continue
        match = open_calls.take(_id_of(response), response.get("name"))
        if match is not None:
            answer = {**response, "id": match.id}
        else:
            answer = {k: v for k, v in response.items() if k != "id"}
        paired.append({**part, key: answer})
    return paired


def _name_key(name: Any) -> str | None:
    return name if isinstance(name, str) else None


def _field(part: Any, keys: tuple[str, str]) -> tuple[str, dict[str, Any] | None]:
    if isinstance(part, dict):
        for key in keys:
            value = part.get(key)
            if isinstance(value, dict):
                return key, value
    return keys[0], None


def _id_of(holder: dict[str, Any]) -> str:
    value = holder.get("id")
    return value if isinstance(value, str) else ""
