"""The optional resolver model writes the description of a pointer a sub-agent resolved through its
lead (``resolver.describe_pointers``): a lead agent cuts a branch, its sub-agent writes "push the
branch the lead agent created", the proxy asks the model — here the fake upstream on loopback —
and the forwarded block and the pointer carry the model's line (one line, redacted, bounded),
with the identifier the rule found. Without the setting, or without an answer, the rule's own
description stands."""

from __future__ import annotations

import json
import os
from typing import Any

import httpx

from proxy.rewrite.resolver import MAX_DESCRIPTION, parse_description
from tests.conftest import proxy_settings
from tests.support.factories import assistant, call, result, user

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
LEAD = [
    user("start the login feature on its own branch"),
    assistant(None, call("call_1", "bash", command="git checkout -b feat/login")),
    result("call_1", "Switched to a new branch 'feat/login'\n[Command finished with exit code 0]"),
    assistant("Created the branch feat/login."),
    user("thanks"),
]
CHILD = [user("push the branch the lead agent created")]
SAID = (
    "The feature branch feat/login that the lead agent cut for the new login form, "
    "key AKIAIOSFODNN7EXAMPLE\n(second line)"
)


def settings(fake_base: str, describe: bool) -> Any:
    return proxy_settings(
        fake_base,
        resolver={
            "enabled": True,
            "model": "openai/gpt-4o-mini",
            "base_url": fake_base,
            "api_key_env": None,
            "timeout_s": 5,
            "describe_pointers": describe,
        },
    )


def post(proxy, messages: list[dict[str, Any]], session: str, parent: str | None = None):  # type: ignore[no-untyped-def]
    headers = {"x-session-id": session, "authorization": "Bearer sk-test"}
    if parent:
        headers["x-parent-session-id"] = parent
    r = httpx.post(
        proxy.base_url + "/chat/completions",
        timeout=30,
        json={"model": "gpt-4o", "messages": messages},
        headers=headers,
    )
    assert r.status_code == 200, r.text
    return r


def test_the_model_describes_the_pointer_the_rule_found(live_proxy, fake_upstream) -> None:  # type: ignore[no-untyped-def]
    proxy = live_proxy(settings(fake_upstream.base_url, describe=True))
    post(proxy, LEAD, "lead-d1")
    fake_upstream.script.content = json.dumps({"description": SAID})
    n = len(fake_upstream.requests)
    r = post(proxy, CHILD, "child-d1", parent="lead-d1")
    asked, forwarded = fake_upstream.requests[n], fake_upstream.requests[-1]
    assert asked["model"] == "gpt-4o-mini"
    assert "feat/login" in asked["messages"][-1]["content"]  # the rule's pointer was offered
    block = str(forwarded["messages"][-1]["content"])
    assert "The feature branch feat/login that the lead agent cut" in block
    assert "AKIAIOSFODNN7EXAMPLE" not in block and "[REDACTED]" in block
    assert "(id feat/login" in block and "from parent session lead-d1" in block
    (ref,) = proxy.row(r.headers["x-ctxproxy-request-id"])["report"]["references"]
    pointer = ref["pointer"]
    assert pointer["id"] == "feat/login" and pointer["kind"] == "branch"
    assert pointer["described_by"] == "openai/gpt-4o-mini"
    assert "\n" not in pointer["description"] and "second line" in pointer["description"]
    assert len(pointer["description"]) <= MAX_DESCRIPTION
    # The same question in the sub-agent's tool loop: the answer is cached, the block the same.
    again = post(proxy, CHILD, "child-d1", parent="lead-d1")
    row = proxy.row(again.headers["x-ctxproxy-request-id"])
    assert row["report"]["resolver"]["cached"] == 1
    assert str(fake_upstream.requests[-1]["messages"][-1]["content"]) == block


def test_without_an_answer_the_rule_describes_it(live_proxy, fake_upstream) -> None:  # type: ignore[no-untyped-def]
    proxy = live_proxy(settings(fake_upstream.base_url, describe=True))
    post(proxy, LEAD, "lead-d2")
    fake_upstream.script.content = "I cannot say."
    r = post(proxy, CHILD, "child-d2", parent="lead-d2")
    (ref,) = proxy.row(r.headers["x-ctxproxy-request-id"])["report"]["references"]
    assert ref["pointer"]["id"] == "feat/login" and "described_by" not in ref["pointer"]
    assert "git branch feat/login" in ref["pointer"]["description"]


def test_describing_is_off_unless_set(live_proxy, fake_upstream) -> None:  # type: ignore[no-untyped-def]
    proxy = live_proxy(settings(fake_upstream.base_url, describe=False))
    post(proxy, LEAD, "lead-d3")
    n = len(fake_upstream.requests)
    r = post(proxy, CHILD, "child-d3", parent="lead-d3")
    assert len(fake_upstream.requests) == n + 1  # the agent's request alone: no model asked
    (ref,) = proxy.row(r.headers["x-ctxproxy-request-id"])["report"]["references"]
    assert ref["entity"]["path"] == "branch:feat/login" and "described_by" not in ref["pointer"]


def test_parse_description() -> None:
    assert parse_description('{"description": "  a  b\\n c "}') == "a b c"
    assert parse_description('{"description": ""}') is None
    assert parse_description('{"path": "x"}') is None
    assert parse_description("no json") is None
    long = parse_description(json.dumps({"description": "word " * 100}))
    assert long is not None and len(long) == MAX_DESCRIPTION and long.endswith("…")
