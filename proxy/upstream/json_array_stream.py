"""Google's JSON-array stream (``:streamGenerateContent`` without ``alt=sse``): one JSON array whose
elements (``GenerateContentResponse`` objects) arrive as the model writes them. It is relayed
element by element: each element goes to the client as soon as its last byte has arrived, its
bytes as the upstream sent them (the separators between elements travel with the next element).

Why whole elements rather than raw reads: the usage is read from each relayed piece as it is
(``ElementUsageTap``), and a stream broken off upstream ends, for the client, after the last whole
element, with Gemini's error object and the closing bracket: still one valid JSON array.

Memory is bounded: one unfinished element is held, at most ``MAX_ELEMENT`` bytes; past that, its
bytes are relayed as they come (the array stays byte-identical, only no longer cut per element).
A stream nesting deeper than ``MAX_DEPTH`` is broken off there (its open brackets were held, and
closed for the client, one by one).
The scan is linear: each byte is looked at once, jumping from one structural character to the
next with a regex."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable

import orjson

from proxy.errors import UpstreamUnreachable
from proxy.upstream import UpstreamResponse
from proxy.upstream.sse_usage import UsageTap

MAX_ELEMENT = 8 * 1024 * 1024
# Brackets open at once at most: Google's answers nest a dozen deep; 20 MiB of unclosed ones took
# 1.8 GiB and held the loop 1.8 s closing them for the client (orjson's own bound is 1,024).
MAX_DEPTH = 512
TOO_DEEP = "The upstream's stream nests deeper than any answer: the answer is not relayed further."
CUT_ARRAY = "The upstream ended its stream before the array's end: the answer is cut."
# Outside a string: what opens or closes a value or a string. Inside one: its end or an escape.
_STRUCTURE = re.compile(rb'["{}\[\]]')
_IN_STRING = re.compile(rb'["\\]')
_QUOTE, _BACKSLASH, _OPEN_BRACE, _OPEN_BRACKET = 0x22, 0x5C, 0x7B, 0x5B
_SEPARATORS = b"[, \t\r\n"
_CLOSING = b"] \t\r\n"


class ArraySplitter:
    """Fed the array's bytes as they arrive; ``feed`` returns the pieces ready to relay, each
    ending where an element (or the array) ends."""

    def __init__(self, max_element: int = MAX_ELEMENT) -> None:
        self.max_element = max_element
        self._held = bytearray()
        self._scanned = 0  # how much of ``_held`` is scanned
        self._depth = 0  # 1 inside the array, 2 and more inside an element
        self._string = False
        self._escape = False
        self._open = bytearray()  # the brackets open inside the current element, in order
        self._partly = False  # part of the current element went as it came (it was too large)
        self.elements = 0  # elements relayed whole
        self.relayed = False  # any byte went to the client
        self.closed = False  # the array's closing bracket was relayed
        self.too_deep = False  # it nested past MAX_DEPTH: nothing more is read
        # the brackets and string open where the last bytes relayed of a partly relayed element
        # ended (what ``_closing`` closes)
        self._sent: tuple[bytes, bool, bool] = (b"", False, False)

    def feed(self, chunk: bytes) -> list[bytes]:
        if self.too_deep:
            return []
        held = self._held
        held += chunk
        pieces: list[bytes] = []
        cut, i, end = 0, self._scanned, len(held)
        while i < end:
            if self._escape:
                self._escape = False
                i += 1
                continue
            if self._string:
                found = _IN_STRING.search(held, i)
                if found is None:
                    i = end
                    break
                i = found.start()
                if held[i] == _BACKSLASH:
                    self._escape = True
                else:
                    self._string = False
                i += 1
                continue
            found = _STRUCTURE.search(held, i)
            if found is None:
                i = end
                break
            i = found.start()
            byte = held[i]
            i += 1
            if byte == _QUOTE:
                self._string = True
            elif byte in (_OPEN_BRACE, _OPEN_BRACKET):
                self._depth += 1
                if self._depth >= 2:
                    if self._depth > MAX_DEPTH:  # no more is read: the relay breaks off
                        self.too_deep = True
                        break
                    self._open.append(byte)
            else:
                self._depth -= 1
                if self._open:
                    self._open.pop()
                if self._depth == 1:  # an element ended: relay it with what led up to it
                    pieces.append(bytes(held[cut:i]))
                    cut = i
                    self.elements += 1
                    self._partly = False
                elif self._depth <= 0:  # the array ended
                    pieces.append(bytes(held[cut:i]))
                    cut = i
                    self.closed = True
        if self.too_deep:  # what is whole goes; the unfinished element is dropped
            held.clear()
            self._scanned = 0
            self.relayed = self.relayed or bool(pieces)
            return pieces
        # after the array nothing matters; an element too large to hold goes as it comes
        if (self.closed and cut < end) or end - cut > self.max_element:
            pieces.append(bytes(held[cut:]))
            cut = end
            self._partly = self._depth >= 2
            # what closes it, as the client has it: later bytes may be dropped unsent
            self._sent = (bytes(self._open), self._string, self._escape)
        del held[:cut]
        self._scanned = max(i - cut, 0)
        if pieces:
            self.relayed = True
        return pieces

    def rest(self) -> bytes:
        """What is still held once the upstream ended (an array cut short, or not an array)."""
        rest = bytes(self._held)
        self._held.clear()
        return rest

    def error_tail(self, error_body: bytes) -> bytes:
        """What ends the array for the client when the upstream broke off: Gemini's error object
        as one more element, and the closing bracket (none after an array already closed)."""
        if self.closed:
            return b""
        self._held.clear()  # an unfinished element is dropped, never half relayed
        if not self.relayed:
            return b"[" + error_body + b"]"
        return self._closing() + b",\r\n" + error_body + b"\r\n]"

    def _closing(self) -> bytes:
        """What ends an element too large to hold that went partly as it came: its string and
        brackets closed, as they stood where the bytes relayed ended (bytes held after them are
        dropped unsent)."""
        if not self._partly:
            return b""
        opened, string, escape = self._sent
        text = (b"\\" if escape else b"") + (b'"' if string else b"")
        return text + b"".join(b"}" if b == _OPEN_BRACE else b"]" for b in reversed(opened))

    async def elements_of(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """``chunks`` (the upstream's reads) relayed as whole elements. A body that ended before
        its array did was cut (a connection closed mid-answer reads as the end of a body without
        a length): the relay then ends the array with an error element (``error_tail``), never
        with half an element a client cannot parse."""
        async for chunk in chunks:
            for piece in self.feed(chunk):
                yield piece
            if self.too_deep:
                raise UpstreamUnreachable(TOO_DEEP)
        if not self.closed:
            raise UpstreamUnreachable(CUT_ARRAY)


class ElementUsageTap(UsageTap):
    """``UsageTap`` for a relayed JSON-array stream: each piece is one element (with the array's
    separators around it); Gemini puts ``usageMetadata`` in each, the last one final."""

    def feed(self, chunk: bytes) -> None:
        if b'"usageMetadata"' not in chunk and b'"error"' not in chunk:
            return
        try:
            obj = orjson.loads(chunk.lstrip(_SEPARATORS).rstrip(_CLOSING))
        except orjson.JSONDecodeError:
            return
        if isinstance(obj, dict):
            self.events += 1
            self._note(obj)


def array_stream(
    status: int,
    headers: dict[str, str],
    chunks: AsyncIterator[bytes],
    close: Callable[[], object] | None = None,
) -> UpstreamResponse:
    """A successful JSON-array stream, relayed element by element."""
    splitter = ArraySplitter()
    return UpstreamResponse(
        status,
        headers,
        chunks=splitter.elements_of(chunks),
        close=close,
        json_array=True,
        tap=ElementUsageTap,
        error_tail=splitter.error_tail,
    )
