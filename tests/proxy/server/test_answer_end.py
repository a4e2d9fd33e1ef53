"""Telling a relayed stream's last event (``answer_end``): the three patterns read what the one
alternation they replace read, and an upstream's large piece is searched at the speed of a
literal scan (8 MiB of a Gemini array element held the loop 0.15 s)."""

from __future__ import annotations

import re
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.server.answer_end import AnswerEnd, _has_last

# the one pattern these replaced: the reference
REFERENCE = re.compile(
    rb'"type": ?"(?:response\.(?:completed|incomplete|failed)|message_stop)"'
    rb'|"(?:finish_reason|finishReason|stop_reason)": ?"'
    rb"|(?:^|\n)(?:event: ?(?:response\.(?:completed|incomplete|failed)|message_stop)\r?\n"
    rb"|data: ?\[DONE\])"
)
FRAGMENTS = [
    b'"type":"response.completed"', b'"type": "message_stop"', b'"type":"message_start"',
    b'"finishReason": "STOP"', b'"finish_reason":null', b'"stop_reason":"end_turn"',
    b"event: message_stop\n", b"event: response.failed\r\n", b"event: ping\n", b"data: [DONE]",
    b"data:[DONE]", b"data: {}", b"\n", b"\r\n", b'"', b"x", b"type", b"event:", b"[DONE]",
]  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=12))
def test_the_patterns_read_what_the_alternation_read(pieces: list[bytes]) -> None:
    data = b"".join(pieces)
    assert _has_last(data) == (REFERENCE.search(data) is not None), data


def test_a_large_piece_is_searched_fast() -> None:
    element = (b'{"candidates":[{"content":{"parts":[{"text":"' + b"lorem ipsum " * 700_000
               + b'"}]},"finishReason":"STOP"}]}')  # fmt: skip
    began = time.process_time()
    end = AnswerEnd()
    end.feed(element)
    end.feed(b"]")  # the element leaves the window: searched as it leaves
    assert end.seen()
    assert time.process_time() - began < 0.06  # the alternation: ~0.15 s
