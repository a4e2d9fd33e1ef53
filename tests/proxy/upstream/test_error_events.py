"""One definition of a stream's error event, for each protocol's shape: the scanner that redacts
a stream (``error_redaction``) holds back and redacts exactly the events the usage tap
(``sse_usage``) logs as the provider's error, and none of the others."""

from __future__ import annotations

import orjson
import pytest

from proxy.upstream.error_events import error_event, is_error_event, is_error_head
from proxy.upstream.error_redaction import ErrorRedactor
from proxy.upstream.sse_usage import UsageTap

ERRORS = [
    (  # OpenAI chat completions
        b'data: {"error":{"message":"boom","type":"server_error","code":null}}\n\n',
        "server_error: boom",
    ),
    (  # Anthropic Messages
        b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
        b'"message":"Overloaded"}}\n\n',
        "overloaded_error: Overloaded",
    ),
    (  # Responses: an error event, its fields on the event itself
        b'event: error\ndata: {"type":"error","code":"rate_limit","message":"slow down",'
        b'"param":null,"sequence_number":3}\n\n',
        "rate_limit: slow down",
    ),
    (  # Responses: a failed response
        b'event: response.failed\ndata: {"type":"response.failed","response":{"id":"r1",'
        b'"status":"failed","error":{"code":"server_error","message":"failed"}}}\n\n',
        "server_error: failed",
    ),
    (  # Responses through a compatible server that sends no event names
        b'data: {"type":"response.failed","response":{"id":"r1","status":"failed",'
        b'"error":{"code":"server_error","message":"failed"}}}\n\n',
        "server_error: failed",
    ),
    (  # Gemini (SSE)
        b'data: {"error":{"code":500,"message":"internal","status":"INTERNAL"}}\n\n',
        "500: internal",
    ),
    (  # vLLM and other OpenAI-compatible servers: the error's fields on the object
        b'data: {"object":"error","message":"too long","type":"BadRequestError","param":null,'
        b'"code":400}\n\n',
        "BadRequestError: too long",
    ),
    (  # an error object after other members
        b'data: {"id":"c1","error":{"message":"cut","type":"server_error"}}\n\n',
        "server_error: cut",
    ),
    (  # Hugging Face TGI: the error a string
        b'data: {"error":"Input validation error: too long","error_type":"validation"}\n\n',
        "error: Input validation error: too long",
    ),
    (  # a list, and ``true`` beside a message
        b'data: {"error":["cut off"]}\n\n',
        "error: ['cut off']",
    ),
    (
        b'data: {"error":true,"message":"overloaded"}\n\n',
        "error: overloaded",
    ),
]
NOT_ERRORS = [
    b'data: {"choices":[{"delta":{"content":"the \\"error\\" key"}}],"error":null}\n\n',
    b'data: {"type":"response.completed","response":{"error":null,"usage":{"x":1}}}\n\n',
    b'event: response.completed\ndata: {"type":"response.completed","response":{"error":null}}\n\n',
    b'data: {"error":null,"choices":[]}\n\n',
    b'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"type":'
    b'"text_delta","text":"error"}}\n\n',
]
SECRET = "sk-proj-" + "e" * 40


def _data(event: bytes) -> dict[str, object]:
    line = next(x for x in event.split(b"\n") if x.startswith(b"data:"))
    loaded = orjson.loads(line[5:])
    assert isinstance(loaded, dict)
    return loaded


@pytest.mark.parametrize(("event", "said"), ERRORS)
def test_each_protocols_error_event_is_one(event: bytes, said: str) -> None:
    assert error_event(_data(event)) == said
    assert is_error_head(event) is True
    assert is_error_head(event[: event.index(b"\n\n")], final=True) is True
    tap = UsageTap()
    tap.feed(event)
    assert tap.error == said


@pytest.mark.parametrize("event", NOT_ERRORS)
def test_text_about_errors_is_none(event: bytes) -> None:
    assert error_event(_data(event)) is None
    assert is_error_head(event) is False
    tap = UsageTap()
    tap.feed(event)
    assert tap.error is None


