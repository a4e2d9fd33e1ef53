"""Tool calls whose arguments hold what no agent should send (numbers as strings no ``int``
reads, lists where a path goes, nesting past the parsers, megabyte values, a lone surrogate
escape) go through every default rule without one raising: the engine in strict mode (a rule's
error fails the request) replays sessions of such calls, with and without a budget that makes
prune compact. Seeded, so a failure replays."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from bench.golden import settings_for
from proxy.rewrite.engine import Engine
from proxy.store.sqlite import Store
from proxy.tokens import TokenCounters

DEEP = "[" * 1_500 + "]" * 1_500  # past orjson's 1,024 levels
ODD: list[Any] = [
    None, True, 0, -1, 1.5, "", "x", "[360, -1]", "[]", "null", [], [1], [1, 2, 3], [[1]],
    {"a": 1}, "²", "--5", "9" * 5_000, "\udcff", "a" * 100_000, ["a.py", "b.py"],
    {"path": "a.py"}, "a.py", "/r/a.py", "sed -n '1,20p' a.py", "cat a.py",
]  # fmt: skip
# each agent's tools, with the argument names their rules read
TOOLS = {
    "Read": ["file_path", "offset", "limit"],
    "str_replace_editor": [
        "command", "path", "view_range", "old_str", "new_str", "file_text", "insert_line"
    ],
    "bash": ["command"],
    "shell": ["command", "workdir"],
    "apply_patch": ["input", "patch"],
    "Write": ["file_path", "content"],
    "Edit": ["file_path", "old_string", "new_string"],
    "read_file": ["absolute_path", "offset", "limit"],
    "write_file": ["file_path", "content"],
    "replace": ["file_path", "old_string", "new_string"],
    "run_shell_command": ["command", "directory"],
    "update_plan": ["plan", "explanation"],
    "TodoWrite": ["todos"],
    "Grep": ["pattern", "path"],
    "list_directory": ["path"],
}  # fmt: skip
# what the rules read as line numbers gets numbers in every odd shape
RANGE_KEYS = frozenset({"offset", "limit", "view_range", "insert_line"})
RANGE_ODD: list[Any] = [
    "²", "--5", "9" * 5_000, " 12 ", "[360, -1]", '["²", 1]', "[1, 2, 3]", "[]", "null", "",
    [1], [[1]], [None, None], 1.5, True, 10, "10", -3,
]  # fmt: skip
NOT_AN_OBJECT = [DEEP, "{", "[1,2]", '"str"', '{"command": ' + DEEP + "}"]
CONVERSATIONS = 30
RESULTS = ["ok", "line one\nline two\n" * 200, "Error: no such file", "exit code 1\nTraceback"]


def _arguments(rng: random.Random, tool: str) -> str:
    if rng.random() < 0.1:
        return rng.choice(NOT_AN_OBJECT)
    chosen = {
        k: rng.choice(RANGE_ODD if k in RANGE_KEYS else ODD)
        for k in TOOLS[tool]
        if rng.random() < 0.7
    }
    return json.dumps(chosen)  # ASCII: a lone surrogate goes as its escape, as on the wire


@pytest.mark.parametrize("budget", [None, 3_000])
@pytest.mark.parametrize("seed", [1, 2])
async def test_no_rule_raises_on_odd_call_arguments(budget: int | None, seed: int) -> None:
    pipeline: dict[str, Any] = {"on_rule_error": "fail"}
    if budget is not None:
        pipeline["budget_tokens"] = budget
    store = Store(":memory:", batch_window_s=0)
    await store.open()
    engine = Engine(settings_for({"pipeline": pipeline}), store, TokenCounters(), strict=True)
    rng = random.Random(seed)
    rewritten = 0
    try:
        for conversation in range(CONVERSATIONS):
            messages: list[dict[str, Any]] = [
                {"role": "system", "content": "sys"},
                {"role": "user", "content": "Fix the bug in a.py"},
            ]
            for turn in range(12):
                tool = rng.choice(list(TOOLS))
                cid = f"c{conversation}_{turn}"
                call = {"name": tool, "arguments": _arguments(rng, tool)}
                messages += [
                    {"role": "assistant", "content": None,
                     "tool_calls": [{"id": cid, "type": "function", "function": call}]},
                    {"role": "tool", "tool_call_id": cid, "content": rng.choice(RESULTS)},
                ]  # fmt: skip
                body = {"model": "gpt-4o", "messages": list(messages)}
                sid = f"odd-{seed}-{conversation}"
                await engine.rewrite(body, {}, now=1_000.0 + 5 * turn, session_id=sid)
                rewritten += 1
    finally:
        engine.close()
        await store.close()
    assert rewritten == CONVERSATIONS * 12
