"""A side call: a request with no tools whose answer's shape a JSON schema fixes (Gemini CLI's
routing classifier, a title or a summary an agent asks for on the side). The agent does not act
on its answer, so inject's blocks would only add uncached tokens to it (and words its rubric does
not expect); its stored blocks are replayed as forwarded. A JSON-mode loop that acts through its
answers (``json_object``, no schema) is no side call."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rules.base import Context

_GEMINI_SCHEMAS = (
    "responseJsonSchema", "responseSchema", "response_json_schema", "response_schema"
)  # fmt: skip


def _schema_format(value: Any) -> bool:
    return isinstance(value, Mapping) and value.get("type") == "json_schema"


def structured_side_call(ctx: Context) -> bool:
    """Whether the request is a side call: no tools, and a schema for its answer in its
    protocol's field (chat's ``response_format``, Responses' ``text.format``, Messages'
    ``output_format`` or ``output_config.format``, Gemini's ``generationConfig``)."""
    body = ctx.request
    if ctx.tools or body.get("tools"):  # (hosted ones too: web_search, googleSearch)
        return False
    if _schema_format(body.get("response_format")):
        return True
    text, config = body.get("text"), body.get("output_config")
    if isinstance(text, Mapping) and _schema_format(text.get("format")):
        return True
    if _schema_format(body.get("output_format")) or (
        isinstance(config, Mapping) and _schema_format(config.get("format"))
    ):
        return True
    generation = body.get("generationConfig") or body.get("generation_config")
    return isinstance(generation, Mapping) and any(generation.get(k) for k in _GEMINI_SCHEMAS)
