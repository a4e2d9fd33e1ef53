"""Which of provider_refs' marks a body holds is read a MiB at a time, the event loop let go
between (31 MiB scanned once for each of some twenty marks held it half a second), and a mark
across two windows is still found."""

from __future__ import annotations

import asyncio

from proxy.server.provider_files import marks_in, may_name_files, may_name_items


async def test_a_mark_across_a_window_edge_is_found() -> None:
    edge = 1 << 20
    raw = b"a" * (edge - 3) + b'"file_id": "f"' + b"b" * (2 * edge)
    found = await marks_in(raw)
    assert found is not None and b"file_id" in found
    assert may_name_files(found) and not may_name_items(found)
    assert await marks_in(None) is None and may_name_files(None)


async def test_a_large_body_lets_the_loop_turn_while_it_is_scanned() -> None:
    turns = 0
    done = False

    async def ticker() -> None:
        nonlocal turns
        while not done:
            turns += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    before = turns
    found = await marks_in(b"x" * (32 << 20))
    done = True
    await task
    assert found == frozenset()
    assert turns - before >= 16  # the loop served others between the windows
