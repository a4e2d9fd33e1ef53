"""UsageTap: usage read out of SSE streams with any line ending (LF, CRLF, CR), split anywhere,
in time linear in the stream and memory bounded however the upstream behaves."""

from __future__ import annotations

import random
import time

import pytest

from proxy.upstream.json_array_stream import ElementUsageTap
from proxy.upstream.sse_usage import MAX_PENDING, UsageTap

USAGE = {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}
EVENTS = [
    b'data: {"choices":[{"delta":{"content":"hi"}}]}',
    b": a comment line",
    b'data: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}}',
    b"data: [DONE]",
]


def stream(eol: bytes) -> bytes:
    return b"".join(event + eol + eol for event in EVENTS)


def fed(data: bytes, size: int) -> UsageTap:
    tap = UsageTap()
    for i in range(0, len(data), size):
        tap.feed(data[i : i + size])
    return tap


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, 10_000])
def test_usage_with_any_line_ending_and_chunking(eol: bytes, size: int) -> None:
    tap = fed(stream(eol), size)
    assert tap.usage == USAGE
    assert tap.events == len(EVENTS) - 1  # the comment-only event carries no data


def test_multi_line_data_is_one_payload() -> None:
    data = b'data: {"usage":\r\ndata: {"prompt_tokens": 1}}\r\n\r\n'
    assert fed(data, 5).usage == {"prompt_tokens": 1}


def test_last_non_null_usage_wins() -> None:
    data = b'data: {"usage": {"prompt_tokens": 1}}\n\ndata: {"usage": null}\n\n'
    assert fed(data, 4).usage == {"prompt_tokens": 1}


@pytest.mark.parametrize("eol", [b"\n", b"\r\n"])
def test_many_events_take_linear_time(eol: bytes) -> None:
    event = b'data: {"choices":[{"delta":{"content":"token"}}]}' + eol + eol
    data = event * 16_000 + stream(eol)
    started = time.perf_counter()
    tap = fed(data, 37)
    assert time.perf_counter() - started < 2.0  # was ~28 s for CRLF: quadratic re-scanning
    assert tap.usage == USAGE and tap.events == 16_000 + len(EVENTS) - 1


def test_memory_stays_bounded_without_event_boundaries() -> None:
    tap = UsageTap()
    for _ in range(2_000):
        tap.feed(b"x" * 1024)  # 2 MiB, never a line end
        assert tap.pending_bytes <= MAX_PENDING
    tap.feed(b'\n\ndata: {"usage": {"prompt_tokens": 4}}\n\n')  # and it recovers
    assert tap.usage == {"prompt_tokens": 4}


def test_one_json_object_per_data_line_is_read_too() -> None:
    data = b'data: {"choices": []}\ndata: {"usage": {"prompt_tokens": 2}}\n\n'
    assert fed(data, 3).usage == {"prompt_tokens": 2}


class LineByLine(UsageTap):
    """The tap reading every line one by one (no event skipped whole): the reference."""

    def feed(self, chunk: bytes) -> None:
        if self._skip_lf and chunk[:1] == b"\n":
            chunk = chunk[1:]
        self._skip_lf = chunk[-1:] == b"\r"
        self._lines(chunk)


def _state(tap: UsageTap) -> tuple[object, ...]:
    return (tap.usage, tap.events, tap.answer_id, tap.diagnostics, bytes(tap._line),
            list(tap._data), tap._data_size, tap._oversized, bytes(tap._tail), tap._mid_line,
            tap._skip_lf)  # fmt: skip


_PIECES = [
    b'data: {"type":"message_start","message":{"id":"m1","usage":{"input_tokens":3}}}',
    b'data: {"choices":[{"delta":{"content":"hi"}}]}',
    b'data: {"type":"message_delta","usage":{"output_tokens":2}}',
    b'data: {"usage": null}',
    b'data: {"usageMetadata": {"promptTokenCount": 5}}',
    b'data: {"response": {"id": "r1", "usage": {"input_tokens": 9}, "diagnostics": null}}',
    b"event: message_stop",
    b": a comment",
    b"data: [DONE]",
    b'data: {"usage":',
    b'data: {"prompt_tokens": 1}}',
    b"data:" + b"x" * 40_000 + b'"usage": {"prompt_tokens": 8}}',  # over the cap, two of them
    b"",  # a blank line: events end
]


@pytest.mark.parametrize("seed", range(40))
def test_events_skipped_whole_read_as_line_by_line(seed: int) -> None:
    """Whole events without usage are only counted: after every chunk, of any stream, line
    ending and chunking, the tap holds what reading each line one by one holds."""
    rng = random.Random(seed)
    eols = [b"\n", b"\r\n", b"\r"]
    data = b"".join(rng.choice(_PIECES) + rng.choice(eols) for _ in range(60))
    fast, slow = UsageTap(), LineByLine()
    i = 0
    while i < len(data):
        size = rng.choice([1, 2, 5, 40, 300, 5_000, 100_000])
        fast.feed(data[i : i + size])
        slow.feed(data[i : i + size])
        assert _state(fast) == _state(slow)
        i += size


