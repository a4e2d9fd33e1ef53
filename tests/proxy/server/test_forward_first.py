"""The upstream call starts before the rewrite is finished: the session's state is saved and the
request noted for the cache attribution while the upstream reads the request. The session stays
held until then, and is let go however the request ends."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.rewrite.engine import Engine
from tests.conftest import in_process, log_rows, proxy_settings
from tests.support.asgi import chat_scope
from tests.support.factories import request, user
from tests.support.fake_upstream import FakeUpstream

JSON = {"content-type": "application/json", "x-session-id": "ff"}


def body(text: str) -> bytes:
    return orjson.dumps(request(user(text)))


async def test_state_is_saved_while_the_upstream_reads_the_request(
    tmp_path: Path, fake_upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the old order (save, then forward) the upstream has seen nothing when the save runs."""
    seen_first: list[bool] = []
    finish = Engine._finish

    async def watched(self: Engine, *args: Any) -> Any:
        deadline = time.monotonic() + 5
        while not fake_upstream.requests and time.monotonic() < deadline:
            await asyncio.sleep(0.002)
        seen_first.append(bool(fake_upstream.requests))
        return await finish(self, *args)

    monkeypatch.setattr(Engine, "_finish", watched)
    async with in_process(proxy_settings(fake_upstream.base_url), str(tmp_path / "db")) as client:
        r = await client.post("/v1/chat/completions", content=body("hi"), headers=JSON)
        assert r.status_code == 200
        assert seen_first == [True]
        store = client.app.state.services.store  # type: ignore[attr-defined]
        state, _ = await store.load_state("anonymous/ff")
        assert state.data  # saved all the same, before the answer came back
        row = (await log_rows(client))[0]
        assert row["status"] == 200 and row["cache"]  # the attribution's line too


