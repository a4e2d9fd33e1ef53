"""The body limits (``limits.max_items``, ``limits.max_json_containers``) hold before a body is
parsed, in every way the body memory reads one: whole, or reusing a kept body's prefix. A body of
ten million ``[]`` is refused from its bytes, never parsed (parsing holds the interpreter for
seconds); braces inside strings are not containers; ``read`` says how many bytes were new and,
asked to read inline, leaves a body with more new bytes than that to the worker."""

from __future__ import annotations

import time
from typing import Any

import orjson
import pytest

from proxy.errors import BadRequest
from proxy.protocols.body import validate_body
from proxy.protocols.body_limits import check_containers, containers
from proxy.protocols.body_memory import BodyMemory
from proxy.protocols.prefix import plan_values
from proxy.protocols.validate import validate_responses


def chat(n: int, text: str = "hi") -> dict[str, Any]:
    return {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": f"{text} {i}"} for i in range(n)],
    }


def memory(max_items: int = 100, max_containers: int = 1_000) -> BodyMemory:
    return BodyMemory("messages", validate_body, max_items=max_items, max_containers=max_containers)


def test_containers_are_counted_outside_strings() -> None:
    quoted = orjson.dumps({"a": "{[{[" * 100, "b": [{}, [], '\\"{']})
    assert containers(quoted, 10_000) == 4  # the object, the list, {} and []
    check_containers(quoted, 5)  # 400 {/[ bytes, 4 containers: within 5


def test_ten_million_empty_arrays_are_refused_from_the_bytes() -> None:
    raw = b'{"model":"m","messages":[' + b"[]," * 10_000_000 + b"[]]}"
    started = time.perf_counter()
    with pytest.raises(BadRequest) as caught:
        memory(max_containers=200_000).parse(raw)
    assert time.perf_counter() - started < 2.0  # parsing it would take ~3 s (and hold the GIL)
    assert caught.value.code == "too_many_json_containers"
    assert "limits.max_json_containers" in caught.value.message


def test_too_many_items_is_a_400_naming_the_array() -> None:
    with pytest.raises(BadRequest) as caught:
        memory(max_items=10).parse(orjson.dumps(chat(11)))
    assert (caught.value.code, caught.value.param) == ("too_many_items", "messages")
    responses = BodyMemory("input", validate_responses, max_items=3)
    items = [{"role": "user", "content": "x"}] * 4
    with pytest.raises(BadRequest) as caught:
        responses.parse(orjson.dumps({"model": "m", "input": items}))
    assert caught.value.param == "input"


def test_a_reused_prefix_counts_toward_the_limits() -> None:
    """A conversation growing one request at a time, each new part small, is held to the
    limits as a whole: the kept body's count carries over."""
    items = memory(max_items=20, max_containers=10_000)
    for n in range(1, 21):
        items.parse(orjson.dumps(chat(n)), "s")
    assert items.reused > 0
    with pytest.raises(BadRequest, match="max_items"):
        items.parse(orjson.dumps(chat(21)), "s")
    nested = memory(max_items=1_000, max_containers=60)
    grown = {
        "model": "m",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}],
    }
    for _ in range(20):  # 3 containers a message, the body itself 1: 61 at the 20th
        grown["messages"].append({"role": "user", "content": [{"type": "text", "text": "x"}]})
        try:
            nested.parse(orjson.dumps(grown), "s")
        except BadRequest as exc:
            assert exc.code == "too_many_json_containers"
            assert len(grown["messages"]) * 3 + 1 > 60
            break
    else:
        pytest.fail("the body outgrew the limit unnoticed")


def test_read_says_what_was_new_and_leaves_a_heavy_body_unread() -> None:
    kept = memory(max_items=1_000, max_containers=100_000)
    first = orjson.dumps(chat(200, "x" * 100))
    assert kept.read(first, "s", inline=1024) is None  # all new, more than 1 KiB: not read
    body, fresh = kept.read(first, "s") or ({}, 0)
    assert fresh == len(first) and len(body["messages"]) == 200
    nxt = orjson.dumps(chat(201, "x" * 100))
    read = kept.read(nxt, "s", inline=1024)
    assert read is not None  # one message more: read inline
    # the new message and its comma, not the members after the array (unchanged)
    assert read[1] == len(orjson.dumps(chat(201, "x" * 100)["messages"][-1])) + 1


def test_a_long_run_of_one_role_lifts_in_linear_time() -> None:
    """``plan_values`` looks a group's values up by identity: a run of 20,000 user turns (one
    group) took ~8 s when each value scanned the run."""
    source = [{"role": "user", "content": str(i)} for i in range(20_000)]
    plan: list[int] = []
    started = time.perf_counter()
    assert plan_values(source, list(range(len(source))), source, plan, [], [])
    assert time.perf_counter() - started < 1.0
    assert plan == list(range(len(source)))
