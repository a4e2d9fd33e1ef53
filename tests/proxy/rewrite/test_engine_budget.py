"""The engine's budget: from the model's context window (litellm's bundled table, the config's
``pipeline.context_windows``, the smaller of it and an override), and ``on_over_budget``
(``forward`` with a warning, or ``reject`` with a 400) when prune cannot get under it."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.errors import BadRequest
from proxy.rewrite.budgets import asked_output
from proxy.rewrite.engine import Engine
from proxy.settings import settings_from_mapping
from proxy.store.sqlite import Store
from tests.support.factories import system, user

TASK = user("Fix the failing test in calc.py")


@pytest.mark.parametrize(
    ("model", "windows", "budget", "expected"),
    [
        ("gpt-4o", {}, None, 128_000 - 8_000),  # litellm's bundled table
        ("openai/gpt-4o", {}, 50_000, 50_000),  # the smaller of the two
        ("my-local-model", {"my-*": 32_768}, None, 32_768 - 8_000),  # config wins
        ("unknown-model-x", {}, None, None),
    ],
)
async def test_budget_from_model_window(
    tmp_path: Path, model: str, windows: dict[str, int], budget: int | None, expected: int | None
) -> None:
    settings = settings_from_mapping({"pipeline": {"context_windows": windows}})
    store = Store(str(tmp_path / "s.db"))
    await store.open()
    try:
        assert Engine(settings, store, budget_override=budget).budget_for(model) == expected
    finally:
        await store.close()


@pytest.mark.parametrize(
    ("model", "budget", "expected"),
    [
        ("gpt-4o", None, 128_000 - 8_000),  # the window's room, whatever the budget
        ("openai/gpt-4o", 50_000, 128_000 - 8_000),
        ("unknown-model-x", 50_000, None),  # no window known
    ],
)
async def test_window_room_is_the_window_not_the_budget(
    tmp_path: Path, model: str, budget: int | None, expected: int | None
) -> None:
    # what prune may never leave a request over (it may hold one over a budget below it)
    store = Store(str(tmp_path / "s.db"))
    await store.open()
    try:
        engine = Engine(settings_from_mapping({}), store, budget_override=budget)
        assert engine.window_room_for(model, "alice") == expected
        engine.learn_window(model, 64_000, "alice")  # an upstream said less: the room follows it
        if expected is not None:
            assert engine.window_room_for(model, "alice") == 64_000 - 8_000
            assert engine.window_room_for(model, "bob") == expected  # alice's only
    finally:
        await store.close()


@pytest.mark.parametrize("on_over_budget", ["forward", "reject"])
async def test_on_over_budget(tmp_path: Path, on_over_budget: str) -> None:
    settings = settings_from_mapping(
        {"pipeline": {"on_over_budget": on_over_budget, "on_rule_error": "fail"}}
    )
    store = Store(str(tmp_path / "s.db"))
    await store.open()
    body = {"model": "gpt-4o", "messages": [system("rules " * 2000), TASK]}
    try:
        engine = Engine(settings, store, budget_override=500, strict=True)
        if on_over_budget == "reject":
            with pytest.raises(BadRequest, match="over the budget of 500 tokens"):
                await engine.rewrite(body, {}, now=0.0)
        else:
            out = await engine.rewrite(body, {}, now=0.0)
            assert any(w["kind"] == "over_budget" for w in out.report["warnings"])
    finally:
        await store.close()


@pytest.mark.parametrize(
    ("body", "asked"),
    [
        ({"max_tokens": 32_000}, 32_000),  # chat, Messages
        ({"max_completion_tokens": 20_000, "max_tokens": 100}, 20_000),
        ({"max_output_tokens": 16_000}, 16_000),  # Responses
        ({"generationConfig": {"maxOutputTokens": 12_000}}, 12_000),  # Gemini
        ({"max_tokens": "lots", "generationConfig": []}, 0),  # not a count: not read
        ({"max_tokens": True}, 0),
        ({}, 0),
    ],
)
def test_the_answer_a_body_asks_for(body: dict[str, object], asked: int) -> None:
    # a longer answer than the output reserve leaves less of the window for the prompt: prune
    # never holds a request past that (Context.window_room)
    assert asked_output(body) == asked


async def test_reject_mode_holds_nothing(tmp_path: Path) -> None:
    # under ``reject`` a request held over the budget would be refused, and so would every
    # retry of it, where a cut would have fitted it: the window room is the budget there
    from tests.rules.context.test_thrash import _floor_session

    steps, budget, task = _floor_session(330)
    settings = settings_from_mapping(
        {"pipeline": {"on_over_budget": "reject", "on_rule_error": "fail"}}
    )
    store = Store(str(tmp_path / "s.db"))
    await store.open()
    engine = Engine(settings, store, budget_override=budget, strict=True)
    messages, now, cuts = [user(task)], 1_000.0, 0
    try:
        for step in steps[:12]:
            messages, now = messages + step, now + 5.0
            out = await engine.rewrite(
                {"model": "gpt-4o", "messages": messages}, {}, now=now, session_id="s"
            )
            assert out.report["prune"].get("schedule", {}).get("decision") != "held"
            cuts += bool(out.report["prune"]["compacted"])
        assert cuts >= 2
    finally:
        await store.close()
