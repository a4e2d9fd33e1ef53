"""The SQLite store's session hold (``SQLiteStore.session``): its lock is let go however the hold
ends, a failed load included, and the state it hands over is the one loaded."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from proxy.store.sqlite import SQLiteStore
from rules.base import SessionState


async def test_a_failed_load_lets_the_session_go(tmp_path: Path, monkeypatch) -> None:
    store = SQLiteStore(str(tmp_path / "s.db"), batch_window_s=0.0)
    await store.open()
    try:

        async def broken(session_id: str) -> tuple[SessionState, str | None]:
            raise OSError("disk gone")

        monkeypatch.setattr(store, "load_state", broken)
        with pytest.raises(OSError):
            async with store.session("s"):
                pass
        assert store.locks.users("s") == 0
        monkeypatch.undo()
        async with asyncio.timeout(1), store.session("s") as held:  # not held by the failure
            assert held.state.data == {}
            assert store.locks.users("s") == 1
        assert store.locks.users("s") == 0
    finally:
        await store.close()


async def test_a_failure_inside_the_hold_lets_it_go_and_is_raised(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "s.db"), batch_window_s=0.0)
    await store.open()
    try:
        with pytest.raises(KeyError):
            async with store.session("s"):
                raise KeyError("a rule failed")
        assert store.locks.users("s") == 0
    finally:
        await store.close()
