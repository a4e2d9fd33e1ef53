"""The provider's own explanation of a cache miss, asked for when an upstream enables it
(``upstreams[].cache_diagnostics``): the session's previous answer named as the comparison, the
answer's verdict read back and kept beside the proxy's attribution.

- Anthropic Messages (platform.claude.com, "Cache diagnostics", beta ``cache-diagnosis-2026-04-07``
  in ``anthropic-beta``): the body's ``diagnostics.previous_message_id`` (null on a session's
  first request, to opt in); the answer's ``diagnostics.cache_miss_reason`` is null (no
  divergence, or not decided yet) or ``{type: model_changed | system_changed | tools_changed |
  messages_changed | previous_message_not_found | unavailable, cache_missed_input_tokens}``.
- OpenAI Responses (developers.openai.com, "Prompt cache diagnostics"): the body's
  ``prompt_cache_options.comparison_response_id``; the answer's ``prompt_cache_diagnostics`` is
  ``{type: cache_miss, reason, cache_missed_tokens, comparison_reusable_tokens}``, or of type
  ``cache_hit``, ``comparison_response_not_found`` or ``unavailable``.

A client that asks for diagnostics itself keeps its own field. What the provider answers is
untrusted: only short strings and sane counts are kept."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ANTHROPIC_BETA = "cache-diagnosis-2026-04-07"
MAX_TEXT = 64
MAX_TOKENS = 10**10


def request_fields(protocol: str, previous_id: str | None) -> dict[str, Any] | None:
    """The body fields that ask ``protocol``'s provider for a diagnosis (None: it has none)."""
    if protocol == "anthropic":
        return {"diagnostics": {"previous_message_id": previous_id}}
    if protocol == "responses" and previous_id is not None:
        return {"prompt_cache_options": {"comparison_response_id": previous_id}}
    return None


def asked(body: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any] | None:
    """``body`` with ``fields`` added (a new dict), or None when the client set one itself."""
    if any(name in body for name in fields):
        return None
    return {**body, **fields}


def with_beta(headers: Mapping[str, str]) -> dict[str, str]:
    """The client's headers with Anthropic's diagnostics beta added to ``anthropic-beta``."""
    out = dict(headers)
    present = [b.strip() for b in out.get("anthropic-beta", "").split(",") if b.strip()]
    if ANTHROPIC_BETA not in present:
        out["anthropic-beta"] = ", ".join([*present, ANTHROPIC_BETA])
    return out


def diagnosis(answer: Any) -> dict[str, Any] | None:
    """The verdict in an answer object (a whole answer, or a stream event's message or
    response): ``{reason, missed_tokens?}``; None when it carries none."""
    if not isinstance(answer, dict):
        return None
    if "diagnostics" in answer:  # Anthropic
        found = answer["diagnostics"]
        reason = found.get("cache_miss_reason") if isinstance(found, dict) else None
        if not isinstance(reason, dict):
            return {"reason": "no_divergence"} if isinstance(found, dict) else None
        return _verdict(reason.get("type"), reason.get("cache_missed_input_tokens"))
    found = answer.get("prompt_cache_diagnostics")  # OpenAI Responses
    if not isinstance(found, dict):
        return None
    kind = found.get("type")
    if kind == "cache_miss":
        return _verdict(found.get("reason"), found.get("cache_missed_tokens"))
    return _verdict(kind, None)


def response_id(answer: Any) -> str | None:
    """An answer's id (``msg_…``, ``resp_…``), when it is a short plain string."""
    found = answer.get("id") if isinstance(answer, dict) else None
    if isinstance(found, str) and 0 < len(found) <= 200 and found.isascii():
        return found
    return None


def _verdict(reason: Any, tokens: Any) -> dict[str, Any] | None:
    if not isinstance(reason, str) or not reason:
        return None
    out: dict[str, Any] = {"reason": reason[:MAX_TEXT]}
    if type(tokens) is int and 0 <= tokens <= MAX_TOKENS:
        out["missed_tokens"] = tokens
    return out