async def test_a_failure_before_the_upstream_call_lets_the_session_go(
    tmp_path: Path, fake_upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error between the rewrite and the upstream call (here one no error answer catches): the
    state is left as it was (the request was never forwarded), and the session's next request is
    not left waiting for its hold."""
    import proxy.server.handler as handler_mod

    real = handler_mod.ask_diagnosis
    calls = {"n": 0}

    def failing_once(*args: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("boom")
        return real(*args)

    monkeypatch.setattr(handler_mod, "ask_diagnosis", failing_once)
    async with in_process(proxy_settings(fake_upstream.base_url), str(tmp_path / "db")) as client:
        with pytest.raises(RuntimeError, match="boom"):  # outside the handler's error answers
            await client.post("/v1/chat/completions", content=body("one"), headers=JSON)
        assert not fake_upstream.requests
        store = client.app.state.services.store  # type: ignore[attr-defined]
        state, _ = await store.load_state("anonymous/ff")
        assert not state.data
        post = client.post("/v1/chat/completions", content=body("two"), headers=JSON)
        second = await asyncio.wait_for(post, 10)
        assert second.status_code == 200 and len(fake_upstream.requests) == 1


async def test_a_failed_save_still_relays_the_answer_and_lets_the_session_go(
    tmp_path: Path, fake_upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The upstream has the request by then: its answer is the client's, the failure is logged,
    and the session is not left held."""
    finish = Engine._finish
    calls = {"n": 0}

    async def failing_once(self: Engine, *args: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("the store is gone")
        return await finish(self, *args)

    monkeypatch.setattr(Engine, "_finish", failing_once)
    async with in_process(proxy_settings(fake_upstream.base_url), str(tmp_path / "db")) as client:
        first = await client.post("/v1/chat/completions", content=body("one"), headers=JSON)
        assert first.status_code == 200 and len(fake_upstream.requests) == 1
        post = client.post("/v1/chat/completions", content=body("two"), headers=JSON)
        second = await asyncio.wait_for(post, 10)
        assert second.status_code == 200
        rows = await log_rows(client)
        assert [r["status"] for r in rows] == [200, 200]
        # the failed one has no cache line (nothing noted to attribute), the next one has
        assert sorted(r.get("cache") is None for r in rows) == [False, True]


async def test_the_request_body_is_written_before_the_state_is_saved(
    tmp_path: Path, fake_upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The HTTP client writes a body in a task of its own: the finish waits for it to run, so the
    body is on the wire first (an upgrade of the client that changes this fails here)."""
    from aiohttp.client_reqrep import ClientRequest

    events: list[str] = []
    write_bytes, finish = ClientRequest.write_bytes, Engine._finish

    async def written(self: ClientRequest, *args: Any, **kwargs: Any) -> None:
        await write_bytes(self, *args, **kwargs)
        events.append("body")

    async def finishing(self: Engine, *args: Any) -> Any:
        events.append("finish")
        return await finish(self, *args)

    monkeypatch.setattr(ClientRequest, "write_bytes", written)
    monkeypatch.setattr(Engine, "_finish", finishing)
    async with in_process(proxy_settings(fake_upstream.base_url), str(tmp_path / "db")) as client:
        for text in ("one", "two", "three"):
            r = await client.post("/v1/chat/completions", content=body(text), headers=JSON)
            assert r.status_code == 200
    # the first opens the connection, during which the state is saved; the pooled ones write
    # their body first
    assert sorted(events[:2]) == ["body", "finish"]
    assert events[2:] == ["body", "finish", "body", "finish"]


async def test_a_panic_in_the_finish_still_relays_the_answer(
    tmp_path: Path, fake_upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A native panic (no ``Exception``) in the bookkeeping after the upstream has the request:
    the answer is the client's, not a 500 that a retry would bill twice."""
    from tests.proxy.server.test_tokenizer_failure import Panic

    async with in_process(proxy_settings(fake_upstream.base_url), str(tmp_path / "db")) as client:
        ledger = client.app.state.services.engine.ledger  # type: ignore[attr-defined]

        def begin(*args: Any) -> Any:
            raise Panic("called `Result::unwrap()` on an `Err` value")

        monkeypatch.setattr(ledger, "begin", begin)
        r = await client.post("/v1/chat/completions", content=body("hi"), headers=JSON)
        assert r.status_code == 200 and len(fake_upstream.requests) == 1
        assert (await log_rows(client))[0]["status"] == 200


async def test_a_client_gone_during_the_finish_closes_the_upstream_stream(
    tmp_path: Path, fake_upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The upstream's stream is back before the finish is done, and the client leaves meanwhile:
    the stream is closed (its connection released, a generating upstream stopped)."""
    finish = Engine._finish

    async def slow(self: Engine, *args: Any) -> Any:  # a save queued behind another heavy run
        await asyncio.sleep(0.5)
        return await finish(self, *args)

    monkeypatch.setattr(Engine, "_finish", slow)
    raw = orjson.dumps(request(user("hi"), stream=True))
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": raw, "more_body": False}
        await asyncio.sleep(0.1)  # the client leaves while the finish runs
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        pass

    closed: list[bool] = []
    async with in_process(proxy_settings(fake_upstream.base_url), str(tmp_path / "db")) as client:
        handler = client.app.state.handlers["chat"]  # type: ignore[attr-defined]
        real = handler.wire.forward

        async def forward(call: Any, forwarded: Any, payload: Any) -> Any:
            response = await real(call, forwarded, payload)
            inner = response.close
            if inner is not None:

                async def close() -> None:
                    closed.append(True)
                    await inner()

                response.close = close
            return response

        handler.wire = dataclasses.replace(handler.wire, forward=forward)
        fake_upstream.script.hold_after_first_chunk = True
        scope = chat_scope(client.app)  # type: ignore[attr-defined]
        scope["headers"] = [*scope["headers"], (b"x-session-id", b"gone")]
        try:
            await client.app(scope, receive, send)  # type: ignore[attr-defined]
        finally:
            fake_upstream.release.set()
    assert closed == [True]


async def test_rewrite_returns_with_the_state_saved(
    tmp_path: Path, fake_upstream: FakeUpstream
) -> None:
    """``Engine.rewrite`` (the CLI's, the overflow rescue's) finishes before it returns."""
    async with in_process(proxy_settings(fake_upstream.base_url), str(tmp_path / "db")) as client:
        services = client.app.state.services  # type: ignore[attr-defined]
        done = await services.engine.rewrite(request(user("hi")), {}, now=1000.0, session_id="cli")
        assert done.cache is not None
        state, _ = await services.store.load_state("anonymous/cli")
        assert state.data
        again = await asyncio.wait_for(
            services.engine.rewrite(request(user("hi")), {}, now=1001.0, session_id="cli"), 10
        )
        assert again.cache is not None


async def test_a_refused_request_whose_client_goes_while_it_saves_is_still_put_back() -> None:
    """The upstream refused at once, while the request's state was still being saved: the
    client going then (its task cancelled) left the save to end and the state it saved stood,
    never put back."""
    import contextlib

    from proxy.rewrite.prepared import Prepared
    from proxy.rewrite.rewritten import Rewritten
    from proxy.server.forward_first import refused

    saving = asyncio.Event()
    saved = asyncio.Event()

    async def finish() -> Any:
        saving.set()
        await asyncio.sleep(0.05)  # a heavy request's state redacted in the worker
        saved.set()
        return None

    taken_back: list[Rewritten] = []

    class _Engine:
        async def take_back(self, first: Rewritten, last: Rewritten | None = None) -> bool:
            taken_back.append(first)
            return True

    rewritten = Rewritten({}, {}, "p/s", None)  # type: ignore[typeddict-item]
    prepared = Prepared(rewritten, finish, contextlib.AsyncExitStack())
    prepared.finish_soon()  # as just before the upstream call
    refusing = asyncio.ensure_future(refused(_Engine(), prepared, "r1"))  # type: ignore[arg-type]
    await saving.wait()
    refusing.cancel()  # the client went away
    with contextlib.suppress(asyncio.CancelledError):
        await refusing
    await asyncio.wait_for(saved.wait(), 5)
    for _ in range(20):
        await asyncio.sleep(0.01)
    assert len(taken_back) == 1
