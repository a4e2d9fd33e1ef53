"""``RequestTokens.count_messages`` takes a kept list's total for the messages a list starts
with (the same objects): checked against the sum over every message, over random sessions that
grow, resend, branch, shrink, edit and interleave, each session with its own adopted tables."""

from __future__ import annotations

import random
from typing import Any

import pytest

from proxy.tokens import RequestTokens
from rules.base import Message


class WordCounter:
    """A stand-in tokenizer: a word a token (the tables, not the encoding, are under test)."""

    def count_text(self, text: str) -> int:
        return len(text.split())


def _message(rng: random.Random, serial: int) -> Message:
    words = " ".join(f"w{serial}" for _ in range(rng.randint(0, 40)))
    if rng.random() < 0.3:
        call = {"id": f"c{serial}", "function": {"name": "bash", "arguments": words}}
        return {"role": "assistant", "content": "", "tool_calls": [call]}
    return {"role": rng.choice(["user", "tool", "assistant"]), "content": words}


def _whole(messages: list[Message]) -> int:
    fresh = RequestTokens(WordCounter())  # type: ignore[arg-type]
    return sum(fresh.count_message(m) for m in messages) + 3


def _next(rng: random.Random, messages: list[Message], serial: int) -> list[Message]:
    op = rng.choice(["grow", "grow", "grow", "resend", "branch", "shrink", "drop", "edit"])
    if op == "grow" or not messages:
        return [*messages, *(_message(rng, serial * 10 + i) for i in range(rng.randint(1, 3)))]
    if op == "resend":
        return list(messages)
    at = rng.randrange(len(messages))
    if op == "branch":  # an earlier message changed: a new object there, the rest as before
        return [*messages[:at], _message(rng, serial), *messages[at + 1 :]]
    if op == "shrink":  # back to an earlier point (a retry)
        return messages[:at]
    if op == "drop":  # the oldest dropped
        return messages[at:]
    return [*messages[:-1], _message(rng, serial)]  # the last message edited


@pytest.mark.parametrize("seed", range(30))
def test_the_total_is_the_sum_over_every_message(seed: int) -> None:
    rng = random.Random(seed)
    sessions: dict[str, tuple[Any, ...]] = {}
    for serial in range(120):
        name = rng.choice(["a", "b", "c"])
        messages, counts, texts, lists = sessions.get(name) or ([], {}, {}, [])
        messages = _next(rng, messages, serial)
        request = RequestTokens(WordCounter())  # type: ignore[arg-type]
        request.adopt(counts, texts, lists)  # the session's tables, kept across its requests
        views = [messages, messages[: len(messages) // 2], messages]  # a rule's views too
        for view in views:
            assert request.count_messages(view) == _whole(view)
        sessions[name] = (messages, counts, texts, lists)


class CountingMemo(dict[int, Any]):
    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def get(self, key: int, default: Any = None) -> Any:
        self.reads += 1
        return super().get(key, default)


def test_a_grown_list_reads_only_its_new_messages() -> None:
    rng = random.Random(7)
    request = RequestTokens(WordCounter())  # type: ignore[arg-type]
    memo = CountingMemo()
    request.adopt(memo, {}, [])
    first = [_message(rng, i) for i in range(100)]
    request.count_messages(first)
    memo.reads = 0
    grown = [*first, _message(rng, 100), _message(rng, 101)]
    assert request.count_messages(grown) == _whole(grown)
    assert memo.reads == 4  # the two new messages (looked up, then counted), not the hundred
    memo.reads = 0
    branched = [_message(rng, 200), *grown[1:]]  # its first message another object
    assert request.count_messages(branched) == _whole(branched)
    assert memo.reads == len(branched) + 1  # each looked up, the new first one counted
