"""Tier 3: a broken tool history sent with the real openai SDK through the live proxy reaches the
fake upstream repaired (it passes the validator) with every text still in it, and the repairs are
in the request log."""

from __future__ import annotations

import openai

from rules.chain.validator import find_violations
from rules.messages import text_of, tool_calls

BROKEN = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Run the tests and fix what fails."},
    # An orphan: its call was trimmed away by the client.
    {"role": "tool", "tool_call_id": "call_trimmed", "content": "ORPHAN: 3 passed, 1 failed"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_Run1",
                "type": "function",
                "function": {"name": "bash", "arguments": '{"command": "pytest -q"}'},
            },
            {
                "id": "call_lint2",
                "type": "function",
                "function": {"name": "bash", "arguments": '{"command": "ruff check'},
            },  # truncated
        ],
    },
    # Drifted id (case + whitespace), and call_lint2 is never answered: the user typed next.
    {"role": "tool", "tool_call_id": " CALL_RUN1", "content": "DRIFTED: 1 failed in test_x.py"},
    {"role": "user", "content": "Skip lint, just fix test_x."},
]


def test_broken_history_is_repaired_before_the_upstream(live_proxy, fake_upstream) -> None:
    proxy = live_proxy()
    client = openai.OpenAI(base_url=proxy.base_url, api_key="sk-test", max_retries=0)
    raw = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=BROKEN)
    assert raw.parse().choices[0].message.content == "Hello from the fake upstream."

    sent = fake_upstream.last["messages"]
    assert find_violations(BROKEN) != []
    assert find_violations(sent) == []
    blob = "\n".join(text_of(m.get("content")) for m in sent)
    for m in BROKEN:
        assert text_of(m.get("content")) in blob
    # The drifted result now answers its call under the call's own id, right after it.
    i = next(k for k, m in enumerate(sent) if tool_calls(m))
    assert sent[i + 1] == {
        "role": "tool",
        "tool_call_id": "call_Run1",
        "content": "DRIFTED: 1 failed in test_x.py",
    }
    assert "interrupted" in sent[i + 2]["content"] and sent[i + 2]["tool_call_id"] == "call_lint2"
    assert '"raw_arguments"' in sent[i]["tool_calls"][1]["function"]["arguments"]

    row = proxy.row(raw.headers["x-ctxproxy-request-id"])
    kinds = {r["kind"] for r in row["report"]["repairs"]}
    assert {"orphan_result", "id_drift", "unanswered_call", "invalid_arguments"} <= kinds
    assert "integrity_repair" not in kinds
