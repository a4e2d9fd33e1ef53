"""``Engine.take_back``: a refused request's state put back, never an accepted one's lost."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from proxy.rewrite.engine import Engine
from tests.support.factories import assistant, request, result, shell, user
from tests.support.strict_engine import strict_engine

FIRST = [user("fix the tests"), assistant(None, shell("c1", "cat src/app.py"))]
FIRST += [result("c1", "def main():\n    return 1\n")]
REFUSED = [*FIRST, assistant(None, shell("c2", "cat src/db/models.py"))]
REFUSED += [result("c2", "class User:\n    pass\n"), user("now open docs/notes.md")]
OTHER = [*FIRST, assistant(None, shell("c3", "cat src/web/routes.py"))]
OTHER += [result("c3", "ROUTES = []\n"), user("now open src/web/routes.py")]


async def _stored(engine: Engine, sid: str) -> Any:
    state, _ = await engine.store.load_state(sid)
    return state.data


def test_a_rescue_retry_refused_keeps_an_accepted_request_saved_in_between(
    tmp_path: Path,
) -> None:
    """The overflow rescue's retry ran on what a concurrent request of the session saved
    meanwhile: putting the refused request back restores that, not the state before both."""

    async def go() -> None:
        async with strict_engine(tmp_path) as engine:
            sid = "take-back"
            await engine.rewrite(request(*FIRST), {}, now=1.0, session_id=sid)
            first = await engine.rewrite(request(*REFUSED), {}, now=2.0, session_id=sid)
            accepted = await engine.rewrite(request(*OTHER), {}, now=3.0, session_id=sid)
            assert accepted.saved is not None and accepted.saved.state is not None
            kept = await _stored(engine, accepted.session_id)
            retry = await engine.rewrite(
                first.body, {}, now=4.0, session_id=sid, budget=200
            )  # the rescue rewrites what it forwarded, under the window the upstream stated
            assert await engine.take_back(first, retry)
            assert await _stored(engine, accepted.session_id) == kept

    asyncio.run(go())


def test_two_refused_requests_put_back_in_either_order_leave_the_state_before_both(
    tmp_path: Path,
) -> None:
    """Two requests of a session refused (a rate limit on both): the second ran on what the
    first saved, so the first's state cannot go back while the second's stands; once the second
    is put back, what it ran on is the first's refused state, and the state before both goes back
    instead (the next request runs as if neither had been sent)."""

    async def go() -> None:
        async with strict_engine(tmp_path) as engine:
            sid = "both-refused"
            done = await engine.rewrite(request(*FIRST), {}, now=1.0, session_id=sid)
            kept = await _stored(engine, done.session_id)
            first = await engine.rewrite(request(*REFUSED), {}, now=2.0, session_id=sid)
            second = await engine.rewrite(request(*OTHER), {}, now=3.0, session_id=sid)
            assert not await engine.take_back(first)  # the second's save stands meanwhile
            assert await engine.take_back(second)
            assert await _stored(engine, done.session_id) == kept

    asyncio.run(go())


def test_a_refused_request_of_a_sub_agent_keeps_its_parent(tmp_path: Path) -> None:
    """Put back, a session created under a parent is still that parent's: its next request
    reads the parent's entities as before the refusal."""

    async def go() -> None:
        async with strict_engine(tmp_path) as engine:
            await engine.rewrite(request(*FIRST), {}, now=1.0, session_id="lead")
            kw: dict[str, Any] = {"session_id": "worker", "parent_session_id": "lead"}
            done = await engine.rewrite(request(*FIRST), {}, now=2.0, **kw)
            assert done.parent_session_id is not None
            refused = await engine.rewrite(request(*REFUSED), {}, now=3.0, **kw)
            assert await engine.take_back(refused)
            _, parent = await engine.store.load_state(done.session_id)
            assert parent == done.parent_session_id
            again = await engine.rewrite(request(*REFUSED), {}, now=4.0, **kw)
            assert again.parent_session_id == done.parent_session_id

    asyncio.run(go())
