"""A request the upstream refuses (a 429 to retry, a 400) leaves its session's state as it was:
the state was saved while the upstream read the request, whatever it answered, so a refused
attempt's entities and working set were the state its retry, or the next request, ran on."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from proxy.principals import scoped
from tests.proxy.tenancy.serving import passthrough_served
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import assistant, chat_completion, request, result, shell, user

KEY = "sk-tenant-a"
SESSION = "refused-state"


@pytest.fixture
def served(tmp_path: Path, upstream: EdgeUpstream) -> Iterator[tuple[str, Any]]:
    with passthrough_served(tmp_path, upstream) as served:
        yield served


def post(base: str, body: dict[str, Any]) -> httpx.Response:
    headers = {"authorization": f"Bearer {KEY}", "x-session-id": SESSION}
    headers["content-type"] = "application/json"
    url = base + "/v1/chat/completions"
    return httpx.post(url, content=orjson.dumps(body), headers=headers, timeout=60)


def stored(app: Any) -> tuple[dict[str, Any], Any]:
    """The session's stored state, and what the cache ledger noted as its previous request."""
    services = app.state.services
    principal = services.principals.of({"authorization": f"Bearer {KEY}"})
    sid = scoped(principal, SESSION)
    state, _ = asyncio.run(services.store.load_state(sid))
    noted = services.engine.ledger._sessions.peek(sid)
    return orjson.loads(orjson.dumps(state.data)), None if noted is None else noted.sent


FIRST = [user("fix the tests"), assistant(None, shell("c1", "cat src/app.py"))]
FIRST += [result("c1", "def main():\n    return 1\n")]
SECOND = [*FIRST, assistant(None, shell("c2", "cat src/db/models.py"))]
SECOND += [result("c2", "class User:\n    pass\n"), user("now open docs/notes.md")]


@pytest.mark.parametrize("status", [429, 400, 401])
def test_a_refused_request_leaves_the_sessions_state_as_it_was(
    served: tuple[str, Any], upstream: EdgeUpstream, status: int
) -> None:
    base, app = served
    upstream.reply = Reply.json(chat_completion("ok"))
    assert post(base, request(*FIRST)).status_code == 200
    before = stored(app)
    error = {"error": {"message": "slow down", "type": "rate_limit", "code": "rate_limited"}}
    upstream.reply = Reply.json(error, status)
    assert post(base, request(*SECOND)).status_code == status
    assert stored(app) == before
    upstream.reply = Reply.json(chat_completion("ok"))
    assert post(base, request(*SECOND)).status_code == 200  # the retry, accepted
    assert stored(app) != before


def test_a_request_no_upstream_answered_leaves_the_state_as_it_was(
    tmp_path: Path, upstream: EdgeUpstream
) -> None:
    """The upstream unreachable: the proxy's own 502, the request never taken."""
    from proxy.app import create_app
    from proxy.settings import settings_from_mapping
    from tests.support.live import serve_in_thread, stop

    settings = settings_from_mapping({
        "upstreams": [
            {"name": "down", "match": ["down-*"], "base_url": "http://127.0.0.1:9/v1"},
            {"name": "openai", "match": ["*"], "base_url": upstream.base_url},
        ],
        "auth": {"mode": "passthrough"},
    })  # fmt: skip
    app = create_app(settings, db_path=str(tmp_path / "db"))
    server, base = serve_in_thread(app)
    try:
        upstream.reply = Reply.json(chat_completion("ok"))
        assert post(base, request(*FIRST)).status_code == 200
        before = stored(app)
        answer = post(base, request(*SECOND, model="down-model"))
        assert answer.status_code in (502, 503, 504), answer.text
        assert stored(app) == before
    finally:
        stop(server)


def test_an_overflow_its_rescue_did_not_fit_leaves_the_state_as_it_was(
    served: tuple[str, Any], upstream: EdgeUpstream
) -> None:
    """The rescue's retry saved a state of its own: both are put back."""
    base, app = served
    upstream.reply = Reply.json(chat_completion("ok"))
    assert post(base, request(*FIRST)).status_code == 200
    before = stored(app)
    message = (
        "This model's maximum context length is 1500 tokens. However, your messages resulted "
        "in 5000 tokens. Please reduce the length of the messages."
    )
    error = {"message": message, "type": "invalid_request_error", "param": "messages"}
    upstream.reply = Reply.json({"error": {**error, "code": "context_length_exceeded"}}, 400)
    seen = len(upstream.seen)
    log = "\n".join(f"line {i}: test_{i} passed in 0.{i % 10}s" for i in range(600))
    longer = [*SECOND[:-1], assistant(None, shell("c3", "pytest -q")), result("c3", log)]
    assert post(base, request(*longer, user("go on"))).status_code == 400
    assert len(upstream.seen) == seen + 2  # retried once, compacted
    assert stored(app) == before


