"""Integers past 64 bits, kept exactly. orjson parses an integer it cannot hold in 64 bits as a
float (``123456789012345678901234567890`` comes back ``1.2345678901234568e+29``), and cannot
write one back. A body is parsed by orjson as always; where the values hold a float that far out
(walked with the depth check, which visits every value anyway) the body is parsed again by the
standard library, each such integer kept as an ``orjson.Fragment`` of its own digits, which
orjson writes back as they were. A float written so in the body (``1e30``) costs that second
parse too, and comes back the same float."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson

# Beyond this a parsed float may stand for an integer orjson could not hold (it holds -2**63 to
# 2**64 - 1 as integers)
_EXACT = float(2**63)


class LossyNumber(Exception):
    """A parsed value holds a float that may stand for an integer past 64 bits."""


def exact_within_depth(value: dict[str, Any] | list[Any], remaining: int) -> bool:
    """``body.within_depth``, raising ``LossyNumber`` on a float beyond ±2**63."""
    children: Any = value.values() if type(value) is dict else value
    for child in children:
        kind = type(child)
        if kind is dict or kind is list:
            if remaining <= 0 or not exact_within_depth(child, remaining - 1):
                return False
        elif kind is float and not -_EXACT < child < _EXACT:
            raise LossyNumber
    return True


def _integer(digits: str) -> Any:
    value = int(digits)
    if -(2**63) <= value < 2**64:
        return value
    return orjson.Fragment(digits.encode())  # written back as sent


def exact_loads(data: bytes | str) -> Any:
    """``data`` (JSON orjson has parsed) parsed keeping every integer exactly."""
    return json.loads(data, parse_int=_integer)


def loads(data: bytes | str) -> Any:
    """``orjson.loads``, keeping integers past 64 bits exactly (``exact_loads``) where the text
    holds one: for the JSON the rules wrote (a call's arguments), small."""
    value = orjson.loads(data)
    if type(value) is dict or type(value) is list:
        try:
            exact_within_depth(value, 1_000)
        except LossyNumber:
            return exact_loads(data)
    return value


def plain_loads(data: bytes | str) -> Any:
    """``orjson.loads``, keeping integers past 64 bits exactly as Python's own integers (the
    standard library's parse) where the text holds one: for litellm, which writes a body with
    ``json.dumps`` (a Fragment it cannot write; a float would change the client's value)."""
    value = orjson.loads(data)
    if type(value) is dict or type(value) is list:
        try:
            exact_within_depth(value, 1_000)
        except LossyNumber:
            return json.loads(data)
    return value


def dumps(value: Any, default: Callable[[Any], Any] | None = None) -> bytes:
    """``orjson.dumps``; a value holding an integer past 64 bits, which orjson cannot write (a
    ``plain_loads`` body's, echoed in litellm's answer), written by the standard library."""
    try:
        return orjson.dumps(value, default=default)
    except orjson.JSONEncodeError as exc:
        if "64-bit" not in str(exc):
            raise
    return json.dumps(value, default=default, ensure_ascii=False, separators=(",", ":")).encode()
