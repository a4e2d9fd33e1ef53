"""The adapters' forwarded bytes (``Lowered.data`` / ``Rewritten.data``), the lifted
values kept as objects (``LiftMemory.objects``) and messages read by their objects
(``prefix.read_bytes``, ``Whole.data`` None): driven through a NON-strict engine (what production
sends) and compared with ``orjson.dumps`` of the forwarded body and with a fresh adapter's."""

from __future__ import annotations

import copy
import random
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.errors import BadRequest
from proxy.protocols.anthropic import AnthropicAdapter
from proxy.protocols.base import Adapter
from proxy.protocols.prefix import read_bytes
from proxy.protocols.responses import ResponsesAdapter
from proxy.rewrite.engine import Engine
from proxy.server.wire import MESSAGES_WIRE, RESPONSES_WIRE
from tests.proxy.protocols import test_anthropic_prefix as ap
from tests.proxy.protocols import test_responses_prefix as rp
from tests.proxy.protocols.test_anthropic_adapter import body as a_body
from tests.proxy.protocols.test_anthropic_adapter import text, user
from tests.proxy.protocols.test_responses_adapter import body as r_body
from tests.proxy.protocols.test_responses_adapter import msg
from tests.proxy.server.test_body_reuse import anthropic_turns, responses_turns
from tests.support.twin_engines import twin_engines

SETTINGS = {
    "upstreams": [{"name": "a", "kind": "anthropic"}, {"name": "o"}],
    "pipeline": {"budget_tokens": 16000},
}
KEY = {"a": "messages", "r": "input"}


def _adapter(proto: str) -> Adapter:
    return AnthropicAdapter() if proto == "a" else ResponsesAdapter()


def _history(proto: str) -> list[Any]:
    return ap.conversation(40) if proto == "a" else rp.conversation(40)


def _upto(proto: str, history: list[Any], n: int) -> list[Any]:
    return list(history[: 1 + 2 * n] if proto == "a" else rp.upto(history, n))


def _body(proto: str, items: list[Any]) -> dict[str, Any]:
    return a_body(*items) if proto == "a" else r_body(*items)


def _said(proto: str, t: str) -> dict[str, Any]:
    return user(text(t)) if proto == "a" else msg("user", t)


class Pair:
    """A kept adapter on a non-strict engine, and a fresh adapter per request on another."""

    def __init__(self, fast: Engine, slow: Engine, proto: str) -> None:
        self.fast, self.slow, self.proto = fast, slow, proto
        self.adapter = _adapter(proto)
        self.known = 0

    async def send(
        self, b: dict[str, Any], now: float, sid: str = "s", budget: int | None = None
    ) -> dict[str, Any]:
        """``b`` through both (``b``'s own objects to the kept adapter): the kept adapter's bytes,
        where it has them, are its body's JSON, and its body is the fresh adapter's."""
        headers = {"x-session-id": sid}
        want = await self.slow.rewrite(
            orjson.loads(orjson.dumps(b)), headers, now=now, adapter=_adapter(self.proto),
            budget=budget,
        )  # fmt: skip
        got = await self.fast.rewrite(b, headers, now=now, adapter=self.adapter, budget=budget)
        data = orjson.dumps(got.body)
        if got.data is not None:
            self.known += 1
            assert got.data == data
        assert data == orjson.dumps(want.body)
        return got.body


@pytest.fixture
async def engines(tmp_path: Path) -> AsyncIterator[tuple[Engine, Engine]]:
    async with twin_engines(tmp_path, SETTINGS, strict=False) as both:  # NOT strict
        yield both


