"""Per-body work that would hold the event loop runs in one worker thread instead: parsing and
validating a body, lowering it to the chat view and lifting the rules' result back, the
pipeline, counting a body's tokens. The loop keeps serving every other request (and
``/healthz``) meanwhile; the interpreter lock is handed over every few milliseconds, and the
single C calls on a body (a parse, a write) are bounded by the body limits
(``limits.max_json_containers``, ``limits.max_items``).

What counts is the work a request brings that nothing cached already did: the bytes of its body
that the session's previous request did not have (``BodyMemory.read`` says how many) plus a
little for each item, which every request walks. A body's bytes seen before count as new when its
session's memos do not know its messages (``Engine._cold``): its rules start cold. Below
``OFFLOAD_BYTES`` of it a request runs inline: an agent's next request, a message or two longer
than its last, costs a millisecond, less than a thread hop and the lock's handovers would add.

``WORKERS`` threads, each principal (``rules.memo_scope``, which the server sets per request)
running one job at a time, in the order it queued them: a tenant's stream of heavy bodies runs as
if it had one worker to itself, and another tenant's job takes the other worker rather than
queueing behind it (its jobs are short steps of a request, and each waited out a whole step of
the other's: a parse, a pipeline run of a second or more). Among principals waiting, each free
worker takes them in turn. At most ``WORKERS`` bodies' working memory at once. While a job runs,
the collector's full collections wait (``full_collections``): one over a heavy body's objects
would stop the loop for a quarter of a second."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from proxy.errors import ClientGone
from proxy.rewrite import full_collections
from rules.abandon import Abandoned, watching
from rules.memo_scope import memo_scope

T = TypeVar("T")

# Work from this much runs in the worker: a session's first request of this many bytes takes
# ~10–40 ms of rules (the proxy's memos know nothing of it yet); an agent's next request, whose
# new part is a few kilobytes, stays inline.
OFFLOAD_BYTES = 64 * 1024
# Each item (message, input item) counts as this many bytes of work: every request walks all of
# them (~3 µs each when the session's memos know them).
ITEM_WORK_BYTES = 32
# A tool call's arguments (a shell command) cost the rules about ten times what a tool's output
# does, byte for byte: each command is read for what it ran, made, moved, deleted and reverted
# (~8–10 ms a KiB of dense command lines, ~0.8 of output): a request's newest arguments count
# this many times (a 45 KiB line of `mv` held the loop 0.2–0.6 s below the threshold).
COMMAND_WORK = 10
# With the history restore on (``track_entities.restore_history``), what a request adds is
# redacted twice more on its way into the state (what the restore keeps, then the state itself),
# up to ~3 µs a character of text dense in secrets' names: a request's new bytes count this many
# times (a 64 KB body of `--passwd …` lines held the loop 0.4 s below the threshold).
REDACTION_WORK = 4
# A message counts at least this many bytes toward the new ones (its JSON's own), so the walk of
# a body of empty messages is bounded by its new bytes too.
_MESSAGE_BYTES = 16
# Worker threads: the interpreter lock shares one core among them, so more would add only memory
# held at once; two let one principal's job run while another's long one does.
WORKERS = 2


# Whose line a job joins: the lane the server set for the request (``Principals.lane``: in
# passthrough, principals no upstream accepted yet share one), else its memo scope.
_LANE: contextvars.ContextVar[str | None] = contextvars.ContextVar("offload_lane", default=None)


def enter_lane(lane: str) -> None:
    """The current request's jobs join ``lane``'s line (in this context and its copies)."""
    _LANE.set(lane)


def current_lane(default: str) -> str:
    """The lane ``enter_lane`` set for the current request, else ``default``."""
    return _LANE.get() or default


def redacting_restore(steps: Iterable[Any]) -> bool:
    """Whether a pipeline's steps restore history (``track_entities.restore_history``), which
    redacts what it keeps: its new bytes weigh ``REDACTION_WORK`` times (``Offload.weighed``)."""
    return any(getattr(step.config, "restore_history", False) is True for step in steps)


def items_of(body: Any) -> int:
    """How many messages or input items a body holds (its conversation's array), with the
    blocks (content parts, Gemini's parts) in them: the adapters and rules walk each block as
    they walk a message, and a body seen before counts no new bytes, so 190,000 blocks in one
    message counted as one item ran inline, holding the loop 0.4–1.6 s."""
    if not isinstance(body, dict):
        return 0
    for key in ("messages", "input", "contents"):
        value = body.get(key)
        if isinstance(value, list):
            return len(value) + _blocks(value)
    return 0


def _blocks(items: list[Any]) -> int:
    """The blocks in ``items``' list-valued ``content`` (or Gemini's ``parts``, where there is
    no content). Read on every request: ~0.05 µs a message, exact classes checked."""
    count = 0
    for item in items:
        if item.__class__ is dict:
            content = item.get("content")
            if content.__class__ is list:
                count += len(content)
            elif content is None:
                parts = item.get("parts")
                if parts.__class__ is list:
                    count += len(parts)
    return count


def command_bytes(messages: list[Any], fresh: int) -> int:
    """The characters of tool-call arguments among the newest ``messages`` (chat's view), as
    far back as they make up ``fresh`` bytes: what the rules read as commands. No count of
    messages bounds it (a request's commands behind 70 one-word messages ran on the loop, 0.26 s),
    but the new bytes do: each message counts its text, and ``_MESSAGE_BYTES`` at least."""
    seen = found = 0
    for message in reversed(messages):
        if not isinstance(message, dict):
            seen += _MESSAGE_BYTES
        else:
            for call in message.get("tool_calls") or ():
                function = call.get("function") if isinstance(call, dict) else None
                arguments = function.get("arguments") if isinstance(function, dict) else None
                if isinstance(arguments, str):
                    found += len(arguments)
            content = message.get("content")
            seen += max(_MESSAGE_BYTES, len(content) if isinstance(content, str) else 0)
        if seen + found >= fresh:
            break
    return found


_Job = tuple[
    asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[[], Any], Callable[[], bool] | None
]
# What tells whether the request's client went away (its connection lost), set by the handler
# for the request's task; a job it sends to a worker stops at its next check once it did
_CLIENT_GONE: contextvars.ContextVar[Callable[[], bool] | None] = contextvars.ContextVar(
    "ctxproxy_client_gone", default=None
)


def watch_client(gone: Callable[[], bool] | None) -> None:
    """The current request's ``gone`` (None: not known; read by the workers, from any thread)."""
    _CLIENT_GONE.set(gone)


class Offload:
    """The worker threads, their queue (a line per principal), and which requests go to them."""

    def __init__(
        self, threshold: int = OFFLOAD_BYTES, workers: int = WORKERS, name: str = "ctxproxy-body"
    ) -> None:
        self.threshold = threshold
        self._workers = workers
        self._name = name  # of its threads
        self._lines: OrderedDict[str, deque[_Job]] = OrderedDict()  # principal -> its jobs
        self._running: set[str] = set()  # principals with a job in a worker now
        self._ready = threading.Condition()
        self._closed = False
        self._threads: list[threading.Thread] = []

    def heavy(self, fresh_bytes: int, items: int = 0) -> bool:
        """Whether a request with this much new body and this many items goes to the worker."""
        return fresh_bytes + ITEM_WORK_BYTES * items >= self.threshold

    def weighed(self, fresh_bytes: int, items: int, command: int, redacted: bool) -> bool:
        """``heavy``, with the new commands' bytes (``command`` of ``fresh_bytes``) weighed
        ``COMMAND_WORK`` times, and every new byte ``REDACTION_WORK`` times where the history
        restore redacts it (``redacted``)."""
        work = fresh_bytes * (REDACTION_WORK if redacted else 1) + (COMMAND_WORK - 1) * command
        return self.heavy(work, items)

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in a worker, in a copy of the caller's context (the request's memo scope
        goes with it), once the principal's earlier jobs are done and a worker is free."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        call = contextvars.copy_context().run
        principal = current_lane(memo_scope())
        with self._ready:
            if self._closed:
                raise RuntimeError("the offload worker is closed")
            line = self._lines.get(principal)
            if line is None:
                line = self._lines[principal] = deque()
            line.append((loop, future, lambda: call(fn, *args), _CLIENT_GONE.get()))
            if len(self._threads) < self._workers:  # started on use: an engine that never
                thread = threading.Thread(  # offloads (the tests' many) holds no thread
                    target=self._work, name=self._name, daemon=True
                )
                self._threads.append(thread)
                thread.start()
            self._ready.notify()
        return await future

    async def maybe(self, heavy: bool, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in a worker when ``heavy``, else here and now."""
        if heavy:
            return await self.run(fn, *args)
        return fn(*args)

    def queued(self) -> dict[str, int]:
        """How many jobs each principal has waiting (not those running)."""
        with self._ready:
            return {p: len(line) for p, line in self._lines.items()}

    def close(self) -> None:
        """Stop taking jobs; those still queued are cancelled, the running ones finish."""
        with self._ready:
            self._closed = True
            jobs = [job for line in self._lines.values() for job in line]
            self._lines.clear()
            self._ready.notify_all()
        for loop, future, _, _ in jobs:
            _settle(loop, future, cancel=True)

    def _take(self) -> tuple[str, _Job] | None:
        """The first job of the first principal with none running (its line then goes to the
        back); None once closed."""
        with self._ready:
            while not self._closed:
                for principal, line in self._lines.items():
                    if principal not in self._running:
                        job = line.popleft()
                        if line:
                            self._lines.move_to_end(principal)
                        else:
                            del self._lines[principal]
                        self._running.add(principal)
                        return principal, job
                self._ready.wait()
            return None

    def _work(self) -> None:
        while (taken := self._take()) is not None:
            principal, (loop, future, call, client_gone) = taken
            try:
                if not future.cancelled():  # else its request went away while it waited
                    try:
                        # its objects would make one long collection; a request that goes
                        # away while it runs stops at the next unit of work (``rules.abandon``)
                        with full_collections.held(), watching(_gone(future, client_gone)):
                            value = call()
                    except Abandoned:  # its client hung up: the request ends as when it does
                        _settle(loop, future, error=ClientGone("Client disconnected."))
                    except BaseException as exc:  # any: handed to the request awaiting it
                        _settle(loop, future, error=exc)
                    else:
                        _settle(loop, future, value=value)
            finally:
                with self._ready:
                    self._running.discard(principal)
                    self._ready.notify_all()  # its next job, or another's, may go now


def _gone(
    future: asyncio.Future[Any], client_gone: Callable[[], bool] | None
) -> Callable[[], bool]:
    """Whether a job's request went away: its task cancelled, or its client's connection lost."""
    if client_gone is None:
        return future.cancelled
    return lambda: future.cancelled() or client_gone()


def _settle(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[Any],
    value: Any = None,
    error: BaseException | None = None,
    cancel: bool = False,
) -> None:
    """Hand a job's outcome to its future, on its loop (which may be gone at shutdown)."""

    def settle() -> None:
        if future.done():
            return
        if cancel:
            future.cancel()
        elif error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    with contextlib.suppress(RuntimeError):  # a closed loop: nobody awaits it any more
        loop.call_soon_threadsafe(settle)
