"""Tier 3, the seed's story: the real openai SDK → a live proxy → the fake upstream. Turn 1 the
agent runs ``mkdir ~/Desktop/123``; turn 2 the user writes "删除刚创建的文件夹"; what reaches the
upstream names ``~/Desktop/123`` as the folder meant. Plus a sub-agent resolving through its parent
and a stateless client getting its history restored."""

from __future__ import annotations

import json
from typing import Any

import openai

from rules.messages import INJECT_CLOSE, INJECT_OPEN
from rules.registry import default_rule_names
from tests.conftest import proxy_settings
from tests.support.factories import call

BASH_PARAMS = {"type": "object", "properties": {"command": {"type": "string"}}}
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": BASH_PARAMS}}]


def client_for(proxy, session: str, parent: str | None = None) -> openai.OpenAI:  # type: ignore[no-untyped-def]
    headers = {"X-Session-Id": session}
    if parent:
        headers["X-Parent-Session-Id"] = parent
    return openai.OpenAI(
        base_url=proxy.base_url, api_key="sk-test", default_headers=headers, max_retries=0
    )


def _mkdir_turn(client: openai.OpenAI, fake_upstream) -> list[dict[str, Any]]:  # type: ignore[no-untyped-def]
    """Turn 1: the model asks for mkdir, the agent runs it and reports success."""
    fake_upstream.script.tool_calls = [call("call_1", "bash", command="mkdir ~/Desktop/123")]
    history: list[dict[str, Any]] = [{"role": "user", "content": "在桌面上建一个文件夹 123"}]
    first = client.chat.completions.create(model="gpt-4o", messages=history, tools=TOOLS)
    history.append(first.choices[0].message.model_dump(exclude_none=True))
    history.append(
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": "\n[Command finished with exit code 0]",
        }
    )
    fake_upstream.script.tool_calls = None
    fake_upstream.script.content = "已在桌面创建文件夹 123。"
    done = client.chat.completions.create(model="gpt-4o", messages=history, tools=TOOLS)
    history.append({"role": "assistant", "content": done.choices[0].message.content})
    return history


def test_delete_the_folder_i_just_created(live_proxy, fake_upstream) -> None:  # type: ignore[no-untyped-def]
    proxy = live_proxy()
    client = client_for(proxy, "seed-story")
    history = _mkdir_turn(client, fake_upstream)
    history.append({"role": "user", "content": "删除刚创建的文件夹"})
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o", messages=history, tools=TOOLS
    )
    raw.parse()
    sent = fake_upstream.last["messages"]
    assert sent[:-1] == history[:-1]  # the prefix is untouched
    last = sent[-1]["content"]
    assert last.startswith("删除刚创建的文件夹\n\n" + INJECT_OPEN) and last.endswith(INJECT_CLOSE)
    assert '"刚创建的文件夹" means the folder ~/Desktop/123 (created)' in last
    report = proxy.row(raw.headers["x-ctxproxy-request-id"])["report"]
    (ref,) = report["references"]
    assert ref["entity"] == {
        "type": "folder",
        "name": "123",
        "path": "~/Desktop/123",
        "action": "create",
    }
    assert ref["confidence"] >= 0.6


def test_the_same_story_in_spanish(live_proxy, fake_upstream) -> None:  # type: ignore[no-untyped-def]
    proxy = live_proxy()
    client = client_for(proxy, "seed-story-es")
    history = _mkdir_turn(client, fake_upstream)
    ask = "borra la carpeta que acabas de crear"
    history.append({"role": "user", "content": ask})
    client.chat.completions.create(model="gpt-4o", messages=history, tools=TOOLS)
    sent = fake_upstream.last["messages"]
    assert sent[:-1] == history[:-1]
    last = sent[-1]["content"]
    assert last.startswith(ask + "\n\n" + INJECT_OPEN) and last.endswith(INJECT_CLOSE)
    assert '"la carpeta que acabas de crear" means the folder ~/Desktop/123 (created)' in last


def test_sub_agent_resolves_through_its_parent(live_proxy, fake_upstream) -> None:  # type: ignore[no-untyped-def]
    proxy = live_proxy()
    _mkdir_turn(client_for(proxy, "parent-1"), fake_upstream)
    child = client_for(proxy, "child-1", parent="parent-1")
    raw = child.chat.completions.with_raw_response.create(
        model="gpt-4o", messages=[{"role": "user", "content": "delete the folder I just created"}]
    )
    raw.parse()
    assert (
        "means the folder ~/Desktop/123 (created), from parent session parent-1"
        in (fake_upstream.last["messages"][-1]["content"])
    )
    ref = proxy.row(raw.headers["x-ctxproxy-request-id"])["report"]["references"][0]
    # "I" in a sub-agent's message is its lead: the parent is searched first
    assert [c["session"] for c in ref["chain"]][-1] == "parent-1"
    assert ref["chain"][-1]["depth"] == 1


