"""The final Anthropic check (``proxy.protocols.checks``): each of its findings on a body made
for it; its short path for well-formed string ids against the general one, and facts kept with a
message against reading the message, on random bodies; and the adapter hands in facts that are
each forwarded message's."""

from __future__ import annotations

import random
from typing import Any

import orjson

from proxy.protocols.anthropic import AnthropicAdapter
from proxy.protocols.checks import (
    _resumes,
    anthropic_violations,
    checked_violations,
    kept_facts,
    message_facts,
    responses_checked,
    responses_violations,
    violations_of,
)
from proxy.rewrite.engine import Engine


def _use(uid: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": uid, "name": "Bash", "input": {}}


def _result(uid: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": uid, "content": "ok"}


def _text(text: Any) -> dict[str, Any]:
    return {"type": "text", "text": text}


U, A = "user", "assistant"
# (messages as (role, blocks) or a loose value, the findings): the check's findings, one kind each
CASES: list[tuple[list[Any], list[str]]] = [
    ([(U, [_text(" ")])], ["messages[0]: empty text block"]),
    ([(U, [_text("hi")]), (A, [_text("")])], []),  # the last assistant message: a prefill
    (["loose", (U, [_text("")])], ["messages[0]: empty text block"]),  # dict messages counted
    ([(U, [_text("hi")]), (A, [_use("t1")])], []),  # ends on the calls: nothing to answer yet
    (
        [(U, [_text("hi")]), (A, [_use("bad id")]), (U, [_result("bad id")])],
        ["messages[1]: tool_use id 'bad id' is malformed"],
    ),
    (
        [
            (U, [_text("a")]),
            (A, [_use("t1")]),
            (U, [_result("t1")]),
            (A, [_use("t1")]),
            (U, [_result("t1")]),
        ],
        ["messages[3]: tool_use id 't1' is not unique"],
    ),
    (
        [(U, [_text("a")]), (A, [_use("t1"), _use("t2")]), (U, [_result("t1"), _text("b")])],
        ["messages[1]: tool_use ids ['t2'] without tool_result after"],
    ),
    (
        [(U, [_text("a")]), (A, [_use("t1")]), (U, [_text("b"), _result("t1")])],
        ["messages[1]: tool_use ids ['t1'] without tool_result after"],  # not first: not after
    ),
    (  # results for unknown ids come after every other finding
        [(U, [_result("x"), _text(" ")])],
        ["messages[0]: empty text block", "messages[0]: tool_result for an unknown tool_use id"],
    ),
    (  # an unhashable id calls and answers nothing
        [(U, [_text("a")]), (A, [_use(["t1"])]), (U, [_result(["t1"])])],
        [
            "messages[1]: tool_use id \"['t1']\" is malformed",
            "messages[2]: tool_result for an unknown tool_use id",
        ],
    ),
]


def _body(messages: list[Any]) -> dict[str, Any]:
    return {
        "model": "claude-opus-5-5",
        "messages": [
            {"role": m[0], "content": m[1]} if isinstance(m, tuple) else m for m in messages
        ],
    }


def test_each_finding() -> None:
    for messages, expected in CASES:
        body = _body(messages)
        assert anthropic_violations(body) == expected, messages
        dicts = [m for m in body["messages"] if isinstance(m, dict)]
        assert anthropic_violations(body, [kept_facts(m) for m in dicts]) == expected


IDS: list[Any] = ["t1", "t2", "t3", "bad id", "", None, 7, ["t1"], "t1", "t2"]
TEXTS = ["hi", "", "  ", "\n", " x", None, 3]


def _block(rng: random.Random) -> Any:
    kind = rng.choice(["text", "text", "tool_use", "tool_result", "thinking", "image", None])
    if kind is None:
        return rng.choice(["loose", 1, None, {"no": "type"}])
    if kind == "text":
        return {"type": "text", "text": rng.choice(TEXTS)}
    if kind == "tool_use":
        return {"type": "tool_use", "id": rng.choice(IDS), "name": "Bash", "input": {}}
    if kind == "tool_result":
        return {"type": "tool_result", "tool_use_id": rng.choice(IDS), "content": "ok"}
    return {"type": kind}


def random_body(rng: random.Random) -> dict[str, Any]:
    messages: list[Any] = []
    for _ in range(rng.randint(0, 9)):
        if rng.random() < 0.05:
            messages.append(rng.choice(["loose", 3, None]))
            continue
        role = rng.choice(["user", "assistant", "assistant", "system", None])
        content: Any = (
            rng.choice(["text", "", None])
            if rng.random() < 0.15
            else [_block(rng) for _ in range(rng.randint(0, 4))]
        )
        messages.append({"role": role, "content": content})
    return {"model": "claude-opus-5-5", "messages": messages}


def test_the_short_path_gives_what_the_general_one_gives() -> None:
    """Messages whose ids are all well-formed strings take a shorter path in ``violations_of``;
    with that path turned off for every message the findings are the same, and facts kept with
    a message's content give what reading the message gives."""
    rng = random.Random(13)
    for _ in range(4000):
        b = random_body(rng)
        expected = anthropic_violations(b)
        dicts = [m for m in b["messages"] if isinstance(m, dict)]
        facts = [message_facts(m) for m in dicts]
        assert violations_of([(*f[:5], False) for f in facts]) == expected
        if len(dicts) == len(b["messages"]):  # facts are handed in for dict messages only
            assert anthropic_violations(b, [kept_facts(m) for m in dicts]) == expected


def test_the_adapter_hands_in_each_forwarded_message_s_facts() -> None:
    """Through the engine twice (kept lowerings and liftings hit the second time): every fact the
    lift hands the check is the forwarded message's own."""
    import asyncio

    from bench.golden import settings_for
    from proxy.store.sqlite import Store
    from tests.proxy.protocols.test_kept_lowerings import again, conversation

    async def run() -> None:
        store = Store(":memory:", batch_window_s=0)
        await store.open()
        engine = Engine(settings_for({"pipeline": {"budget_tokens": 300}}), store, strict=True)
        adapter = AnthropicAdapter()
        checked = lifted = 0
        try:
            for n in range(3):
                b = again(conversation())
                seen: list[Any] = []
                original = adapter.lift

                def lift(*args: Any, original: Any = original, seen: Any = seen, **kw: Any) -> Any:
                    out = original(*args, **kw)
                    seen.append((out, args[1].known_facts))
                    return out

                adapter.lift = lift  # type: ignore[method-assign]
                done = await engine.rewrite(b, {}, now=100.0 + n, session_id="f", adapter=adapter)
                del adapter.lift
                for out, known in seen:
                    if out is b:
                        continue
                    assert known is not None and len(known) == len(out["messages"])
                    for m, facts in zip(out["messages"], known, strict=True):
                        assert facts is None or facts == message_facts(m)
                        checked += facts is not None
                        lifted += all(m is not src for src in b["messages"])
                    assert orjson.dumps(done.body) == orjson.dumps(out)
        finally:
            engine.close()
            await store.close()
        assert checked and lifted  # the client's messages and lifted ones were both seen

    asyncio.run(run())


def test_a_resumed_check_finds_what_a_whole_one_finds() -> None:
    """The check resumed from a previous request's state (``checked_violations``) gives what
    checking every message gives: on random facts that share the state's very objects, then go
    on with others, end early, or hold an equal fact that is another object."""
    rng = random.Random(29)
    resumed = 0
    for _ in range(3000):
        a = [message_facts(m) for m in random_body(rng)["messages"] if isinstance(m, dict)]
        a += [message_facts(m) for m in random_body(rng)["messages"] if isinstance(m, dict)]
        keep = rng.randint(-1, len(a) + 1)
        found, state = checked_violations(a, None, keep)
        assert found == violations_of(a)
        assert (state is None) == (not 0 <= keep < len(a))
        if state is None:
            continue
        assert state.facts == tuple(a[: keep + 1])
        cut = rng.choice([keep, keep + 1, keep + 2, rng.randint(0, len(a))])  # near the state
        more = random_body(rng)["messages"] if rng.random() < 0.7 else []
        b = a[:cut] + [message_facts(m) for m in more if isinstance(m, dict)]
        if b and rng.random() < 0.3:  # an equal fact, not the same object
            j = rng.randrange(len(b))
            b[j] = tuple(list(b[j]))
        resumed += _resumes(state, b)
        assert checked_violations(b, state)[0] == violations_of(b)
    assert resumed > 500


def test_an_equal_fact_that_is_another_object_is_checked_again() -> None:
    """An id ``1`` and an id ``True`` make equal facts, worded differently in a finding: the
    state kept after one is not resumed for the other."""
    one = ({"role": "assistant", "content": [_use(1)]}, {"role": "user", "content": [_result(1)]})
    true = (
        {"role": "assistant", "content": [_use(True)]},
        {"role": "user", "content": [_result(True)]},
    )
    a = [message_facts(m) for m in (*one, *one)]
    b = [message_facts(m) for m in (*true, *one)]
    assert a == b
    found, state = checked_violations(a, None, 3)
    assert checked_violations(b, state)[0] == violations_of(b) != found


def _random_items(rng: random.Random) -> list[Any]:
    ids = ["c1", "c2", "c3", 1, True, None]
    out: list[Any] = []
    for _ in range(rng.randint(0, 8)):
        kind = rng.choice(["function_call", "custom_tool_call", "function_call_output",
                           "custom_tool_call_output", "reasoning", "message", "item_reference",
                           None])  # fmt: skip
        if kind is None:
            out.append(rng.choice(["loose", 3]))
        elif kind == "message":
            out.append({"type": "message", "role": rng.choice(["user", "assistant", "system"])})
        elif kind == "item_reference":
            out.append({"type": kind, "id": "fc_1"})
        else:
            out.append({"type": kind, "call_id": rng.choice(ids)})
    return out


def _history(rng: random.Random) -> dict[str, Any]:
    """The provider's own history the body continues, if any."""
    return rng.choice([{}, {}, {}, {"previous_response_id": "resp_1"}, {"conversation": "c"}])


def test_a_resumed_items_check_finds_what_a_whole_one_finds() -> None:
    """The Responses check resumed from a state kept before item ``count`` gives what checking
    every item gives, on items whose first ``count + 1`` are the same JSON values (what the
    adapter's reused lifting vouches for) and go on differently, with or without
    ``previous_response_id`` or ``conversation`` (an output may answer a call the provider
    holds), and with ``item_reference`` items."""
    rng = random.Random(31)
    resumed = 0
    for _ in range(3000):
        a = _random_items(rng) + _random_items(rng)
        extra = _history(rng)
        keep = rng.randint(-1, len(a) + 1)
        found, state = responses_checked({"input": a, **extra}, None, keep)
        assert found == responses_violations({"input": a, **extra})
        assert (state is None) == (not 0 <= keep < len(a))
        if state is None:
            continue
        cut = rng.choice([keep, keep + 1, keep + 2, rng.randint(0, len(a))])
        b = orjson.loads(orjson.dumps(a[:cut])) + _random_items(rng)
        extra = _history(rng)
        if state.count < cut:  # the caller's condition
            resumed += 1
            assert responses_checked({"input": b, **extra}, state)[0] == responses_violations(
                {"input": b, **extra}
            )
    assert resumed > 1000
