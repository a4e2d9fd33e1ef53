"""What the rules keep for a list of the very same messages with the very same state and options
(``Context.keyed``: working_set's ledger, break_loops' loops; ``Context.recall``: prune's view,
that track_entities and workspace_map have no call to read, inject's placing when nothing new
was said; measure's sums of a resent list)
gives what they work out with nothing kept, over random sessions that resend a list, grow, change
an earlier message, drop the oldest, switch options, budgets and sessions, and bring the
proxy's bootstrap picture now and then: each request's
messages, state and report, through the rules chained as the runner chains them."""

from __future__ import annotations

import random
from typing import Any

import pytest

from rules.activity.observations import OBSERVATION_MEMO
from rules.base import CacheFacts, Context, ListMemo, Message, RuleConfig, SessionState
from rules.context import inject, measure, overlay, prune, prune_settled, working_set
from rules.entities import track_entities
from rules.loops import break_loops
from rules.workspace import workspace_map
from tests.support.factories import apply_rules, assistant, ctx, result, shell, system, user

COMMANDS = ["pytest -q tests/t.py", "cat src/app.py", "ls src", "python -m build"]
OUTPUTS = [
    "FAILED tests/t.py::test_a - AssertionError\n1 failed",
    "def main():\n    return 1\n",
    "app.py\nutil.py",
    "error: cannot import name 'x' from 'app' (src/app.py)",
]


def _turn(rng: random.Random, n: int) -> list[Message]:
    """An assistant turn of one or two calls and their results: repeated commands and failures
    (loops), sometimes a result far over the cap."""
    calls = [shell(f"c{n}_{k}", rng.choice(COMMANDS)) for k in range(rng.randint(1, 2))]
    out: list[Message] = [assistant(f"step {n}", *calls)]
    for c in calls:
        text = rng.choice(OUTPUTS)
        if rng.random() < 0.15:
            text = "\n".join(f"line {i} " + "x" * 40 for i in range(200))  # over the cap
        out.append(result(c["id"], text))
    return out


Request = tuple[list[Message], int, int | None, float, int | None]


def _session(seed: int, steps: int) -> list[Request]:
    """(messages, which options, budget, seconds since the last request, the earlier request
    whose state it resumes or None) for each request."""
    rng = random.Random(seed)
    history: list[Message] = [system(), user("fix the failing test in src/app.py")]
    options, budget, out = 0, 4000, []
    for n in range(steps):
        move = rng.random()
        if out and move < 0.05:  # an earlier request again, from the state it had (a retry)
            k = rng.randrange(len(out))
            out.append((*out[k][:3], 1.0, k))
            continue
        if move < 0.35:
            history = [*history, *_turn(rng, n)]
        elif move < 0.6:
            pass  # the very list again (a resent body)
        elif move < 0.7:
            history = list(history)  # the same objects, a list of its own
        elif move < 0.76 and len(history) > 3:  # an earlier message resent changed
            i = rng.randrange(2, len(history))
            history = [*history[:i], {**history[i], "content": f"changed {n}"}, *history[i + 1 :]]
        elif move < 0.82 and len(history) > 6:  # the oldest turns dropped by the client
            history = history[:2] + history[rng.randrange(3, len(history) - 2) :]
        elif move < 0.88:
            options = 1 - options
        elif move < 0.94:
            budget = rng.choice([600, 1500, 4000, 20000])
        else:  # another session's list, once
            other = [system(), user(f"other {n}"), *_turn(rng, n)]
            out.append((other, options, budget, 5.0, None))
            continue
        out.append((history, options, budget, rng.choice([1.0, 5.0, 400.0]), None))
    return out


def _rules(options: int) -> list[tuple[Any, RuleConfig]]:
    return [
        (track_entities, track_entities.Config(max_seen_calls=10 + 200 * options)),
        (working_set, working_set.Config(max_goal_chars=200 + 100 * options)),
        (workspace_map, workspace_map.Config(max_entries=10 + 100 * options)),
        (break_loops, break_loops.Config(min_count=2 + options)),
        (prune, prune.Config(max_result_tokens=300 + 300 * options, keep_last_observations=2)),
        (inject, inject.Config()),
        (measure, measure.Config()),
    ]


OPTIONS = [_rules(0), _rules(1)]  # one object each: the options a session runs with


class _Kept:
    """What the runner keeps of a session across its requests (the hashes and the derived
    values), or nothing (``fresh``: made afresh for every request)."""

    def __init__(self, fresh: bool) -> None:
        self.fresh = fresh
        self.memo: ListMemo = {}
        self.hashes: dict[int, tuple[Message, str]] = {}
        self.tables: dict[str, dict[int, tuple[Any, Any]]] = {}
        self.state = SessionState()
        self.states: list[SessionState] = []  # the state each request started from
        self.requests = 0

    def run(
        self, messages: list[Message], options: int, budget: int | None, now: float, at: Any
    ) -> Any:
        self.state = self.state if at is None else self.states[at]
        self.states.append(self.state)
        if self.fresh or not self.tables:  # the tables the runner keeps per object
            self.tables = {name: {} for name in (break_loops.STEPS_MEMO, OBSERVATION_MEMO)}
        if self.fresh:
            self.memo, self.hashes = {}, {}
        last = self.state.get(prune.SESSION)
        facts = CacheFacts(last_at=last.get("last_at") if isinstance(last, dict) else None)
        self.requests += 1  # now and then the proxy's bootstrap picture (the map keeps it once)
        boot = {"lines": [f"repo {self.requests}", "tests: pytest"]}
        hints = {workspace_map.BOOT_HINT: boot} if self.requests % 7 == 3 else {}
        context: Context = ctx(
            messages, now=now, state=self.state, budget=budget, cache=facts, hints=hints
        )
        context = context.evolve(memo=self.memo, hashes=self.hashes, tables=dict(self.tables))
        out = apply_rules(context, *OPTIONS[options])
        self.state = out.state
        return out


