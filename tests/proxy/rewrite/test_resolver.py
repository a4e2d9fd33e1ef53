"""The resolver model's answer is read in time linear in its length, from the first "{" to the
last "}" (a regex ``\\{.*\\}`` rescanned to the end from every "{": quadratic on "{{{{…")."""

from __future__ import annotations

import time

from proxy.rewrite.resolver import parse_pick


def test_resolver_answers_are_read_in_linear_time() -> None:
    started = time.perf_counter()
    assert parse_pick("{" * 200_000, ["a"]) is None
    assert time.perf_counter() - started < 0.5
    pick = {"path": "a", "confidence": 0.8}
    assert parse_pick('sure: {"path": "a", "confidence": 0.8} {', ["a"]) == pick  # as before
    assert parse_pick('{"path": "a", "confidence": 0.8} }', ["a"]) is None  # to the last "}"
