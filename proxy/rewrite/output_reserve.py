"""Room kept in the model's window for the answer. Providers refuse a request whose prompt plus
the output it asks for exceeds the window (Anthropic: "input length and `max_tokens` exceed context
limit"; OpenAI: "you requested N tokens (P in the messages, C in the completion)"), so the budget
is the window less the larger of the configured reserve and the output the request asks for."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# The request field that caps the answer, per protocol (chat's newer name first).
_OUTPUT_FIELDS = ("max_completion_tokens", "max_tokens", "max_output_tokens")


def requested_output(body: Mapping[str, Any]) -> int | None:
    """The output tokens the request asks room for, when it says (a positive integer)."""
    for name in _OUTPUT_FIELDS:
        value = body.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def input_budget(window: int, reserve: int, body: Mapping[str, Any]) -> int:
    """What the prompt may take of ``window``: never under 256 tokens, so that a request asking
    for the whole window still gets its protected floor forwarded (the provider then says why)."""
    asked = requested_output(body) or 0
    return max(256, window - max(reserve, asked))
