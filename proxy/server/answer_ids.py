"""The provider-side ids an answer gives its principal, read from the answer's structure: where
the provider writes them, never where it echoes what the client (or a model the client steers)
wrote.

An answer repeats client text in places: the Responses API copies a request's ``metadata``,
``instructions``, ``tools``, ``text`` format and ``prompt`` into its response object, and a
model's tool call carries an ``input`` object the client can have it write. A scan of the raw
bytes for ``"container_id": "…"`` took an id planted there as the caller's own, and the next
request could name another tenant's container, file or stored item (``provider_refs``). So each
answer is parsed (a whole body, or each event of a stream), and:

- a **container** is a ``container`` object's ``id`` (Anthropic's message and its delta) or a
  ``container_id`` string (a Responses code interpreter call, a file citation);
- a **file** is a ``file_id`` string (what a code execution wrote);
- a stored response's **item** is the ``id`` of an element of an ``output`` list or of an
  ``item`` (a stream's ``response.output_item.*``);
- a chat **audio** answer is an ``audio`` object's ``id`` (a message's, a stream delta's);
- with ``messages``, an Anthropic **message** is the ``id`` of the answer itself (a whole
  ``message``, a stream's ``message_start``), the comparison a later cache diagnosis names;

none of them under a key in ``ECHOED``. Strings are never searched: an id inside a model's text
or a JSON string of arguments is not one. A stream's event is read whole; one longer than
``MAX_EVENT`` is not read (its ids are not kept: a later request naming them is refused)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

CONTAINER = "container:"  # a container id's key among the ids kept (the response ids' table)
FILE = "file:"  # a file id's, likewise
ITEM = "item:"  # a stored response item's, likewise
AUDIO = "audio:"  # a chat audio answer's, likewise
MESSAGE = "message:"  # an Anthropic message's, likewise
# What an answer echoes of the request, or a model writes as a tool's input: never the
# provider's own state (citations name the request's own documents, checked as it came in).
ECHOED = frozenset(
    {
        "metadata",
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "text",
        "prompt",
        "reasoning",
        "citations",
        "conversation",
        "arguments",
    }
)
MAX_EVENT = 8 << 20  # a stream event read for ids at most (bytes)
MAX_DEPTH = 64  # nesting walked at most
_MAX_ID = 200


def answer_ids(data: bytes, items: bool, messages: bool = False) -> Iterator[str]:
    """The ids (``CONTAINER``, ``FILE``, ``AUDIO``, with ``items`` ``ITEM`` and with ``messages``
    ``MESSAGE`` keys) one JSON answer or event gives; nothing for what is not JSON."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return
    if messages and isinstance(value, dict):
        # the answer's own id only: a message inside it (a tool's input) is the client's to write
        message = value.get("message") if value.get("type") == "message_start" else value
        if isinstance(message, dict) and message.get("type") == "message":
            yield from _named(MESSAGE, message.get("id"))
    yield from _walk(value, items, 0)


def _walk(value: Any, items: bool, depth: int) -> Iterator[str]:
    if depth > MAX_DEPTH:
        return
    if isinstance(value, list):
        for element in value:
            yield from _walk(element, items, depth + 1)
        return
    if not isinstance(value, dict):
        return
    for key, child in value.items():
        if key in ECHOED:
            continue
        if key == "container" and isinstance(child, dict):
            yield from _named(CONTAINER, child.get("id"))
        elif key == "container_id":
            yield from _named(CONTAINER, child)
        elif key == "file_id":
            yield from _named(FILE, child)
        elif key == "audio" and isinstance(child, dict):
            yield from _named(AUDIO, child.get("id"))
        elif items and key == "output" and isinstance(child, list):
            for element in child:
                if isinstance(element, dict):
                    yield from _named(ITEM, element.get("id"))
        elif items and key == "item" and isinstance(child, dict):
            yield from _named(ITEM, child.get("id"))
        if isinstance(child, (dict, list)):
            yield from _walk(child, items, depth + 1)


def _named(kind: str, value: Any) -> Iterator[str]:
    if (
        isinstance(value, str)
        and 0 < len(value) <= _MAX_ID
        and value.isprintable()
        and not any(c.isspace() or c in '"\\' for c in value)
    ):
        yield kind + value


class EventData:
    """A stream's events' ``data`` as each ends, from its chunks as they come (an event may be
    cut anywhere); an event past ``MAX_EVENT`` is skipped whole. Each byte is searched once for
    the blank line ending an event: a long event costs what it brings, not its length again
    with each chunk."""

    __slots__ = ("_buffer", "_scanned", "_skipping")

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._scanned = 0  # how much of the buffer holds no event's end
        self._skipping = False

    def feed(self, chunk: bytes) -> Iterator[bytes]:
        buffer = self._buffer
        buffer += chunk
        out: list[bytes] = []
        while True:
            # a blank line: "\n\n", or "\n\r\n" of CRLF lines; a byte or two of it may be old
            start = max(self._scanned - 2, 0)
            ends = [
                i for i in (buffer.find(b"\n\n", start), buffer.find(b"\n\r\n", start)) if i >= 0
            ]
            if not ends:
                break
            end = min(ends)
            size = 2 if buffer[end + 1 : end + 2] == b"\n" else 3
            event = bytes(buffer[:end])
            del buffer[: end + size]
            self._scanned = 0
            if self._skipping:
                self._skipping = False
                continue
            payload = b"".join(
                line[5:].strip(b" \r") for line in event.split(b"\n") if line.startswith(b"data:")
            )
            if payload:
                out.append(payload)
        self._scanned = len(buffer)
        if len(buffer) > MAX_EVENT:  # never ended within the bound: not read
            self._skipping = True
            buffer.clear()
            self._scanned = 0
        return iter(out)
