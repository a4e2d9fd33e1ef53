"""Per-body work that would hold the event loop runs in one worker thread instead: parsing and
validating a body, lowering it to the chat view and lifting the rules' result back, the
pipeline, counting a body's tokens. The loop keeps serving every other request (and
``/healthz``) meanwhile; the interpreter lock is handed over every few milliseconds, and the
single C calls on a body (a parse, a write) are bounded by the body limits
(``limits.max_json_containers``, ``limits.max_items``).

What counts is the work a request brings that nothing cached already did: the bytes of its body
that the session's previous request did not have (``BodyMemory.read`` says how many) plus a
little for each item, which every request walks. Below ``OFFLOAD_BYTES`` of it a request runs
inline: an agent's next request, a message or two longer than its last, costs a millisecond,
less than a thread hop and the lock's handovers would add. One worker: heavy requests queue
behind one another rather than each holding its body's working memory at once."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

# Work from this much runs in the worker: a session's first request of this many bytes takes
# ~10–40 ms of rules (the proxy's memos know nothing of it yet); an agent's next request, whose
# new part is a few kilobytes, stays inline.
OFFLOAD_BYTES = 64 * 1024
# Each item (message, input item) counts as this many bytes of work: every request walks all of
# them (~3 µs each when the session's memos know them).
ITEM_WORK_BYTES = 32


def items_of(body: Any) -> int:
    """How many messages or input items a body holds (its conversation's array)."""
    if not isinstance(body, dict):
        return 0
    for key in ("messages", "input", "contents"):
        value = body.get(key)
        if isinstance(value, list):
            return len(value)
    return 0


class Offload:
    """The worker thread, and which requests go to it."""

    def __init__(self, threshold: int = OFFLOAD_BYTES) -> None:
        self.threshold = threshold
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ctxproxy-body")

    def heavy(self, fresh_bytes: int, items: int = 0) -> bool:
        """Whether a request with this much new body and this many items goes to the worker."""
        return fresh_bytes + ITEM_WORK_BYTES * items >= self.threshold

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in the worker (queued behind the heavy requests before it), in a copy of
        the caller's context: the request's memo scope (``rules.memo_scope``) goes with it."""
        loop = asyncio.get_running_loop()
        call = contextvars.copy_context().run
        return await loop.run_in_executor(self._executor, call, fn, *args)

    async def maybe(self, heavy: bool, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in the worker when ``heavy``, else here and now."""
        if heavy:
            return await self.run(fn, *args)
        return fn(*args)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
