"""The bytes written for each message (the runner's records, the adapters' kept lowerings) hold
just their bytes: orjson's output keeps its buffer's spare room, 4 KiB for a short message, so a
request of 20,000 short messages held 80 MiB of it at once (most of the "90–120× the body")."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from proxy.protocols.prefix import message_bytes
from proxy.rewrite.recall import serialise


def _written(messages: list[dict[str, Any]]) -> Sequence[Any]:
    return serialise(messages, None)[1]


def _kept(messages: list[dict[str, Any]]) -> Sequence[Any]:
    return message_bytes(messages, 1 << 20)


@pytest.mark.parametrize("write", [_written, _kept])
def test_each_message_s_bytes_take_their_size(write: Callable[..., Sequence[Any]]) -> None:
    messages = [{"role": "user", "content": f"turn {i}"} for i in range(5_000)]
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        datas = write(messages)
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    size = sum(len(d) for d in datas if d is not None)
    assert held < 3 * size + 100_000, f"{held / len(messages):.0f} bytes a message"