@pytest.mark.parametrize("seed", range(10))
def test_kept_values_are_the_rules_answers_over_random_sessions(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = dict.fromkeys(["run", "ledger", "loops", "read", "map", "plan", "step"], 0)
    real_run, real_build, real_loops = prune_settled.run_of, working_set.build, break_loops._loops

    def counting(name: str, real: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            made[name] += 1
            return real(*args, **kwargs)

        return counted

    monkeypatch.setattr(prune_settled, "run_of", counting("run", real_run))
    monkeypatch.setattr(working_set, "build", counting("ledger", real_build))
    monkeypatch.setattr(break_loops, "_loops", counting("loops", real_loops))
    monkeypatch.setattr(track_entities, "pairs_of", counting("read", track_entities.pairs_of))
    monkeypatch.setattr(workspace_map, "build", counting("map", workspace_map.build))
    monkeypatch.setattr(inject, "_Plan", counting("plan", inject._Plan))
    monkeypatch.setattr(break_loops, "make_step", counting("step", break_loops.make_step))
    kept, fresh = _Kept(fresh=False), _Kept(fresh=True)
    now, worked = 1000.0, {k: 0 for k in made}
    for messages, options, budget, gap, at in _session(seed, 120):
        now += gap
        got = kept.run(messages, options, budget, now, at)
        before = dict(made)
        want = fresh.run(messages, options, budget, now, at)
        for name in made:  # what the run with nothing kept worked out
            worked[name] += made[name] - before[name]
        assert got.messages == want.messages
        assert got.state.to_json() == want.state.to_json()
        assert got.report == want.report
    for name, count in made.items():  # the kept run took some answers from its memos
        assert count - worked[name] < worked[name], name


def test_a_kept_value_needs_the_very_same_messages_and_objects() -> None:
    messages = [user("a"), assistant("b")]
    options, other = working_set.Config(), working_set.Config()
    context = ctx(messages)
    calls: list[int] = []

    def compute() -> int:
        calls.append(1)
        return len(calls)

    assert context.keyed("n", (options,), compute) == 1
    assert context.keyed("n", (options,), compute) == 1  # the same list and options
    assert context.evolve(messages=list(messages)).keyed("n", (options,), compute) == 1
    assert context.keyed("n", (other,), compute) == 2  # equal options, another object
    copied = [dict(m) for m in messages]  # equal messages, other objects
    assert context.evolve(messages=copied).keyed("n", (options,), compute) == 3
    assert context.evolve(messages=messages[:1]).keyed("n", (options,), compute) == 4
    assert context.keyed("n", (options,), compute) == 1  # still kept: the last few are
    for k in range(8):  # more lists than are kept
        context.evolve(messages=[user(str(k))]).keyed("n", (options,), compute)
    assert context.keyed("n", (options,), compute) == 13  # let go: worked out again
    assert len(context.memo["n"]) <= 4


def test_a_view_is_kept_with_the_anchors_it_told_and_not_without() -> None:
    """A view other than the messages is kept only with the anchors ``Run.share_anchors`` told
    inject (a request that tried a compaction and kept none told none): a later request that
    takes the view tells inject the same anchors."""
    big = "\n".join(f"line {i} " + "x" * 40 for i in range(200))
    messages = [system(), user("go"), assistant("", shell("c1", "python l.py")), result("c1", big)]
    cfg = prune.Config(max_result_tokens=300)
    first = prune.apply(ctx(messages, budget=20000), cfg)  # caps the result: the overlay stored
    memo: ListMemo = {}
    context = ctx(messages, budget=20000, state=first.state).evolve(memo=memo)
    run, view = prune_settled.run_of(context, cfg, prune.NAMESPACE)
    assert view != messages and not run.decisions
    prune_settled.settle(context, prune.NAMESPACE, run, view, None)
    assert context.recall(prune_settled.SETTLED_MEMO, (first.state.get(prune.NAMESPACE), cfg)) == (
        False,
        None,
    )
    told = run.share_anchors(view)
    prune_settled.settle(context, prune.NAMESPACE, run, view, told)
    again = ctx(list(messages), budget=20000, state=first.state).evolve(memo=memo)
    kept, seen = prune_settled.begin(again, cfg, prune.NAMESPACE)
    assert isinstance(kept, prune_settled.Kept) and seen == view and seen is not view
    assert again.evolve(messages=seen).derived(overlay.MEMO, lambda m: ["afresh"]) == told
