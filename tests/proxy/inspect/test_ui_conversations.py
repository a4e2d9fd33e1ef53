"""/ui's session page charts one conversation: a sub-agent (or a title call) Claude Code sends
under the lead's session id is not drawn into the lead's chart and turns, but listed with a link to
its own; a session naming this one its parent (``X-Parent-Session-Id``) is listed and linked."""

from __future__ import annotations

import html
import re
from typing import Any

import httpx

from tests.support.agent_proxy import completed_rows

LEAD_KEY = {"x-api-key": "sk-ant-test-0123456789abcdef", "x-session-id": "lead-s"}


def body(system: str, turns: int, task: str = "fix the failing test") -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for i in range(turns):
        messages.append({"role": "user", "content": f"{task}, step {i}: " + "read it please " * 30})
        if i < turns - 1:
            messages.append({"role": "assistant", "content": f"done step {i}"})
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 64,
        "system": [{"type": "text", "text": system}],
        "messages": messages,
    }


def send(proxy: Any, payload: dict[str, Any], headers: dict[str, str]) -> None:
    r = httpx.post(proxy.url + "/v1/messages", json=payload, headers=headers, timeout=10)
    assert r.status_code == 200, r.text


def turn_rows(page: str) -> list[str]:
    table = page.split('<table id="turns">', 1)[1].split("</table>", 1)[0]
    return re.findall(r'href="/ui/requests/([^"]+)"', table)


def test_a_sub_agent_under_the_lead_session_id_is_charted_apart(
    agent_proxy: Any, anthropic_upstream: Any
) -> None:
    proxy = agent_proxy()
    lead = "You are Claude Code, the lead agent. " * 20
    sub = "You are a search sub-agent: find files and report. " * 5
    send(proxy, body(lead, 1), LEAD_KEY)
    send(proxy, body(lead, 2), LEAD_KEY)
    send(proxy, body(sub, 1, "find the config loader"), LEAD_KEY)  # a Task sub-agent, same id
    # the lead again, its system prompt changed by the client: still the lead (same opening)
    send(proxy, body("Be terse. " + lead, 3), LEAD_KEY)
    # a sub-agent of its own session, naming the lead its parent
    child = {**LEAD_KEY, "x-session-id": "child-s", "x-parent-session-id": "lead-s"}
    send(proxy, body(sub, 1, "find the config loader"), child)
    rows = completed_rows(proxy, 5)
    sid = rows[0]["session_id"]
    lead_ids = [r["id"] for r in rows[:2]] + [rows[3]["id"]]
    side_id = rows[2]["id"]
    child_sid = rows[4]["session_id"]
    assert rows[2]["session_id"] == sid and child_sid != sid

    page = html.unescape(httpx.get(f"{proxy.url}/ui/sessions/{sid}").text)
    assert "5 requests" not in page and "4 requests" in page  # the session's, all of them
    assert turn_rows(page) == lead_ids  # the lead's turns only
    assert 'id="context-chart" class="chart" data-conversation="lead"' in page
    chart = page.split('id="context-chart"', 1)[1].split("</svg>", 1)[0]
    assert chart.count("<circle") == 3 * 3  # three series, the lead's three turns each
    listed = page.split('id="conversations"', 1)[1].split("</section>", 1)[0]
    assert "lead" in listed and "side 1" in listed
    link = re.search(r'href="(/ui/sessions/[^"]+\?conversation=[^"]+)">side 1<', listed)
    assert link is not None
    children = page.split('id="child-sessions"', 1)[1].split("</section>", 1)[0]
    assert f'href="/ui/sessions/{child_sid}"' in children.replace("%2F", "/")

    side = html.unescape(httpx.get(proxy.url + link.group(1)).text)
    assert turn_rows(side) == [side_id]
    assert 'id="shown-conversation">side 1<' in side
    assert 'data-conversation="side 1"' in side

    # the child's page: its own chart, its parent linked
    own = html.unescape(httpx.get(f"{proxy.url}/ui/sessions/{child_sid}").text)
    assert turn_rows(own) == [rows[4]["id"]]
    assert 'id="conversations"' not in own
    assert "parent <a href=" in own


def test_one_conversation_shows_no_list(agent_proxy: Any, anthropic_upstream: Any) -> None:
    proxy = agent_proxy()
    lead = "You are Claude Code. " * 10
    send(proxy, body(lead, 1), LEAD_KEY)
    send(proxy, body(lead, 2), LEAD_KEY)
    rows = completed_rows(proxy, 2)
    page = html.unescape(httpx.get(f"{proxy.url}/ui/sessions/{rows[0]['session_id']}").text)
    assert turn_rows(page) == [r["id"] for r in rows]
    assert 'id="conversations"' not in page and 'id="child-sessions"' not in page


def _row(rid: str, system: str | None, opening: str = "") -> dict[str, Any]:
    report = {} if system is None else {"prune": {"conversation": system, "opening": opening}}
    return {"id": rid, "report": report, "billed_before": 10}


def test_grouping_by_either_hash() -> None:
    from proxy.inspect.conversations import chosen, conversations

    rows = [
        _row("r1", "sysA", "taskA"),
        _row("r2", "sysA", "taskA"),
        _row("r3", "sysB", "taskB"),  # a sub-agent
        _row("r4", "sysA", "summary"),  # the lead compacted its own history: same system
        _row("r5", None),  # prune did not run: the lead's
        _row("r6", "sysC", "summary"),  # its system prompt changed after that: same opening
        _row("r7", "sysB", "taskB"),
    ]
    groups = conversations(rows)
    assert [(g.label, [r["id"] for r in g.rows]) for g in groups] == [
        ("lead", ["r1", "r2", "r4", "r5", "r6"]),
        ("side 1", ["r3", "r7"]),
    ]
    assert chosen(groups, "r3") is groups[1]
    assert chosen(groups, "nope") is groups[0] and chosen(groups, None) is groups[0]
    only = conversations([_row("a", None), _row("b", None)])
    assert [g.label for g in only] == ["lead"] and len(only[0].rows) == 2
