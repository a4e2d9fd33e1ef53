"""Engine and store under concurrency: one session's requests never overwrite each other's state,
a huge request runs off the event loop with the same result, a locked database delays writes
instead of losing them, and the token cache never pins large texts."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path

from proxy.rewrite.engine import OFFLOAD_BYTES, Engine
from proxy.settings import load_settings
from proxy.store.sqlite import Store
from proxy.tokens import TiktokenCounter
from tests.support.factories import assistant, request, result, shell, user


def mkdir_request(folder: str) -> dict:
    return request(
        user("make a folder"),
        assistant(None, shell("c1", f"mkdir {folder}")),
        result("c1", "[Command finished with exit code 0]"),
    )


async def test_parallel_requests_of_one_session_keep_both_updates(tmp_path: Path) -> None:
    """Two conversations under one name at once: both branches are kept (one as the head, the
    other as a tip of its lineage), neither update is lost."""
    store = Store(str(tmp_path / "db"))
    await store.open()
    try:
        engine = Engine(load_settings(None), store, strict=True)
        await asyncio.gather(
            engine.rewrite(mkdir_request("/tmp/alpha"), {}, now=100.0, session_id="s"),
            engine.rewrite(mkdir_request("/tmp/beta"), {}, now=100.0, session_id="s"),
        )
        state, _ = await store.load_state("anonymous/s")
        branches = [state.data, *(tip[2] for tip in state.get("_lineage")["tips"])]
        assert len(branches) == 2
        paths = {e["path"] for branch in branches for e in branch["entities"]}
        assert paths == {"/tmp/alpha", "/tmp/beta"}
        assert len(store.locks) == 0  # idle sessions leave no lock behind
    finally:
        await store.close()


async def test_offloaded_pipeline_gives_the_same_result(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "db"))
    await store.open()
    try:
        engine = Engine(load_settings(None), store, strict=True)
        body = mkdir_request("/tmp/x")
        inline = await engine.rewrite(body, {}, now=1.0, session_id="a")
        threaded = await engine.rewrite(body, {}, now=1.0, session_id="b", raw_size=OFFLOAD_BYTES)
        assert threaded.body == inline.body
        assert threaded.report["references"] == inline.report["references"]
    finally:
        await store.close()


async def test_a_locked_database_delays_writes_without_losing_them(tmp_path: Path) -> None:
    path = str(tmp_path / "db")
    store = Store(path)
    await store.open()
    try:
        other = sqlite3.connect(path, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock for 2.5 s
        release = threading.Timer(2.5, other.commit)
        release.start()
        started = time.monotonic()
        await store.insert_request({"id": "r1", "created_at": 1.0, "model": "m"})
        # a state lookup of an unknown session is not stuck behind the locked writer
        await store.load_state("fresh-session")
        assert time.monotonic() - started < 1.0
        await store.flush()
        release.join()
        other.close()
        assert store.write_errors == 0
        assert (await store.get_request("r1"))["model"] == "m"
    finally:
        await store.close()


def test_token_cache_keys_large_texts_by_digest_and_is_bounded() -> None:
    counter = TiktokenCounter("o200k_base", cache_chars=10_000)
    big = "word " * 60_000
    assert counter.count_text(big) == counter.count_text(big) > 0
    # the 300 kB text is not a key (each key: the principal's scope, then the text or digest)
    assert all(isinstance(k, bytes) for _, k in counter._cache)
    for i in range(2_000):
        counter.count_text(f"short text number {i}")
    assert counter._held <= 10_000
