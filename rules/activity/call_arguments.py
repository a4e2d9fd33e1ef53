"""A tool call's arguments as the rules read them: a JSON object, or nothing."""

from __future__ import annotations

import json
from typing import Any

import orjson

_WRITABLE_DEPTH = 250  # orjson refuses to write an object nested deeper than 255


def load_arguments(arguments: str) -> dict[str, Any]:
    """A call's arguments as a JSON object; {} when they are not one, or are nested deeper than
    orjson writes (255 levels: the rules serialise what they read). Lone surrogates
    (``"\\udcff"``), which orjson refuses, are read by the standard parser."""
    if not arguments:
        return {}
    try:
        args = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        try:
            args = json.loads(arguments)
        except (ValueError, RecursionError):  # nested past orjson's 1,024 levels: not read
            return {}
    if not isinstance(args, dict):
        return {}
    if arguments.count("{") + arguments.count("[") > _WRITABLE_DEPTH:  # may be too deep
        try:
            orjson.dumps(args)
        except orjson.JSONEncodeError:
            return {}
    return args
