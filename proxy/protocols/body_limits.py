"""What one body may hold beyond its size (``limits.max_items``, ``limits.max_json_containers``),
each a ``BadRequest`` naming the limit, answered in the protocol's own error shape.

Objects and arrays are counted on the bytes, before parsing: parsing is one call that holds the
interpreter until it is done (~0.1–0.4 µs an object or array, and Python's cyclic collector
walks them all as they are made), so a body of ten million ``[]`` would hold every thread for
seconds. ``{`` and ``[`` bytes are counted first (fast, and never fewer than the containers);
only a body with more of them than the limit has its strings skipped to count exactly (a body
of code or JSON logs quoted in tool results may hold braces in strings)."""

from __future__ import annotations

import re
from typing import Any

from proxy.errors import BadRequest

# a JSON string (escapes included), or an opening bracket; a one-byte match is a bracket
_TOKEN = re.compile(rb'"(?:[^"\\]++|\\.)*+"|[\[{]')


def brackets(data: bytes, start: int = 0) -> int:
    """``{`` and ``[`` bytes in ``data[start:]``: at least as many as its objects and arrays."""
    return data.count(b"{", start) + data.count(b"[", start)


def containers(data: bytes, cap: int) -> int:
    """The objects and arrays in ``data`` (JSON), counted exactly up to ``cap + 1``."""
    count = 0
    for match in _TOKEN.finditer(data):  # one match at a time: the lock is handed over meanwhile
        if match.end() - match.start() == 1:
            count += 1
            if count > cap:
                break
    return count


def check_containers(data: bytes, cap: int, upper: int | None = None) -> int:
    """400 when ``data`` holds more than ``cap`` objects and arrays; else an upper bound of how
    many it holds. ``upper``: such a bound already known."""
    if upper is None:  # each takes 2 bytes at least: a short body needs no count
        upper = brackets(data) if len(data) > 2 * cap else len(data) // 2
    if upper <= cap:
        return upper
    exact = containers(data, cap)
    if exact > cap:
        raise BadRequest(
            f"Request body holds more than {cap} JSON objects and arrays; the limit is {cap} "
            "(limits.max_json_containers).",
            code="too_many_json_containers",
        )
    return exact


def check_items(count: int, key: str, cap: int) -> None:
    """400 when the body's conversation (``key``: ``messages``, ``input``) has over ``cap``."""
    if count > cap:
        raise BadRequest(
            f"'{key}' holds {count} items; the limit is {cap} (limits.max_items).",
            param=key,
            code="too_many_items",
        )


def check_body(body: Any, key: str, cap: int) -> None:
    """``check_items`` on a parsed body."""
    items = body.get(key) if isinstance(body, dict) else None
    if isinstance(items, list):
        check_items(len(items), key, cap)
