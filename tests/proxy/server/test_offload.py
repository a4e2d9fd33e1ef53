"""Which requests go to the worker thread (``proxy.rewrite.offload``): a conversation's next
request, a message or two longer than its last, stays on the event loop (a thread hop would cost
more than its millisecond of work), in every protocol and for count_tokens; a session's first
request of a long conversation, or any body bringing much new work, is parsed, lowered, run and
lifted in the worker."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.rewrite.offload import Offload
from tests.conftest import in_process
from tests.support.edge_upstream import EdgeUpstream, protocol_settings
from tests.support.factories import assistant, result, shell, system, user

JSON = {"content-type": "application/json", "x-session-id": "agent"}


def conversation(turns: int) -> list[dict[str, Any]]:
    """An agent's conversation: ~1 KB tool results, 2 messages a turn."""
    out = [system("You are a coding agent."), user("fix the tests")]
    for i in range(turns):
        cid = f"call_{i:04d}"
        out += [assistant(None, shell(cid, f"cat src/module_{i}.py")), result(cid, f"{i} " * 400)]
    return out


def counting(offload: Offload, calls: list[str]) -> Callable[..., Any]:
    run = offload.run

    async def counted(fn: Callable[..., Any], *args: Any) -> Any:
        calls.append(getattr(fn, "__qualname__", repr(fn)))
        return await run(fn, *args)

    return counted


