"""A loop break_loops noted is shown wherever a request or a session is read: the session list
counts the session's loops (SQLite here; the store contract checks PostgreSQL's count), the
session page names each turn's loops by kind, the request page lists them, ``/metrics`` counts
them by kind."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import orjson

from tests.conftest import in_process, log_rows, proxy_settings
from tests.support.factories import assistant, request, result, shell, user

FAILURE = "Traceback (most recent call last):\n  x\nModuleNotFoundError: No module named 'foo'"


def looping(times: int) -> list[dict[str, Any]]:
    """An agent running the same failing command ``times`` times."""
    msgs: list[dict[str, Any]] = [user("fix the bug")]
    for n in range(times):
        msgs += [
            assistant(None, shell(f"c{n}", "python run.py")),
            result(f"c{n}", FAILURE + "\n[exit code 1]"),
        ]
    return msgs


async def test_a_loop_shows_in_the_session_list_session_and_request_pages(
    tmp_path: Path, edge: Any
) -> None:
    settings = proxy_settings(edge.base_url)
    headers = {"content-type": "application/json", "x-session-id": "loops"}
    async with in_process(settings, str(tmp_path / "db")) as client:
        for times in (1, 3):  # the first request has no loop, the second one
            body = request(*looping(times), model="gpt-4o")
            r = await client.post(
                "/v1/chat/completions", content=orjson.dumps(body), headers=headers
            )
            assert r.status_code == 200
        rows = await log_rows(client)
        noted = [row for row in rows if "repeated_failure" in str(row.get("report"))]
        assert len(noted) == 1
        session = noted[0]["session_id"]
        index = html.unescape((await client.get("/ui")).text)
        session_page = html.unescape((await client.get(f"/ui/sessions/{session}")).text)
        request_page = html.unescape((await client.get(f"/ui/requests/{noted[0]['id']}")).text)
        metrics = (await client.get("/metrics")).text
    sessions_table = index[index.index('<table id="sessions">') : index.index("</table>")]
    assert '<td class="num up">1</td>' in sessions_table
    turns = session_page[session_page.index('<table id="turns">') :]
    assert turns.count("repeated_failure") == 1
    assert "Loops" in request_page and "repeated_failure" in request_page
    assert 'ctxproxy_loops_total{kind="repeated_failure"} 1.0' in metrics
