"""UsageTap: usage read out of SSE streams with any line ending (LF, CRLF, CR), split anywhere,
in time linear in the stream and memory bounded however the upstream behaves."""

from __future__ import annotations

import time

import pytest

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
