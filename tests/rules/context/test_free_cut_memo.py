"""prune's free-cut check kept per list (``free_cut.tail``, ``Context.recall``) gives what it
works out with nothing kept, over random warm sessions under the budget whose agent runs its
last command again (a superseded result at the end of the cached prompt, free to cut) and
resends its list: each request's messages, state and report, through the rules chained as the
runner chains them (``tests/rules/test_keyed_memos.py``'s harness; break_loops, which rewrites a
repeated command's result afresh on every request, off)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from rules.base import Message
from rules.context import free_cut, prune
from rules.loops import break_loops
from tests.rules import test_keyed_memos
from tests.rules.test_keyed_memos import COMMANDS, OUTPUTS, _Kept
from tests.support.factories import assistant, result, shell, system, user

Request = tuple[list[Message], int, int | None, float, int | None]


def _session(seed: int, steps: int) -> list[Request]:
    """(messages, options, budget, seconds since the last request, None) for each request: a
    warm session (a few seconds apart) under a roomy budget that grows by a call and its result,
    often the last command again, and resends its list (the same list or the same objects)."""
    rng = random.Random(seed)
    history: list[Message] = [system(), user("fix the failing test in src/app.py")]
    last, options, out = rng.choice(COMMANDS), 0, []
    for n in range(steps):
        move = rng.random()
        if move < 0.45:
            last = last if rng.random() < 0.6 else rng.choice(COMMANDS)
            text = rng.choice(OUTPUTS) + "\n" + "\n".join(f"row {n} {i} " * 6 for i in range(40))
            call = shell(f"c{n}", last)
            history = [*history, assistant(f"step {n}", call), result(call["id"], text)]
        elif move < 0.75:
            pass  # the very list again
        elif move < 0.9:
            history = list(history)  # the same objects, a list of its own
        else:
            options = 1 - options
        out.append((history, options, 60_000, rng.choice([1.0, 3.0, 5.0]), None))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_the_kept_check_is_the_check_worked_out_afresh(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept, fresh = _worked(seed, monkeypatch)
    # its answers kept for resent lists: never more work (less over the seeds: below; a resend
    # is scheduled as its first attempt was, so some sessions ask for no kept answer)
    assert kept <= fresh


def test_a_resent_list_works_out_no_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """A resend is scheduled as its first attempt was, which found no cut worth making: neither
    the free-cut check nor a warm look is worked out again for it (a client resending one body
    planned a look on every request: 9 ms of a 400-message request)."""
    resent = [0]
    for seed in range(3):
        _worked(seed, monkeypatch, resent)
    # 80 before; what is left is a list resent right after its own compaction, which is no
    # repeat of an attempt that did not compact (at most one such check a session here)
    assert resent[0] <= 3


def _worked(
    seed: int, monkeypatch: pytest.MonkeyPatch, resent: list[int] | None = None
) -> tuple[int, int]:
    """The free-cut checks worked out over seed's session, with kept answers and without, each
    request's outcome the same either way (``resent``: counts those worked out for a list equal
    to the one before)."""
    counts = {"worked": 0, "free cuts": 0}
    real_superseded, real_apply = free_cut.superseded, prune.apply

    def superseded(*args: Any) -> list[int]:
        counts["worked"] += 1
        return real_superseded(*args)

    def apply(ctx: Any, cfg: Any) -> Any:
        out = real_apply(ctx, cfg)
        if any(d["action"] == "supersede" for d in out.report["pruning"]):
            counts["free cuts"] += 1
        return out

    quiet_loops = (break_loops, break_loops.Config(enabled=False))
    options = [
        [quiet_loops if rule is break_loops else (rule, cfg) for rule, cfg in rules]
        for rules in test_keyed_memos.OPTIONS
    ]
    monkeypatch.setattr(test_keyed_memos, "OPTIONS", options)
    monkeypatch.setattr(free_cut, "superseded", superseded)
    monkeypatch.setattr(prune, "apply", apply)
    kept, fresh = _Kept(fresh=False), _Kept(fresh=True)
    now, worked = 1000.0, {"kept": 0, "fresh": 0}
    previous: list[Message] | None = None
    for messages, options, budget, gap, at in _session(seed, 120):
        now += gap
        before = counts["worked"]
        got = kept.run(messages, options, budget, now, at)
        worked["kept"] += counts["worked"] - before
        before = counts["worked"]
        want = fresh.run(messages, options, budget, now, at)
        worked["fresh"] += counts["worked"] - before
        if resent is not None and messages == previous:
            resent[0] += counts["worked"] - before
        previous = messages
        assert got.messages == want.messages
        assert got.state.to_json() == want.state.to_json()
        assert got.report == want.report
    assert counts["free cuts"] > 0  # the check found something to cut, and it was cut
    return worked["kept"], worked["fresh"]


def test_the_kept_check_is_not_given_to_another_stored_overlay() -> None:
    """The very same messages resent after a free cut elided the superseded result: the check
    kept for the overlay before the cut must not answer for the overlay after it (its elided
    result frees nothing more)."""
    from rules.context import prune_settled
    from tests.rules.context.test_free_cut import FAILED, _messages
    from tests.rules.context.test_schedule import NOW, memory
    from tests.support.factories import TOKENS, ctx

    before, messages = _messages(FAILED, FAILED + "\nagain")
    state = memory(21, NOW - 5.0, TOKENS.count_messages(before), looked=20)
    cfg = prune.Config()
    first = prune.apply(ctx(messages, now=NOW, state=state, budget=200_000), cfg)
    assert first.report["prune"]["compacted"]

    def freed(state: Any, memo: dict[str, Any] | None) -> Any:
        context = ctx(messages, now=NOW + 30, state=state, budget=200_000)
        if memo is not None:
            context = context.evolve(memo=memo)
        run, _ = prune_settled.begin(context, cfg, prune.NAMESPACE)
        return free_cut.tail(context, cfg, prune.NAMESPACE, run)[0].freed

    shared: dict[str, Any] = {}
    assert freed(state, shared) != freed(first.state, None)  # the cut changed what is free
    assert freed(first.state, shared) == freed(first.state, None)