@pytest.mark.parametrize(("event", "said"), ERRORS)
async def test_the_stream_redacts_every_event_the_log_calls_an_error(
    event: bytes, said: str
) -> None:
    leaky = event.replace(b'"message":"', b'"message":"key ' + SECRET.encode() + b" ")
    redactor = ErrorRedactor([SECRET])

    for size in (len(leaky), 7):  # whole, and in pieces

        async def chunks(size: int = size):  # type: ignore[no-untyped-def]
            yield b'data: {"choices":[]}\n\n'
            for i in range(0, len(leaky), size):
                yield leaky[i : i + size]

        out = b"".join([piece async for piece in redactor.stream(chunks())])
        assert SECRET.encode() not in out and out.startswith(b'data: {"choices":[]}\n\n')


async def test_a_long_event_is_told_by_its_first_data_line_or_whole() -> None:
    """Past the head held back, an event is an error by its first data line; it is not one
    only once read whole. An error with a long message is redacted, and so is one whose
    ``error`` member follows 700 bytes of others, or a 700-byte comment line: both reached the
    client with the server's key in them, an error to the SDKs all the same; a long answer with
    "error" in its text is relayed as it came."""
    filler = b"x" * 2000
    error = b'data: {"error":{"message":"key ' + SECRET.encode() + b" " + filler + b'"}}\n\n'
    text = b'data: {"choices":[{"delta":{"content":"an error ' + SECRET.encode() + filler
    text += b'"}}]}\n\n'
    inner = b'"error":{"message":"key ' + SECRET.encode() + b'","type":"server_error"}}\n\n'
    padded = b'data: {"pad":"' + b"p" * 700 + b'",' + inner
    commented = b": " + b"c" * 700 + b"\ndata: {" + inner
    assert is_error_head(error[:600]) is True and is_error_head(text[:600]) is None
    assert is_error_head(padded[:512]) is None and is_error_head(commented[:512]) is None
    assert is_error_event(padded) and is_error_event(commented) and not is_error_event(text)
    redactor = ErrorRedactor([SECRET])
    cases = ((error, True), (text, False), (padded, True), (commented, True))
    for event, redacted in cases:
        for size in (100, len(event)):  # in pieces, and whole

            async def chunks(event: bytes = event, size: int = size):  # type: ignore[no-untyped-def]
                yield b'data: {"choices":[]}\n\n'
                for i in range(0, len(event), size):
                    yield event[i : i + size]

            out = b"".join([piece async for piece in redactor.stream(chunks())])
            assert (SECRET.encode() not in out) is redacted, (event[:40], size)
            if not redacted:
                assert out == b'data: {"choices":[]}\n\n' + event


async def test_a_json_array_element_with_its_error_after_other_members_is_redacted() -> None:
    """Gemini's JSON-array stream: an element whose ``error`` follows other members is an
    error element too."""
    element = b'{"pad":"' + b"p" * 700 + b'","error":{"code":500,"message":"key '
    element += SECRET.encode() + b'","status":"INTERNAL"}}'
    redactor = ErrorRedactor([SECRET])

    async def pieces():  # type: ignore[no-untyped-def]
        yield b'[{"candidates":[]}'
        yield b"," + element + b"]"

    out = b"".join([piece async for piece in redactor.elements(pieces())])
    assert SECRET.encode() not in out and out.startswith(b'[{"candidates":[]},{"pad":"')


async def test_an_error_that_is_a_string_is_redacted() -> None:
    """Hugging Face TGI writes ``{"error": "…"}``: the server's key it quoted reached the client
    on every native stream route."""
    event = b'data: {"error":"upstream auth failed for key ' + SECRET.encode() + b'"}\n\n'
    redactor = ErrorRedactor([SECRET])

    async def chunks():  # type: ignore[no-untyped-def]
        yield b'data: {"choices":[]}\n\n'
        yield event

    out = b"".join([piece async for piece in redactor.stream(chunks())])
    assert SECRET.encode() not in out and out.startswith(b'data: {"choices":[]}\n\n')
