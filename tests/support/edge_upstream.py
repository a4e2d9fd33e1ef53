"""A scripted HTTP/1.1 upstream at the socket level, on 127.0.0.1 in a thread of its own. Unlike
the fake upstream (an ASGI app) it sees what the proxy's HTTP client really does: how many TCP
connections it opens, each request's head byte for byte (which headers a library added), and
whether the client hung up in the middle of a stream. It can also answer slowly, stall a stream,
break a stream off, or act as an HTTP forward proxy (the request line then carries the full URL)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from proxy.settings import Settings, settings_from_mapping


@dataclass
class Reply:
    status: int = 200
    headers: list[tuple[str, str]] = field(
        default_factory=lambda: [("content-type", "application/json")]
    )
    body: bytes = b'{"id": "c1", "object": "chat.completion", "choices": []}'
    # Streaming (chunked): ``chunks`` are sent one by one instead of ``body``.
    chunks: list[bytes] | None = None
    header_delay_s: float = 0.0  # wait this long before the status line
    chunk_delay_s: float = 0.0  # wait this long before each chunk after the first (a drip)
    # After the first chunk: "stall" sends nothing more (until the client hangs up or 10 s pass);
    # "break" closes the connection without the terminating chunk.
    after_first_chunk: str | None = None

    @classmethod
    def json(cls, payload: Any, status: int = 200, **headers: str) -> Reply:
        """``payload`` as JSON; ``headers`` with ``_`` for ``-`` (``retry_after="3"``)."""
        extra = [(k.replace("_", "-"), v) for k, v in headers.items()]
        return cls(status, [("content-type", "application/json"), *extra], orjson.dumps(payload))

    @classmethod
    def event_stream(cls, data: bytes) -> Reply:
        return cls(headers=[("content-type", "text/event-stream")], chunks=[data])


@dataclass
class Seen:
    method: str
    target: str  # as on the request line: a path, or a full URL when asked as a proxy
    headers: list[tuple[str, str]]  # (lower-cased name, value), in the order sent
    body: bytes
    connection: int  # which TCP connection (1-based) carried it

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k == name), None)

    @property
    def names(self) -> set[str]:
        return {k for k, _ in self.headers}

    def json(self) -> Any:
        return orjson.loads(self.body)


class EdgeUpstream:
    def __init__(self) -> None:
        self.reply = Reply()
        self.replies: list[Reply] = []  # used first, one per request, then ``reply``
        # when set, answers each request (after ``replies``): an upstream that reads its key
        self.choose: Callable[[Seen], Reply] | None = None
        self.seen: list[Seen] = []
        self.connections = 0
        self.hung_up_mid_stream = threading.Event()
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.AbstractServer | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    @property
    def last(self) -> Seen:
        return self.seen[-1]

    def start(self) -> EdgeUpstream:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self._loop
        )
        self._server = future.result(timeout=10)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    def stop(self) -> None:
        async def shutdown() -> None:
            assert self._server is not None
            self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        connection = self.connections
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                headers = []
                for line in lines[1:]:
                    if line:
                        name, value = line.split(":", 1)
                        headers.append((name.strip().lower(), value.strip()))
                length = int(dict(headers).get("content-length", "0"))
                body = await reader.readexactly(length) if length else b""
                self.seen.append(Seen(method, target, headers, body, connection))
                seen = self.seen[-1]
                chosen = self.choose(seen) if self.choose is not None else self.reply
                reply = self.replies.pop(0) if self.replies else chosen
                if not await self._answer(reply, reader, writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _answer(
        self, reply: Reply, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Send ``reply``; False when the connection is done with."""
        if reply.header_delay_s:
            await asyncio.sleep(reply.header_delay_s)
        head = [f"HTTP/1.1 {reply.status} X"]
        head += [f"{k}: {v}" for k, v in reply.headers]
        if reply.chunks is None:
            head.append(f"content-length: {len(reply.body)}")
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + reply.body)
            await writer.drain()
            return True
        head.append("transfer-encoding: chunked")
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        for i, chunk in enumerate(reply.chunks):
            if i and reply.chunk_delay_s:
                await asyncio.sleep(reply.chunk_delay_s)
            writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            await writer.drain()
            if i == 0 and reply.after_first_chunk == "break":
                return False
            if i == 0 and reply.after_first_chunk == "stall":
                await self._wait_for_hang_up(reader)
                return False
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True

    async def _wait_for_hang_up(self, reader: asyncio.StreamReader) -> None:
        try:
            data = await asyncio.wait_for(reader.read(1), timeout=10)
        except TimeoutError:
            return
        except ConnectionError:  # a reset: the client closed with our bytes still unread
            data = b""
        if data == b"":
            self.hung_up_mid_stream.set()


def sse(*events: dict[str, Any]) -> list[bytes]:
    """SSE chunks, one event each, then ``[DONE]``."""
    return [b"data: " + orjson.dumps(e) + b"\n\n" for e in events] + [b"data: [DONE]\n\n"]


def protocol_settings(edge: EdgeUpstream) -> Settings:
    """Claude models natively to ``edge`` as an Anthropic upstream, the rest to it as OpenAI's;
    a rule error fails the request (nothing a test checks is a skipped rule's doing)."""
    return settings_from_mapping(
        {
            "upstreams": [
                {
                    "name": "claude",
                    "kind": "anthropic",
                    "match": ["claude-*"],
                    "base_url": edge.url,
                },
                {"name": "openai", "match": ["*"], "base_url": edge.base_url},
            ],
            "pipeline": {"on_rule_error": "fail"},
        }
    )