@pytest.mark.parametrize(
    ("event", "said"),
    [
        (b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
         b'"message":"Overloaded"}}\n\n', "overloaded_error: Overloaded"),  # Anthropic
        (b'data: {"error":{"message":"boom","type":"server_error","code":null}}\n\n',
         "server_error: boom"),  # a chat chunk
        (b'data: {"type":"error","code":"rate_limit_exceeded","message":"slow down"}\n\n',
         "rate_limit_exceeded: slow down"),  # Responses
        (b'data: {"type":"response.failed","response":{"id":"r","error":{"code":"server_error",'
         b'"message":"failed"}}}\n\n', "server_error: failed"),
        (b'data: {"error":{"code":500,"message":"internal","status":"INTERNAL"}}\n\n',
         "500: internal"),  # Gemini's SSE
    ],
)  # fmt: skip
def test_a_providers_error_event_is_noted(event: bytes, said: str) -> None:
    for pieces in ([event], [event[:7], event[7:20], event[20:]]):
        tap = UsageTap()
        tap.feed(b'data: {"choices":[{"delta":{"content":"\\"error\\": null"}}]}\n\n')
        for piece in pieces:
            tap.feed(piece)
        assert tap.error == said


def test_text_about_errors_is_no_error_event() -> None:
    tap = UsageTap()
    for chunk in (
        b'data: {"choices":[{"delta":{"content":"the \\"error\\" key"}}],"error":null}\n\n',
        b'data: {"type":"response.completed","response":{"error":null,"usage":{"x":1}}}\n\n',
    ):
        tap.feed(chunk)
    assert tap.error is None and tap.usage == {"x": 1}


def test_a_gemini_array_element_with_an_error_is_noted() -> None:
    tap = ElementUsageTap()
    tap.feed(b'[{"candidates":[],"usageMetadata":{"promptTokenCount":3}}')
    tap.feed(b',\n{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}]')
    assert tap.error == "503: overloaded" and tap.usage == {"promptTokenCount": 3}


@pytest.mark.parametrize("size", [1_000, 70_000, 300_000])
@pytest.mark.parametrize("chunk", [4096, 1 << 20])
def test_an_error_event_too_large_to_read_whole_is_still_one(size: int, chunk: int) -> None:
    """A ``response.failed`` echoing its request, an Anthropic error with a long message: past
    ``MAX_PENDING`` only the event's tail was kept, and the row recorded no error."""
    failed = (
        b'event: response.failed\ndata: {"type":"response.failed","response":{"id":"r1",'
        b'"status":"failed","error":{"code":"server_error","message":"The model failed."},'
        b'"instructions":"' + b"i" * size + b'"}}\n\n'
    )
    overloaded = (
        b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"'
        + b"o" * size
        + b'"}}\n\n'
    )
    completed = (  # as large, no error: none recorded
        b'event: response.completed\ndata: {"type":"response.completed","response":{"id":"r2",'
        b'"error":null,"instructions":"' + b"i" * size + b'","usage":{"input_tokens":5}}}\n\n'
    )
    for stream, wanted in ((failed, "server_error"), (overloaded, "overloaded_error")):
        tap = UsageTap()
        for i in range(0, len(stream), chunk):
            tap.feed(stream[i : i + chunk])
        assert tap.error is not None and tap.error.startswith(wanted), (size, tap.error)
    tap = UsageTap()
    for i in range(0, len(completed), chunk):
        tap.feed(completed[i : i + chunk])
    assert tap.error is None and tap.usage == {"input_tokens": 5}


@pytest.mark.parametrize(
    ("event", "said"),
    [
        (b"event: error\ndata: upstream overloaded, try later\n\n",
         "error: upstream overloaded, try later"),
        (b'event: error\r\ndata: "Overloaded"\r\n\r\n', 'error: "Overloaded"'),
        (b"event:response.failed\ndata: <html>502 Bad Gateway</html>\n\n",
         "response.failed: <html>502 Bad Gateway</html>"),
        (b"event: error\ndata:\n\n", "error: "),
    ],
)  # fmt: skip
def test_an_error_event_whose_data_is_no_json_is_noted(event: bytes, said: str) -> None:
    """A provider's (or a gateway's) ``event: error`` with plain text as its data is an error
    to the SDKs, and the scanner holds it back as one: the row records it too."""
    for pieces in ([event], [event[:7], event[7:20], event[20:]], [bytes([b]) for b in event]):
        tap = UsageTap()
        tap.feed(b'event: message\ndata: {"choices":[{"delta":{"content":"x"}}]}\n\n')
        for piece in pieces:
            tap.feed(piece)
        assert tap.error == said


def test_text_about_an_error_event_is_none() -> None:
    tap = UsageTap()
    tap.feed(b'event: message\ndata: {"choices":[{"delta":{"content":"event: error"}}]}\n\n')
    tap.feed(b"event: errors\ndata: x\n\n")
    assert tap.error is None