def test_a_request_refused_before_its_upstream_call_leaves_the_state_as_it_was(
    served: tuple[str, Any], upstream: EdgeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rewritten, then refused by the proxy itself before the upstream call was made."""
    from proxy.errors import BadRequest
    from proxy.server import handler

    base, app = served
    upstream.reply = Reply.json(chat_completion("ok"))
    assert post(base, request(*FIRST)).status_code == 200
    before, seen = stored(app), len(upstream.seen)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise BadRequest("refused before the upstream call")

    monkeypatch.setattr(handler, "bounded_report", refuse)
    assert post(base, request(*SECOND)).status_code == 400
    assert len(upstream.seen) == seen and stored(app) == before


def test_on_postgresql_a_refused_request_leaves_the_state_as_it_was(
    pg_server: Any, upstream: EdgeUpstream
) -> None:
    from proxy.app import create_app
    from tests.proxy.tenancy.serving import tenancy_settings
    from tests.support.live import serve_in_thread, stop

    url = pg_server.database()
    store = {"url": url, "pool_size": 4}
    app = create_app(tenancy_settings(upstream, "passthrough", None, store=store), db_path=url)
    server, base = serve_in_thread(app)
    try:
        upstream.reply = Reply.json(chat_completion("ok"))
        services = app.state.services
        sid = scoped(services.principals.of({"authorization": f"Bearer {KEY}"}), SESSION)
        assert post(base, request(*FIRST)).status_code == 200
        before = asyncio.run(_in_database(url, sid))
        upstream.reply = Reply.json({"error": {"message": "busy", "type": "overloaded"}}, 529)
        assert post(base, request(*SECOND)).status_code == 529
        assert asyncio.run(_in_database(url, sid)) == before
    finally:
        stop(server)


async def _in_database(url: str, sid: str) -> Any:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        return orjson.loads(await conn.fetchval("SELECT state FROM sessions WHERE id = $1", sid))
    finally:
        await conn.close()


def _refactor_lines() -> list[dict[str, Any]]:
    task = "Refactor:\n" + "\n".join(f"x_{i} = {i} * 17  # step {i}" for i in range(900))
    return [*SECOND, user(task)]


def _a_long_ask() -> list[dict[str, Any]]:
    ask = "now explain, step by step, " + " ".join(f"point {i} of the plan" for i in range(900))
    return [*SECOND[:-1], user(ask)]


@pytest.mark.parametrize("messages", [_refactor_lines, _a_long_ask])
def test_an_overflow_its_rescue_could_not_shrink_leaves_the_state_as_it_was(
    served: tuple[str, Any], upstream: EdgeUpstream, messages: Callable[[], list[dict[str, Any]]]
) -> None:
    """The rescue's rewrite under the stated window saved a state of its own, then found
    nothing to gain (its floor over the budget): no retry, the upstream's error answered, and
    neither the request's state nor the rescue's rewrite's is kept."""
    base, app = served
    upstream.reply = Reply.json(chat_completion("ok"))
    assert post(base, request(*FIRST)).status_code == 200
    before = stored(app)
    message = (
        "This model's maximum context length is 1500 tokens. However, your messages resulted "
        "in 5000 tokens. Please reduce the length of the messages."
    )
    error = {"message": message, "type": "invalid_request_error", "param": "messages"}
    upstream.reply = Reply.json({"error": {**error, "code": "context_length_exceeded"}}, 400)
    seen = len(upstream.seen)
    assert post(base, request(*messages())).status_code == 400
    assert len(upstream.seen) == seen + 1  # nothing the rescue could send
    assert stored(app) == before


def test_a_refused_request_of_a_state_stored_trimmed_leaves_it_as_it_was(
    served: tuple[str, Any], upstream: EdgeUpstream
) -> None:
    """A state over ``limits.max_state_bytes`` is stored without its largest namespaces, and
    the store then holds that trimmed copy, not the state saved: it is still the refused
    request's own, and is put back."""
    base, app = served
    store = app.state.services.store
    upstream.reply = Reply.json(chat_completion("ok"))
    assert post(base, request(*FIRST)).status_code == 200
    asyncio.run(asyncio.sleep(0.5))  # written
    full = len(orjson.dumps(stored(app)[0]))
    store.max_state_bytes = full - 1  # its largest namespace left out from now on
    before = stored(app)
    error = {"error": {"message": "slow down", "type": "rate_limit", "code": "rate_limited"}}
    upstream.reply = Reply.json(error, 429)
    upstream.reply.header_delay_s = 1.0  # the refused request's state written meanwhile
    assert post(base, request(*SECOND)).status_code == 429
    assert stored(app) == before


def test_what_counts_as_the_refused_requests_own_state() -> None:
    from proxy.rewrite.engine import _still_saved
    from rules.base import SessionState

    saved = SessionState({"_lineage": "l", "history": [1, 2], "working_set": {"goal": "g"}})
    assert _still_saved(saved, saved)
    assert _still_saved(SessionState(orjson.loads(orjson.dumps(saved.data))), saved)  # read back
    assert _still_saved(SessionState({"_lineage": "l", "working_set": {"goal": "g"}}), saved)
    assert not _still_saved(SessionState({"_lineage": "l", "history": [1, 2, 3]}), saved)
    assert not _still_saved(SessionState(), saved)  # pruned meanwhile: not brought back
