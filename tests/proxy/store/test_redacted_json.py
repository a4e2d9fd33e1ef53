"""A row's report and cache line are stored as ``orjson.dumps(redact(value))`` writes them, their
members' redactions remembered by their JSON text (``proxy.store.redacted_json``): the same text
as redacting the whole, on the real engine's reports of growing sessions and on values built to
hit each branch (secret-named members, key-shaped strings nested deep, a member remembered then
seen inside another key, containers orjson writes as JSON)."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import orjson
import pytest

from bench.golden import settings_for
from bench.overhead_protocols import bodies
from proxy.rewrite.engine import Engine
from proxy.server.wire import CHAT_WIRE
from proxy.store.batch import encode_row
from proxy.store.redacted_json import redacted_json
from proxy.store.sqlite import Store
from proxy.tokens import TokenCounters
from rules.redact import REDACTED, redact

KEY = "sk-proj-REPORTabcdefgh12345678"


def whole(value: dict[str, Any]) -> str:
    return orjson.dumps(redact(value)).decode()


def engine_reports(sessions: int, length: int) -> list[dict[str, Any]]:
    """The reports of ``sessions`` sessions, each growing two messages a request to ``length``
    (a small window: some are pruned), a key pasted in the user's first turn of every other
    session."""

    async def run() -> list[dict[str, Any]]:
        store = Store(":memory:", batch_window_s=0)
        await store.open()
        settings = settings_for({"pipeline": {"context_windows": {"*": 8_000}}})
        engine = Engine(settings, store, TokenCounters())
        memory, adapter = CHAT_WIRE.memory(), CHAT_WIRE.adapter
        reports = []
        try:
            for s in range(sessions):
                chat = bodies(length, False)["chat"]
                if s % 2:
                    first = chat["messages"][1]
                    chat["messages"][1] = {**first, "content": f"use {KEY} {first['content']}"}
                for n in range(4, length + 1, 2):
                    body = {**chat, "messages": chat["messages"][:n]}
                    parsed = memory.parse(orjson.dumps(body), f"s{s}")
                    done = await engine.rewrite(
                        parsed, {}, now=1000.0 + n, session_id=f"s{s}", adapter=adapter
                    )
                    reports.append(done.report)
        finally:
            engine.close()
            await store.close()
        return reports

    return asyncio.run(run())


def test_engine_reports_encode_as_redacting_the_whole() -> None:
    reports = engine_reports(sessions=4, length=40)
    assert len(reports) == 4 * 19
    for report in reports + reports:  # the second time, every member is remembered
        assert redacted_json(report) == whole(report)
    # the rules redact what they copy; a key in a member's text is still taken out here
    for report in reports[::7]:
        tainted = {**report, "working_set": {**report["working_set"], "goal": f"use {KEY}"}}
        assert redacted_json(tainted) == whole(tainted)
        assert KEY not in redacted_json(tainted)


@dataclasses.dataclass
class Found:
    path: str
    token: str


def test_each_branch() -> None:
    nested = {"entities": [{"name": "deploy", "command": f"curl -H 'x: {KEY}'"}], "n": 3}
    value: dict[str, Any] = {
        "api_key": "plain words",  # a secret-named member: replaced whole
        "token": 7,  # a number under a secret name: kept
        "count": 2,
        "ratio": 0.1 + 0.2,
        "flag": True,
        "none": None,
        "goal": f"fix it with {KEY}",
        "nested": nested,
        "again": nested,  # the same text under another key: the remembered redaction
        "list": [1, "two", {"password": "hunter2hunter2"}],
        'quote"d': "ünïcode \u2028 line",
    }
    assert redacted_json(value) == whole(value)
    assert redacted_json(value) == whole(value)
    out = orjson.loads(redacted_json(value))
    assert out["api_key"] == REDACTED and out["token"] == 7
    assert KEY not in redacted_json(value)
    assert out["list"][2]["password"] == REDACTED


def test_containers_are_redacted_as_written() -> None:
    # ``redact`` passes a tuple or a dataclass through; orjson writes them as a list and an
    # object: stored, they are redacted like those
    value = {"pair": (KEY, 1), "found": Found("a/b", KEY)}
    text = redacted_json(value)
    assert KEY not in text
    assert orjson.loads(text) == {
        "pair": [REDACTED, 1],
        "found": {"path": "a/b", "token": REDACTED},
    }


def test_a_long_member_is_redacted_and_not_held() -> None:
    value = {"pruning": [{"text": f"{KEY} " + "x" * 100, "i": i} for i in range(300)]}
    assert len(orjson.dumps(value["pruning"])) > 16_000
    assert redacted_json(value) == whole(value)
    assert KEY not in redacted_json(value)


def test_what_json_cannot_hold_raises_as_before() -> None:
    with pytest.raises(TypeError):
        redacted_json({1: "a"})  # type: ignore[dict-item]
    with pytest.raises(TypeError):
        redacted_json({"big": 1 << 70})
    with pytest.raises(TypeError):
        encode_row({"id": "r", "report": {"x": object()}})


def test_encode_row_stores_the_redacted_text() -> None:
    row = encode_row({"id": "r", "report": {"goal": KEY, "n": 1}, "cache": {"cause": KEY}})
    assert row["report"] == whole({"goal": KEY, "n": 1})
    assert row["cache"] == whole({"cause": KEY})
    assert KEY not in row["report"] + row["cache"]
