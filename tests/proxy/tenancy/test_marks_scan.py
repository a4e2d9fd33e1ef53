"""Which of provider_refs' marks a body holds is read a MiB at a time, the event loop let go
between (31 MiB scanned once for each of some twenty marks held it half a second), and a mark
across two windows is still found."""

from __future__ import annotations

from proxy.server.provider_files import marks_in, may_name_files, may_name_items
from tests.support.loop_turns import counted_turns


async def test_a_mark_across_a_window_edge_is_found() -> None:
    edge = 1 << 20
    raw = b"a" * (edge - 3) + b'"file_id": "f"' + b"b" * (2 * edge)
    found = await marks_in(raw)
    assert found is not None and b"file_id" in found
    assert may_name_files(found) and not may_name_items(found)
    assert await marks_in(None) is None and may_name_files(None)


async def test_a_large_body_lets_the_loop_turn_while_it_is_scanned() -> None:
    async with counted_turns() as turns:
        found = await marks_in(b"x" * (32 << 20))
    assert found == frozenset()
    assert turns.count >= 16  # the loop served others between the windows