def test_stateless_client_gets_history_restored(live_proxy, fake_upstream) -> None:  # type: ignore[no-untyped-def]
    rules = [
        {"name": n} if n != "track_entities" else {"name": n, "restore_history": True}
        for n in default_rule_names()
    ]
    proxy = live_proxy(proxy_settings(fake_upstream.base_url, rules=rules))
    client = client_for(proxy, "stateless")
    history = _mkdir_turn(client, fake_upstream)
    # the buggy client forgets everything and sends only its newest message
    client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "删除刚创建的文件夹"}]
    )
    sent = fake_upstream.last["messages"]
    assert sent[0] == history[0] and sent[1]["tool_calls"][0]["id"] == "call_1"
    assert sent[-1]["content"].startswith("删除刚创建的文件夹")
    assert "~/Desktop/123" in sent[-1]["content"]


def test_rewrite_cli_replays_a_scenario_call_by_call(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """``ctxproxy rewrite --db --session --now``: the session's memory carries between calls and
    the clock is the one given (TTL 300 s)."""
    import orjson

    from proxy.cli import main

    db = str(tmp_path / "replay.db")
    turn1 = [
        {"role": "user", "content": "make a folder"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("c1", "bash", command="cd ~/Desktop && mkdir 123")],
        },
        {"role": "tool", "tool_call_id": "c1", "content": ""},
    ]
    turn2 = [
        *turn1,
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "now delete the folder you just created"},
    ]

    def rewrite(messages: list[dict[str, Any]], now: float) -> dict[str, Any]:
        path = tmp_path / f"body-{now}.json"
        path.write_bytes(orjson.dumps({"model": "gpt-4o", "messages": messages}))
        assert main(["rewrite", "--db", db, "--session", "s", "--now", str(now), str(path)]) == 0
        return orjson.loads(capsys.readouterr().out)

    first = rewrite(turn1, 1000.0)
    assert first["report"]["entities"][0]["path"] == "~/Desktop/123"
    second = rewrite(turn2, 1060.0)
    assert second["report"]["references"][0]["entity"]["path"] == "~/Desktop/123"
    assert "~/Desktop/123" in second["request"]["messages"][-1]["content"]
    late = rewrite(turn2, 1000.0 + 3601)
    assert late["report"]["references"][0]["abstained"] == "no_candidate"
    # the block forwarded with this very message is history: replayed as it was, nothing added
    assert late["request"]["messages"] == second["request"]["messages"]
    assert late["report"]["inject"] == {"sticky": 1}


def test_sub_agent_points_at_a_business_entity_from_its_leads_result(
    live_proxy, fake_upstream
) -> None:  # type: ignore[no-untyped-def]
    """The semantic-pointer design's story: the lead's tool lists customers; its sub-agent's
    "the second customer from that list" becomes a self-contained pointer with the id."""
    proxy = live_proxy()
    lead = client_for(proxy, "lead-9")
    search = {"type": "object", "properties": {"status": {"type": "string"}}}
    tools = [{"type": "function", "function": {"name": "search_customers", "parameters": search}}]
    fake_upstream.script.tool_calls = [call("call_7", "search_customers", status="flagged")]
    history: list[dict[str, Any]] = [{"role": "user", "content": "find the flagged customers"}]
    first = lead.chat.completions.create(model="gpt-4o", messages=history, tools=tools)
    history.append(first.choices[0].message.model_dump(exclude_none=True))
    listed = {
        "customers": [{"id": "cus_001", "name": "Acme Corp"}, {"id": "cus_002", "name": "Globex"}]
    }
    history.append({"role": "tool", "tool_call_id": "call_7", "content": json.dumps(listed)})
    fake_upstream.script.tool_calls = None
    fake_upstream.script.content = "Two customers are flagged."
    lead.chat.completions.create(model="gpt-4o", messages=history, tools=tools)

    child = client_for(proxy, "child-9", parent="lead-9")
    ask = "process the second customer from that list"
    raw = child.chat.completions.with_raw_response.create(
        model="gpt-4o", messages=[{"role": "user", "content": ask}]
    )
    raw.parse()
    last = fake_upstream.last["messages"][-1]["content"]
    assert (
        '"the second customer" means the customer Globex (id cus_002; item 2 of the result' in last
    )
    assert "from parent session lead-9" in last
    (ref,) = proxy.row(raw.headers["x-ctxproxy-request-id"])["report"]["references"]
    assert ref["pointer"]["id"] == "cus_002" and ref["pointer"]["session"] == "lead-9"
    assert ref["pointer"]["description"].startswith("customer Globex (id cus_002")
    assert ref["entity"]["path"] == "customer:cus_002"