async def test_a_conversation_s_next_request_stays_on_the_loop(
    edge: EdgeUpstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with in_process(protocol_settings(edge), str(tmp_path / "p.db")) as client:
        offload = client.app.state.services.engine.offload  # type: ignore[attr-defined]
        calls: list[str] = []
        monkeypatch.setattr(offload, "run", counting(offload, calls))
        messages = conversation(200)  # 401 messages, ~1 MB
        first = orjson.dumps({"model": "gpt-4o", "messages": messages})
        assert (await client.post("/v1/chat/completions", content=first, headers=JSON)).is_success
        assert "BodyMemory.read" in calls and "Engine._run" in calls  # all new: the worker
        for n in (201, 202, 203):  # each request a turn longer
            calls.clear()
            body = {"model": "gpt-4o", "messages": conversation(n)}
            response = await client.post(
                "/v1/chat/completions", content=orjson.dumps(body), headers=JSON
            )
            assert response.is_success
            assert calls == [], f"a hop for a request a turn longer: {calls}"
        calls.clear()
        count = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
        response = await client.post(
            "/v1/messages/count_tokens", content=orjson.dumps(count), headers=JSON
        )
        assert response.json()["input_tokens"] > 0 and calls == []


async def test_a_heavy_body_is_read_lowered_and_lifted_in_the_worker(
    edge: EdgeUpstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from proxy.protocols.responses import RESPONSES

    threads: dict[str, str] = {}
    lower, lift = RESPONSES.lower, RESPONSES.lift

    def lowered(*args: Any) -> Any:
        threads["lower"] = threading.current_thread().name
        return lower(*args)

    def lifted(*args: Any) -> Any:
        threads["lift"] = threading.current_thread().name
        return lift(*args)

    monkeypatch.setattr(RESPONSES, "lower", lowered)
    monkeypatch.setattr(RESPONSES, "lift", lifted)
    items = [{"role": "user", "content": f"{i} " + "x" * 100} for i in range(2_000)]
    raw = orjson.dumps({"model": "gpt-4o", "input": items})
    async with in_process(protocol_settings(edge), str(tmp_path / "p.db")) as client:
        response = await client.post("/v1/responses", content=raw, headers=JSON)
    assert response.is_success, response.text[:300]
    assert threads == {"lower": threads["lower"], "lift": threads["lift"]}
    assert all(name.startswith("ctxproxy-body") for name in threads.values()), threads


@pytest.mark.parametrize(
    "again",
    [
        {"user": "another-session"},  # a member after the array names another session
        {"model": "gpt-4"},  # another model: another token encoding, its memos apart
        {"headers": {"x-session-id": "another"}},  # a session header: a slot of its own
    ],
    ids=["user", "model", "header"],
)
async def test_a_kept_body_resent_for_another_session_is_worked_in_the_worker(
    edge: EdgeUpstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, again: dict[str, Any]
) -> None:
    """The body memory had seen the bytes, but the rules of the session they now name know
    nothing of its messages: worked on the event loop, a 4 MB body held it for seconds."""
    async with in_process(protocol_settings(edge), str(tmp_path / "p.db")) as client:
        offload = client.app.state.services.engine.offload  # type: ignore[attr-defined]
        calls: list[str] = []
        monkeypatch.setattr(offload, "run", counting(offload, calls))
        body: dict[str, Any] = {"messages": conversation(200), "model": "gpt-4o"}  # SDK order
        headers = {"content-type": "application/json"}  # the session: the conversation's
        assert (await client.post("/v1/chat/completions", json=body, headers=headers)).is_success
        assert "Engine._run" in calls
        calls.clear()
        headers.update(again.get("headers", {}))
        body.update({k: v for k, v in again.items() if k != "headers"})
        response = await client.post("/v1/chat/completions", json=body, headers=headers)
        assert response.is_success
        assert "Engine._run" in calls, calls


async def test_a_session_whose_memos_were_let_go_is_worked_in_the_worker(
    edge: EdgeUpstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its body kept, its memos dropped (others' pushed them out): the rules start cold."""
    async with in_process(protocol_settings(edge), str(tmp_path / "p.db")) as client:
        engine = client.app.state.services.engine  # type: ignore[attr-defined]
        calls: list[str] = []
        monkeypatch.setattr(engine.offload, "run", counting(engine.offload, calls))
        raw = orjson.dumps({"model": "gpt-4o", "messages": conversation(200)})
        assert (await client.post("/v1/chat/completions", content=raw, headers=JSON)).is_success
        calls.clear()
        assert (await client.post("/v1/chat/completions", content=raw, headers=JSON)).is_success
        assert calls == []  # the same body again: known, inline
        assert engine.pipeline.memos is not None
        for key in list(engine.pipeline.memos._memos):
            engine.pipeline.memos.forget(key[0])
        assert (await client.post("/v1/chat/completions", content=raw, headers=JSON)).is_success
        assert "Engine._run" in calls, calls


async def test_claude_codes_body_resent_for_another_session_is_lowered_in_the_worker(
    edge: EdgeUpstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session Claude Code names in ``metadata``, after the messages: its lowering is not
    kept either, so the body counts as all new from the read on."""
    from proxy.protocols.anthropic import ANTHROPIC

    threads: list[str] = []
    lower = ANTHROPIC.lower

    def lowered(*args: Any) -> Any:
        threads.append(threading.current_thread().name)
        return lower(*args)

    monkeypatch.setattr(ANTHROPIC, "lower", lowered)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "fix the tests"}]
    for i in range(200):
        use = {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": "ls"}}
        out = {"type": "tool_result", "tool_use_id": f"t{i}", "content": f"{i} " * 400}
        messages += [{"role": "assistant", "content": [use]}, {"role": "user", "content": [out]}]

    def body(session: str) -> dict[str, Any]:
        user_id = orjson.dumps({"device_id": "d", "session_id": session}).decode()
        return {"model": "claude-x", "messages": messages, "max_tokens": 64,
                "metadata": {"user_id": user_id}}  # fmt: skip

    headers = {"content-type": "application/json"}
    async with in_process(protocol_settings(edge), str(tmp_path / "p.db")) as client:
        assert (await client.post("/v1/messages", json=body("one"), headers=headers)).is_success
        assert (await client.post("/v1/messages", json=body("one"), headers=headers)).is_success
        assert (await client.post("/v1/messages", json=body("two"), headers=headers)).is_success
    worker = [name.startswith("ctxproxy-body") for name in threads]
    assert worker == [True, False, True], threads  # new; the same session's again; another's


async def test_a_next_request_bringing_a_long_command_is_worked_in_the_worker(
    edge: EdgeUpstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A few KiB of new body, but of shell commands, which cost the rules ~10× a byte of
    output (``COMMAND_WORK``): a 45 KiB line of `mv` held the loop 0.2–0.6 s inline."""
    async with in_process(protocol_settings(edge), str(tmp_path / "p.db")) as client:
        offload = client.app.state.services.engine.offload  # type: ignore[attr-defined]
        calls: list[str] = []
        monkeypatch.setattr(offload, "run", counting(offload, calls))
        messages = conversation(20)
        first = orjson.dumps({"model": "gpt-4o", "messages": messages})
        assert (await client.post("/v1/chat/completions", content=first, headers=JSON)).is_success
        line = "mv a b && mv b a && " * 400  # 8 KB: under the threshold as bytes
        for command, worked in (("ls src", False), (line, True)):
            calls.clear()
            messages = [*messages, assistant(None, shell("call_long", command))]
            messages.append(result("call_long", "ok"))
            body = orjson.dumps({"model": "gpt-4o", "messages": messages})
            assert (
                await client.post("/v1/chat/completions", content=body, headers=JSON)
            ).is_success
            assert ("Engine._run" in calls) is worked, (command[:20], calls)


async def test_a_first_request_with_commands_far_back_is_worked_in_the_worker(
    edge: EdgeUpstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session's first body, under the threshold as bytes, whose commands lie behind many
    short messages: all of it is new, so every command counts (behind 70 one-word messages,
    50 KB of `mv` lines ran on the loop, 0.26 s)."""
    async with in_process(protocol_settings(edge), str(tmp_path / "p.db")) as client:
        offload = client.app.state.services.engine.offload  # type: ignore[attr-defined]
        calls: list[str] = []
        monkeypatch.setattr(offload, "run", counting(offload, calls))
        messages = [system("You are a coding agent."), user("tidy up")]
        for i in range(8):
            cid = f"call_{i}"
            messages += [assistant(None, shell(cid, f"mv a{i} b{i} && " * 60)), result(cid, "")]
        messages += [user("ok") if i % 2 else assistant("ok") for i in range(80)]
        body = orjson.dumps({"model": "gpt-4o", "messages": messages})
        assert len(body) < 64 * 1024
        assert (await client.post("/v1/chat/completions", content=body, headers=JSON)).is_success
        assert "Engine._run" in calls


@pytest.mark.parametrize("path", ["/v1/messages/count_tokens", "/v1beta/models/m:countTokens"])
async def test_a_count_of_a_body_of_commands_is_worked_in_the_worker(
    edge: EdgeUpstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """A count runs the rules on what would be forwarded; its body, under the threshold as
    bytes, of shell commands (``COMMAND_WORK`` a byte) ran on the loop: a 38 KB body of `mv`
    lines held it 0.26–0.36 s for every other tenant, each time its text changed, where the
    same body as a request went to the worker."""
    async with in_process(protocol_settings(edge), str(tmp_path / "p.db")) as client:
        offload = client.app.state.services.engine.offload  # type: ignore[attr-defined]
        calls: list[str] = []
        monkeypatch.setattr(offload, "run", counting(offload, calls))
        if "countTokens" in path:
            contents: list[dict[str, Any]] = []
            for i in range(8):
                call = {"name": "run", "args": {"command": f"mv a{i} b{i} && " * 350}}
                contents += [{"role": "model", "parts": [{"functionCall": call}]}]
                answer = {"name": "run", "response": {"output": ""}}
                contents += [{"role": "user", "parts": [{"functionResponse": answer}]}]
            contents.append({"role": "user", "parts": [{"text": "go"}]})
            body = orjson.dumps({"contents": contents})
            headers = {"content-type": "application/json", "x-goog-api-key": "k"}
        else:
            messages: list[dict[str, Any]] = [{"role": "user", "content": "tidy up"}]
            for i in range(8):
                use = {"type": "tool_use", "id": f"toolu_{i}", "name": "Bash",
                       "input": {"command": f"mv a{i} b{i} && " * 350}}  # fmt: skip
                done = {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": ""}
                messages += [{"role": "assistant", "content": [use]}]
                messages += [{"role": "user", "content": [done]}]
            messages.append({"role": "user", "content": "go"})
            body = orjson.dumps({"model": "claude-sonnet-4-5", "messages": messages})
            headers = JSON
        assert len(body) < 64 * 1024
        await client.post(path, content=body, headers=headers)
        assert "Engine._run" in calls, calls