@pytest.mark.parametrize("proto", ["a", "r"])
async def test_a_session_handed_the_same_objects_with_edits_system_and_sessions(
    engines: tuple[Engine, Engine], proto: str
) -> None:
    """The client's very objects again (as the body memory hands them: ``_extended``, its
    ``Whole`` not written), alternating with re-parsed ones (read one by one after it), with
    edits in the middle, a changed system prompt / instructions, a second session, mending."""
    pair = Pair(*engines, proto)
    rng = random.Random(7)
    history = _history(proto)
    n, now = 10, 1000.0
    for step in range(40):
        n += rng.choice([0, 1, 1, 2])
        items = _upto(proto, history, n)
        if rng.random() < 0.25:  # an old message rewritten
            i = rng.randrange(2, len(items))
            items[i] = _said(proto, f"edited {step}")
        if rng.random() < 0.1 and proto == "a":  # an empty text block: mended
            items.append(user(text(" "), text(f"and {step}")))
        if rng.random() < 0.3:
            items.append(_said(proto, f"now do {step}"))
        b = _body(proto, items)
        if rng.random() < 0.2:
            if proto == "a":
                b["system"] = f"other {rng.randrange(2)}"
            else:
                b["instructions"] = f"instr {rng.randrange(2)}"
        same = rng.random() < 0.6  # the history's objects themselves, else parsed again
        now += 5
        await pair.send(b if same else orjson.loads(orjson.dumps(b)), now, rng.choice("sst"))
    assert pair.known >= 15


@pytest.mark.parametrize("proto", ["a", "r"])
async def test_the_forwarded_body_sent_again_as_the_next(
    engines: tuple[Engine, Engine], proto: str
) -> None:
    """The overflow rescue's flow (and an in-process client's): the forwarded body, its reused
    values the kept objects themselves, lowered again as a client's body, with a lower budget;
    then the client's next request, whose snapshot is the rescue's."""
    pair = Pair(*engines, proto)
    history = _history(proto)
    now = 1000.0
    forwarded: dict[str, Any] | None = None
    for n in range(12, 30):
        now += 5
        b = _body(proto, _upto(proto, history, n))
        forwarded = await pair.send(b, now)
        if n % 3 == 0:
            now += 1
            again = dict(forwarded)
            await pair.send(again, now, budget=6000)
            grown = dict(forwarded)
            grown[KEY[proto]] = [*forwarded[KEY[proto]], _said(proto, f"more {n}")]
            now += 1
            await pair.send(grown, now)
    assert pair.known >= 10


@pytest.mark.parametrize("proto", ["a", "r"])
async def test_a_lowered_lifted_twice_hands_the_bytes_of_each_lift(proto: str) -> None:
    """``lift`` twice on one ``Lowered``: the second's bytes are its own body's (never stale),
    and an untouched lift (the client's body) hands none."""
    turns: Callable[[int], dict[str, Any]] = anthropic_turns if proto == "a" else responses_turns
    adapter = _adapter(proto)
    key = KEY[proto]
    for k in range(1, 6):
        b = orjson.loads(orjson.dumps(turns(k)))
        lowered = adapter.lower(b, "s")
        messages = [dict(m) for m in lowered.messages]
        last = messages[-1]
        last["content"] = f"{last['content']} (edited)"
        hashes = [orjson.dumps(m, option=orjson.OPT_SORT_KEYS).hex() for m in messages]
        first = adapter.lift(b, lowered, messages, hashes)
        assert lowered.data is None or lowered.data == orjson.dumps(first)
        second = adapter.lift(b, lowered, messages, hashes)
        assert lowered.data is None or lowered.data == orjson.dumps(second)
        assert orjson.dumps(first) == orjson.dumps(second)
        assert adapter.lift(b, lowered, lowered.messages, None) is b
        assert lowered.data is None
        assert key in first


