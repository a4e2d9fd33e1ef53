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
    anthropic_violations,
    kept_facts,
    message_facts,
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
