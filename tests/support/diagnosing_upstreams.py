"""The scripted protocol upstreams (``tests/support/protocol_upstreams.py``) answering the
providers' cache diagnostics in their documented shapes, from a fingerprint of each request
(its model, system prompt, tools and messages, as hashes) kept by the answer's id:

* Anthropic: with the ``cache-diagnosis-2026-04-07`` beta and a body ``diagnostics`` object, the
  answer carries ``diagnostics: {cache_miss_reason: null | {type, cache_missed_input_tokens}}``,
  ``type`` the first of model_changed, system_changed, tools_changed, messages_changed that
  differs from the fingerprint of ``diagnostics.previous_message_id`` (previous_message_not_found
  for an id it never answered); without the beta, the field is refused as the API refuses an
  unknown one (400).
* Responses: with ``prompt_cache_options.comparison_response_id``, ``prompt_cache_diagnostics``
  is ``{type: cache_miss, reason, cache_missed_tokens}`` (reasons named the same way, input for
  messages), ``{type: cache_hit}``, or ``{type: comparison_response_not_found}``."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from tests.support.protocol_upstreams import AnthropicUpstream, ResponsesUpstream, Turn

BETA = "cache-diagnosis-2026-04-07"


def _digest(value: Any) -> str:
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()


def fingerprint(body: dict[str, Any], system: str, messages: str) -> dict[str, Any]:
    items = body.get(messages) or []
    items = items if isinstance(items, list) else [items]
    return {
        "model": body.get("model"),
        "system": _digest(body.get(system)),
        "tools": _digest(body.get("tools")),
        "messages": [_digest(m) for m in items],
        "tokens": [len(orjson.dumps(m)) // 4 for m in items],
    }


def divergence(now: dict[str, Any], then: dict[str, Any]) -> tuple[str, int] | None:
    """(reason, tokens after the divergence), or None when ``now`` extends ``then``."""
    total = sum(now["tokens"])
    for name in ("model", "system", "tools"):
        if now[name] != then[name]:
            return f"{name}_changed", total
    for i, (mine, theirs) in enumerate(zip(now["messages"], then["messages"], strict=False)):
        if mine != theirs:
            return "messages_changed", sum(now["tokens"][i:])
    return None


class DiagnosingAnthropic(AnthropicUpstream):
    def __init__(self) -> None:
        super().__init__()
        self.prints: dict[str, dict[str, Any]] = {}

    def _message(self, body: dict[str, Any], turn: Turn) -> dict[str, Any]:
        message = super()._message(body, turn)
        if "diagnostics" not in body:
            return message
        seen = self.requests[-1]
        if BETA not in (seen.header("anthropic-beta") or ""):
            raise AssertionError("diagnostics sent without the beta header")
        now = fingerprint(body, "system", "messages")
        self.prints[message["id"]] = now
        previous = (body.get("diagnostics") or {}).get("previous_message_id")
        reason: dict[str, Any] | None = None
        if previous is not None:
            then = self.prints.get(previous)
            if then is None:
                reason = {"type": "previous_message_not_found"}
            elif (found := divergence(now, then)) is not None:
                reason = {"type": found[0], "cache_missed_input_tokens": found[1]}
        return {**message, "diagnostics": {"cache_miss_reason": reason}}


class DiagnosingResponses(ResponsesUpstream):
    def __init__(self) -> None:
        super().__init__()
        self.prints: dict[str, dict[str, Any]] = {}

    def _response(self, body: dict[str, Any], turn: Turn) -> dict[str, Any]:
        response = super()._response(body, turn)
        now = fingerprint(body, "instructions", "input")
        self.prints[response["id"]] = now
        options = body.get("prompt_cache_options")
        if not isinstance(options, dict):
            return response
        then = self.prints.get(options.get("comparison_response_id"))
        if then is None:
            verdict: dict[str, Any] = {"type": "comparison_response_not_found"}
        elif (found := divergence(now, then)) is None:
            verdict = {"type": "cache_hit"}
        else:
            reason = found[0].replace("messages", "input")
            verdict = {"type": "cache_miss", "reason": reason, "cache_missed_tokens": found[1]}
        return {**response, "prompt_cache_diagnostics": verdict}
