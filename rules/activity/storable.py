"""State values built from message text, made storable: lone surrogates (which JSON cannot
encode) replaced, so track_entities and working_set can keep paths and commands as sent."""

from __future__ import annotations

from typing import Any, overload

import orjson


@overload
def storable(value: dict[str, Any]) -> dict[str, Any]: ...


@overload
def storable(value: list[Any]) -> list[Any]: ...


def storable(value: Any) -> Any:
    """``value`` (JSON-like) with lone surrogates (``"\\udcff"``) in its strings replaced by
    "?", so state holding text from messages can be stored; ``value`` itself when it has none."""
    try:
        orjson.dumps(value)
        return value
    except TypeError:
        return _replace_surrogates(value)


def _replace_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, dict):
        return {_replace_surrogates(k): _replace_surrogates(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_replace_surrogates(v) for v in value]
    return value
