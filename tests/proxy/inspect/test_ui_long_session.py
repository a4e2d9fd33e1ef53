"""A session of more requests than its /ui page charts (``SESSION_TURNS``, the newest): the page
says how many the session has and how many it shows, and numbers each turn as the session's."""

from __future__ import annotations

import html
import re
import sqlite3
from pathlib import Path

import pytest

from proxy.inspect import ui
from proxy.store.sqlite import Store
from tests.conftest import in_process, proxy_settings

SESSION = "anonymous/long-run"


async def logged(db: str, n: int) -> None:
    store = Store(db)
    await store.open()  # the tables
    await store.close()
    with sqlite3.connect(db) as con:
        con.executemany(
            "INSERT INTO requests (id, created_at, session_id, model, status, principal, "
            "tokens_before, tokens_after) VALUES (?, ?, ?, 'gpt-4o', 200, 'anonymous', ?, ?)",
            [(f"req_{i:06d}", 1_700_000_000.0 + i, SESSION, 100 + i, 90 + i) for i in range(n)],
        )


async def test_a_session_longer_than_the_page_says_so(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("CTXPROXY_ADMIN_KEY", raising=False)
    monkeypatch.setattr(ui, "SESSION_TURNS", 40)
    db = str(tmp_path / "log.db")
    await logged(db, 43)
    async with in_process(proxy_settings("http://upstream.test/v1"), db) as client:
        page = html.unescape((await client.get(f"/ui/sessions/{SESSION}")).text)
        index = html.unescape((await client.get("/ui")).text)
    assert re.search(r"43 requests \(the latest 40 shown\)", page), page
    turns = re.findall(r'<tr><td class="num">(\d+)</td><td><a href="/ui/requests/(req_\d+)"', page)
    assert turns[0] == ("4", "req_000003") and turns[-1] == ("43", "req_000042")
    assert re.search(r">43</td>", index)  # the request list's count of the session agrees


@pytest.mark.parametrize("n", [1, 40])
async def test_a_session_the_page_holds_whole(tmp_path: Path, monkeypatch, n: int) -> None:
    monkeypatch.delenv("CTXPROXY_ADMIN_KEY", raising=False)
    monkeypatch.setattr(ui, "SESSION_TURNS", 40)
    db = str(tmp_path / "log.db")
    await logged(db, n)
    async with in_process(proxy_settings("http://upstream.test/v1"), db) as client:
        page = html.unescape((await client.get(f"/ui/sessions/{SESSION}")).text)
    assert f"{n} requests" in page and "shown)" not in page
    turns = re.findall(r'<tr><td class="num">(\d+)</td><td><a href="/ui/requests/', page)
    assert turns[0] == "1" and turns[-1] == str(n)
