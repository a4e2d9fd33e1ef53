"""A look for a compaction that pays asks about every old turn and every candidate result: the
shortcuts it takes give the answers of the full computation. Each message's shrink estimate is
kept per object and options across a session's requests (``shrink.ESTIMATE_MEMO``); whether a
later recent call uses a result's names is one set test over the names of the calls after it
(``need.CallsAfter``), not one per call."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest

from rules.context import need, shrink
from rules.messages import PLACEHOLDER_PREFIX
from tests.support.factories import assistant, call, result, user

NAMES = ["app.py", "src/util.py", "README.md", "tests/test_app.py", "parse_args", "Config", "main"]


def _turn(rng: random.Random, n: int) -> list[dict[str, Any]]:
    """An assistant turn with zero to three calls naming a few names, and their results."""
    calls = [
        call(f"c{n}_{k}", rng.choice(["bash", "read_file", "edit"]),
             command=" ".join(rng.sample(NAMES, rng.randint(0, 3))) + " x" * rng.randint(0, 400))
        for k in range(rng.randint(0, 3))
    ]  # fmt: skip
    prose = "\n".join(f"line {i} " + "w" * rng.randint(0, 120) for i in range(rng.randint(0, 20)))
    out: list[dict[str, Any]] = [assistant(prose, *calls) if calls else assistant(prose)]
    for c in calls:
        out.append(result(c["id"], " ".join(rng.sample(NAMES, rng.randint(0, 4)))))
    return out


def _messages(seed: int, turns: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [user("fix the bug")]
    for n in range(turns):
        messages += _turn(rng, n)
    return messages


@pytest.mark.parametrize("seed", range(8))
def test_calls_after_answers_as_each_call_asked_alone(seed: int) -> None:
    rng = random.Random(seed)
    messages = _messages(seed, 30)
    for count in (1, 3, need.RECENT_CALLS):
        calls = need.recent_calls(messages, count)
        after = need.CallsAfter(calls)
        for index in range(-1, len(messages) + 1):
            for _ in range(4):
                names = frozenset(rng.sample(NAMES, rng.randint(0, 3)))
                assert after.used_after(index, names) == need._used_after(calls, index, names)


def test_calls_after_of_no_calls_uses_nothing() -> None:
    assert not need.CallsAfter([]).used_after(-1, frozenset(NAMES))


@pytest.mark.parametrize("seed", range(4))
def test_kept_estimates_are_the_estimates_over_a_growing_session(seed: int) -> None:
    """Across requests that resend the same objects, edit one, and change the options: every
    answer is ``estimate``'s of that message with those options."""
    rng = random.Random(seed)
    table: dict[int, tuple[Any, Any]] = {}
    messages = _messages(seed, 12)
    options = (4, 400)
    for step in range(40):
        move = rng.random()
        if move < 0.5:
            messages = messages + _turn(rng, 100 + step)
        elif move < 0.7:
            k = rng.randrange(len(messages))
            edited = dict(messages[k], content=f"{PLACEHOLDER_PREFIX} {'y' * rng.randint(0, 900)}")
            messages = [*messages[:k], edited, *messages[k + 1 :]]
        elif move < 0.8:
            options = (rng.choice([2, 4, 8]), rng.choice([200, 400, 1000]))
        elif move < 0.9:  # the same content, new objects (a body parsed anew)
            messages = orjson.loads(orjson.dumps(messages))
        for m in messages:
            assert shrink.estimate_in(table, m, *options) == shrink.estimate(m, *options)


def test_an_estimate_is_worked_out_once_per_message_and_options(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []
    real = shrink.estimate

    def counting(message: Any, keep_lines: int, max_chars: int) -> int:
        calls.append(id(message))
        return real(message, keep_lines, max_chars)

    monkeypatch.setattr(shrink, "estimate", counting)
    table: dict[int, tuple[Any, Any]] = {}
    messages = _messages(1, 6)
    for _ in range(3):
        for m in messages:
            shrink.estimate_in(table, m, 4, 400)
    assert len(calls) == len(messages)
    shrink.estimate_in(table, messages[0], 8, 400)  # other options: worked out again
    assert len(calls) == len(messages) + 1
