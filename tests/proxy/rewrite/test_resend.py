"""A request sent again as it was (a client's retry after a 429, a 5xx or a timeout) is forwarded
as its first attempt was: prune's memory, saved while the upstream read the first attempt,
counted it as one more request (its growth, a warm look's figures, the block inject placed at
its tail), and a retry could be compacted where the first attempt was not, re-billing the prompt
from the cut on."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.rewrite.engine import Engine
from proxy.settings import load_settings
from proxy.store.sqlite import SQLiteStore
from tests.support.traces import iter_conversations, request_prefixes

CONVERSATIONS = ((24, 12000), (5, 12000), (60, 12000), (10, 8000))  # where retries had differed


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    kept = SQLiteStore(str(tmp_path / "db"))
    await kept.open()
    yield kept
    await kept.close()


@pytest.mark.parametrize(("index", "budget"), CONVERSATIONS)
async def test_every_retry_of_a_corpus_session_is_forwarded_as_its_first_attempt(
    traces_path: Path, store: SQLiteStore, index: int, budget: int
) -> None:
    conversation = next(itertools.islice(iter_conversations(), index, index + 1))
    engine = Engine(load_settings(None), store, budget_override=budget, strict=True)
    try:
        compactions = 0
        for i, messages in enumerate(
            itertools.islice(request_prefixes(conversation["messages"]), 60)
        ):
            body = {"model": "gpt-4o", "messages": messages}
            first = await engine.rewrite(body, {}, 1000.0 + 15 * i, session_id="s")
            again = await engine.rewrite(body, {}, 1002.0 + 15 * i, session_id="s")
            assert orjson.dumps(again.body) == orjson.dumps(first.body), i
            compactions += bool(first.report["prune"].get("compacted"))
        assert compactions  # the schedule did cut in these sessions
    finally:
        engine.close()



async def _plain_and_retried(
    folder: Path, index: int, budget: int, retry: Callable[[dict[str, Any]], bool], requests: int
) -> int:
    """A corpus session replayed by two engines, one of them sent each request ``retry`` picks
    (by its report) again: every request is forwarded the same by both; how many were retried."""
    conversation = next(itertools.islice(iter_conversations(), index, index + 1))
    stores = [SQLiteStore(str(folder / name)) for name in ("plain", "retried")]
    for kept in stores:
        await kept.open()
    plain, retried = (
        Engine(load_settings(None), kept, budget_override=budget, strict=True) for kept in stores
    )
    retries = 0
    try:
        prefixes = request_prefixes(conversation["messages"])
        for i, messages in enumerate(itertools.islice(prefixes, requests)):
            body = {"model": "gpt-4o", "messages": messages}
            one = await plain.rewrite(body, {}, 1000.0 + 15 * i, session_id="s")
            other = await retried.rewrite(body, {}, 1000.0 + 15 * i, session_id="s")
            assert orjson.dumps(other.body) == orjson.dumps(one.body), i
            if retry(dict(other.report)):
                again = await retried.rewrite(body, {}, 1002.0 + 15 * i, session_id="s")
                assert orjson.dumps(again.body) == orjson.dumps(other.body), i
                retries += 1
    finally:
        plain.close()
        retried.close()
        for kept in stores:
            await kept.close()
    return retries


@pytest.mark.parametrize(("index", "budget"), CONVERSATIONS[:3])
async def test_a_retry_of_a_compacting_request_leaves_the_session_as_it_was(
    traces_path: Path, tmp_path: Path, index: int, budget: int
) -> None:
    """A retry after a request that compacted is not one more request of the session: the
    session goes on as it would have without it (the spacing after the cut is not spent, so
    no later request is cut sooner, forwarded otherwise)."""
    compacted = await _plain_and_retried(
        tmp_path, index, budget, lambda report: bool(report["prune"].get("compacted")), 60
    )
    assert compacted  # the schedule did cut in these sessions


@pytest.mark.parametrize(("index", "budget"), [(22, 6000), (29, 6000)])
async def test_a_retry_of_any_request_leaves_the_session_as_it_was(
    traces_path: Path, tmp_path: Path, index: int, budget: int
) -> None:
    """Every request sent twice: the session goes on as it would have with each sent once. A
    retry of a request that looked at what a warm cut could free saved its memory without that
    look, and the session's next cut came at another request (django-11797, request 14)."""
    assert await _plain_and_retried(tmp_path, index, budget, lambda report: True, 30) == 30
