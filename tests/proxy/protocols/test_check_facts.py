"""The final Anthropic check read from per-message facts (``checks.message_facts``, kept with a
message's lowering) gives exactly what the one-pass walk it replaced gave, on random bodies, with
or without facts handed in; and the adapter hands in facts that are each forwarded message's."""

from __future__ import annotations

import contextlib
import random
import re
from typing import Any

import orjson

from proxy.protocols.anthropic import AnthropicAdapter
from proxy.protocols.checks import anthropic_violations, kept_facts, message_facts
from proxy.rewrite.engine import Engine

_ID = re.compile(r"[a-zA-Z0-9_-]+")


# The walk as it was (proxy/protocols/checks.py before the facts), verbatim: the reference.
def _blocks(message: Any) -> list[Any]:
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, list) else []


def _leading_results(message: Any) -> list[Any]:
    """The ``tool_use_id``s of the results a message starts with."""
    leading: list[Any] = []
    for b in _blocks(message):
        if not (isinstance(b, dict) and b.get("type") == "tool_result"):
            break
        leading.append(b.get("tool_use_id"))
    return leading


def _answered(uid: Any, ids: set[Any]) -> bool:
    try:
        return uid in ids
    except TypeError:  # an unhashable id (a list …) answers nothing
        return False


def reference_violations(body: dict[str, Any]) -> list[str]:
    """One pass over the blocks (this runs on every forwarded body); results for unknown ids
    are listed after the other findings, as they always were."""
    out: list[str] = []
    unknown: list[str] = []
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    last = len(messages) - 1
    seen: set[str] = set()
    answered_ok: set[Any] = set()  # the ids the previous message's tool_use blocks called
    for i, m in enumerate(messages):
        assistant = m.get("role") == "assistant"
        uses: list[Any] = []
        for b in _blocks(m):
            if not isinstance(b, dict):
                continue
            kind = b.get("type")
            if kind == "text":
                text = b.get("text")
                # most texts start with a visible character: no strip (a copy) needed
                blank = not isinstance(text, str) or (
                    (not text or text[0].isspace()) and not text.strip()
                )
                if blank and not (i == last and assistant):
                    out.append(f"messages[{i}]: empty text block")
            elif kind == "tool_use":
                if assistant:
                    uses.append(b.get("id"))
            elif (
                kind == "tool_result"
                and not assistant
                and not _answered(b.get("tool_use_id"), answered_ok)
            ):
                unknown.append(f"messages[{i}]: tool_result for an unknown tool_use id")
        if not assistant:
            answered_ok = set()
            continue
        answered_ok = set()
        for uid in uses:
            with contextlib.suppress(TypeError):  # an unhashable id calls nothing
                answered_ok.add(uid)
            if not isinstance(uid, str) or not _ID.fullmatch(uid):
                out.append(f"messages[{i}]: tool_use id {str(uid)[:40]!r} is malformed")
                continue
            if uid in seen:
                out.append(f"messages[{i}]: tool_use id {uid!r} is not unique")
            seen.add(uid)
        if uses and i < last:  # a request may end on the calls (a prefill): nothing to answer
            leading = _leading_results(messages[i + 1])
            missing = [u for u in uses if u not in leading]
            if missing:
                out.append(f"messages[{i}]: tool_use ids {missing[:3]} without tool_result after")
    return out + unknown


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


def test_facts_give_what_the_walk_gave() -> None:
    rng = random.Random(13)
    for _ in range(4000):
        b = random_body(rng)
        expected = reference_violations(b)
        assert anthropic_violations(b) == expected
        dicts = [m for m in b["messages"] if isinstance(m, dict)]
        if len(dicts) == len(b["messages"]):  # facts are handed in for dict messages only
            kept = [kept_facts(m) for m in dicts]
            assert anthropic_violations(b, kept) == expected
            assert anthropic_violations(b, [message_facts(m) for m in dicts]) == expected


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
