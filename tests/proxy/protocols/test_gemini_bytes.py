"""The Gemini adapter's forwarded bytes (``Lowered.data``), written from each content's kept JSON
and the body's other members kept from the session's previous request, and its function
declarations read once per ``tools`` object: through a NON-strict engine (what production sends),
compared with ``orjson.dumps`` of the forwarded body and with a fresh adapter's on a growing
session with edits, resent changed contents, a changed system instruction and tools, and
compactions."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.protocols import gemini, prefix
from proxy.protocols.gemini import GeminiAdapter, _tools
from proxy.rewrite.engine import Engine
from tests.proxy.protocols.test_gemini_adapter import (
    MODEL,
    SHELL,
    body,
    call,
    model,
    response,
    user,
)
from tests.support.twin_engines import twin_engines

SETTINGS = {"upstreams": [{"name": "g", "kind": "gemini"}], "pipeline": {"budget_tokens": 6000}}


def history(steps: int) -> list[dict[str, Any]]:
    out = [user("make a folder, then list what is in it")]
    for i in range(steps):
        out.append(model(f"step {i}", call(f"c{i}", f"ls -la dir{i % 7}")))
        out.append(user(response(f"c{i}", f"file{i}.txt\n" * (20 + 13 * (i % 5)))))
    return out


OTHER_TOOL = {
    "name": "read_file",
    "description": "Read a file.",
    "parametersJsonSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
}


@pytest.fixture
async def engines(tmp_path: Path) -> AsyncIterator[tuple[Engine, Engine]]:
    async with twin_engines(tmp_path, SETTINGS, strict=False) as both:  # NOT strict
        yield both


async def test_the_forwarded_bytes_are_the_forwarded_bodys_on_a_changing_session(
    engines: tuple[Engine, Engine], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kept adapter is handed the previous request's very objects (as the body memory hands
    them) or a re-parsed body, and its bytes are always the JSON of the body it forwards, which
    is a fresh adapter's: also when the system instruction or the tools change between two
    requests (a new object under the same name), and when a compaction rewrites old contents."""
    fast, slow = engines
    kept = GeminiAdapter()
    rng = random.Random(32)
    turns = history(60)
    system = body()["systemInstruction"]
    tools = body()["tools"]
    n, now, known = 3, 1000.0, 0
    reused: list[str] = []  # the members whose bytes were taken over

    def spy(b: dict[str, Any], key: str, items: list[bytes], seen: Any, wrote: Any) -> Any:
        reused.extend(k for k, (v, _) in (seen or {}).items() if b.get(k) is v)
        return prefix.with_items(b, key, items, seen, wrote)

    monkeypatch.setattr(gemini, "with_items", spy)
    for step in range(45):
        n = min(n + rng.choice([1, 1, 2]), len(turns))
        contents = list(turns[: 1 + 2 * n])
        if rng.random() < 0.2:  # an earlier content resent changed
            i = rng.randrange(1, len(contents))
            contents[i] = user(f"edited at {step}") if i % 2 == 0 else model(f"edited {step}")
        if rng.random() < 0.2:
            system = {"parts": [{"text": f"You are Gemini CLI, take {step}."}], "role": "user"}
        if rng.random() < 0.2:
            tools = [{"functionDeclarations": [SHELL] + ([OTHER_TOOL] if step % 2 else [])}]
        b = body(*contents)
        b["systemInstruction"], b["tools"] = system, tools
        if rng.random() < 0.3:
            b = orjson.loads(orjson.dumps(b))
        now += rng.choice([2.0, 2.0, 400.0])  # a cold cache now and then: a compaction
        headers = {"x-session-id": "s"}
        got = await fast.rewrite(b, headers, now=now, adapter=kept, model=MODEL)
        want = await slow.rewrite(
            orjson.loads(orjson.dumps(b)), headers, now=now, adapter=GeminiAdapter(), model=MODEL
        )
        data = orjson.dumps(got.body)
        assert data == orjson.dumps(want.body)
        if got.data is not None:
            known += 1
            assert got.data == data
    assert known >= 20
    # the members' bytes were taken over, and were right
    assert reused.count("tools") >= 5 and reused.count("systemInstruction") >= 5


def test_the_declarations_are_read_again_when_the_tools_change() -> None:
    """A session's next body with the same ``tools`` object reuses the declarations read; a new
    object (changed or equal) is read again: each request's are ``_tools`` of its own body."""
    adapter = GeminiAdapter()
    turns = history(6)
    tools = body()["tools"]
    for step in range(1, 12):
        b = body(*turns[: 1 + step])
        if step % 3 == 0:
            decl = dict(SHELL, description=f"Run a shell command ({step}).")
            tools = [{"functionDeclarations": [decl]}]
        b["tools"] = tools
        lowered = adapter.lower(b, "s")
        assert lowered.tools == _tools(b["tools"])
        assert lowered.state.tools[0] is b["tools"]


def test_a_lifting_that_merges_drops_or_edits_hands_its_bodys_bytes() -> None:
    """Lifted by hand over a growing session on one adapter: the rules drop a user turn (two
    model contents merge: fewer contents than the client's), edit one in place (as many), or
    change nothing but the last; the bytes are each forwarded body's JSON every time, lifted
    contents reused from the previous request included."""
    adapter = GeminiAdapter()
    turns = [user("task")]
    for i in range(30):
        turns += [model(f"answer {i}"), user(f"more {i}")]
    rewritten: dict[int, tuple[Any, Any]] = {}  # the rules' copy of a message, kept by id

    def edit(messages: list[Any], how: str) -> list[Any]:
        out = []
        for i, m in enumerate(messages):
            if how == "drop" and i == 3:
                continue
            if how in ("drop", "edit") and i == 4:
                kept = rewritten.get(id(m))
                if kept is None or kept[0] is not m:
                    kept = rewritten[id(m)] = (m, {**m, "content": m["content"] + " (short)"})
                m = kept[1]
            out.append(m)
        last = out[-1]
        out[-1] = {**last, "content": f"{last['content']} (tail)"}
        return out

    for n, how in enumerate(["edit", "drop", "drop", "edit", "none", "drop", "edit", "edit"]):
        b = body(*turns[: 9 + 2 * n])
        lowered = adapter.lower(b, "s")
        forwarded = adapter.lift(b, lowered, edit(lowered.messages, how))
        assert lowered.data is not None and lowered.data == orjson.dumps(forwarded)
        assert (len(forwarded["contents"]) < len(b["contents"])) == (how == "drop")