def test_read_by_objects_then_by_new_objects_and_back() -> None:
    """``Whole.data`` None (read by its objects) never costs the next request its shared count:
    one handed new objects is read one by one, all its shared messages found."""
    history = ap.conversation(30)
    limit = 262_144
    prev, prev_datas = None, []
    objects = copy.deepcopy(history)
    for n in range(5, 30):
        source = objects[: 1 + 2 * n] if n % 3 else orjson.loads(orjson.dumps(history[: 1 + 2 * n]))
        datas, shared, whole = read_bytes(prev, prev_datas, source, limit)
        assert datas == [orjson.dumps(m) for m in source]
        assert shared == min(len(prev_datas), len(source)) if prev_datas else shared == 0
        assert whole is not None and (whole.data is None or whole.data == orjson.dumps(source))
        prev, prev_datas = whole, datas


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("proto", ["a", "r"])
def test_a_body_nested_to_orjsons_limit_never_reaches_the_adapters(proto: str) -> None:
    # ``prefix.with_items`` joins each message's own JSON, written
    # alone, one or two levels less deep than inside the body: a message nested to orjson's
    # limit (254) has bytes while the body has none. ``Engine.rewrite`` takes validated bodies
    # only, and every entry point (the server's body memory, ``ctxproxy rewrite``'s
    # ``wire.parse``) refuses one nested deeper than ``MAX_JSON_DEPTH`` (200) first.
    turns: Callable[[int], dict[str, Any]] = anthropic_turns if proto == "a" else responses_turns
    key = KEY[proto]
    b = orjson.loads(orjson.dumps(turns(2)))
    b[key][1] = {**b[key][1], "x_deep": _nested(252)}
    message = orjson.dumps(b[key][1])  # the message alone is written; the body is not
    empty = b'"' + key.encode() + b'":[]'
    raw = orjson.dumps({**b, key: []}).replace(empty, empty[:-1] + message + b"]")
    wire = MESSAGES_WIRE if proto == "a" else RESPONSES_WIRE
    for read in (wire.parse, wire.memory().parse):
        with pytest.raises(BadRequest, match="nested more than 200"):
            read(raw)


@pytest.mark.parametrize("proto", ["a", "r"])
async def test_the_members_taken_over_are_the_forwarded_bodys(
    engines: tuple[Engine, Engine], proto: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session's system prompt, tools and other members handed again as the same objects (the
    body memory's) are written from the previous request's bytes; replaced by new objects, equal
    or not, under the same names, they are written anew: the bytes are always the forwarded
    body's, which is a fresh adapter's."""
    from proxy.protocols import anthropic, prefix, responses

    module = anthropic if proto == "a" else responses
    reused: list[str] = []

    def spy(b: dict[str, Any], key: str, items: list[bytes], seen: Any, wrote: Any) -> Any:
        reused.extend(k for k, (v, _) in (seen or {}).items() if b.get(k) is v)
        return prefix.with_items(b, key, items, seen, wrote)

    monkeypatch.setattr(module, "with_items", spy)
    pair = Pair(*engines, proto)
    rng = random.Random(35)
    history = _history(proto)
    members = {k: v for k, v in _body(proto, []).items() if k != KEY[proto]}
    n, now = 10, 1000.0
    for step in range(40):
        n += rng.choice([0, 1, 1, 2])
        items = _upto(proto, history, n)
        if rng.random() < 0.2:  # an old message rewritten: the rules' lifting differs
            i = rng.randrange(2, len(items))
            items[i] = _said(proto, f"edited {step}")
        if rng.random() < 0.3:  # new objects under the same names: changed or equal
            fresh = copy.deepcopy(members)
            if rng.random() < 0.5:
                name = "system" if proto == "a" else "prompt_cache_key"
                fresh[name] = f"changed at {step}"
            members = fresh
        b = {**members, KEY[proto]: items}
        now += 5
        await pair.send(b, now, budget=6000)
    assert pair.known >= 15
    assert len(reused) >= 10  # taken over, and right


@pytest.mark.parametrize("proto", ["a", "r"])
def test_the_tools_read_are_each_bodys_own(proto: str) -> None:
    """A session's next body with the very same ``tools`` object is handed the same list read
    before (what is derived from it by identity is not derived again); a new object, changed or
    equal, is read again: each request's tools are those of its own body."""
    from proxy.protocols.anthropic_lower import lowered_tools
    from proxy.protocols.responses import _tools

    read = lowered_tools if proto == "a" else _tools
    adapter = _adapter(proto)
    history = _history(proto)
    tools = _body(proto, [])["tools"]
    last: Any = None
    for step in range(1, 12):
        b = _body(proto, _upto(proto, history, 2 + step))
        if step % 3 == 0:
            tools = copy.deepcopy(tools)
            if step % 2:
                tools[0] = {**tools[0], "description": f"changed at {step}"}
        b["tools"] = tools
        lowered = adapter.lower(b, "s")
        assert lowered.tools == read(b["tools"])
        assert (lowered.tools is last) == (step % 3 != 0 and step > 1)
        last = lowered.tools
