"""The workspace map in ``show`` and on ``/ui``: a request through a live proxy whose agent
listed, read and edited files; its row's report says the map's source and size and draws the
folded tree, as text."""

from __future__ import annotations

import io
from typing import Any

import httpx
from rich.console import Console

from proxy.inspect.show import render
from tests.support.factories import assistant, request, result, shell, system, user


def _history() -> list[dict[str, Any]]:
    return [
        system("You are a coding agent."),
        user("fix the parser"),
        assistant(None, shell("c1", "cd /srv/app && ls")),
        result("c1", "pyproject.toml\nsrc\n<b>evil</b>.py\n"),
        assistant(None, shell("c2", "cd /srv/app && cat src/parse.py")),
        result("c2", "def parse(): ...\n"),
        assistant(None, shell("c3", "cd /srv/app && sed -i 's/a/b/' src/parse.py")),
        result("c3", ""),
        user("go on"),
    ]


def _row(proxy: Any) -> dict[str, Any]:
    sent = httpx.post(
        proxy.base_url + "/chat/completions",
        json=request(*_history()),
        headers={"x-session-id": "ws-shown"},
    )
    assert sent.status_code == 200
    return proxy.row(sent.headers["x-ctxproxy-request-id"])  # type: ignore[no-any-return]


def test_show_and_ui_draw_the_workspace_map(live_proxy, fake_upstream) -> None:  # type: ignore[no-untyped-def]
    proxy = live_proxy()
    row = _row(proxy)
    ws = row["report"]["workspace"]
    assert ws["source"] == "observed" and ws["root"] == "/srv/app" and ws["changed"] == 1
    out = io.StringIO()
    render(row, Console(file=out, width=120, color_system=None))
    text = out.getvalue()
    assert "Workspace map" in text and "source" in text and "observed" in text
    assert "4 entries: 2 files, 2 folders, 1 changed" in text
    assert "parse.py *" in text and "pyproject.toml" in text
    page = httpx.get(f"{proxy.url}/ui/requests/{row['id']}").text
    table = page.split('id="workspace"')[1].split("</table>")[0]
    assert "parse.py *" in table and "/srv/app" in table
    assert "evil" not in page  # markup is not a path: never in the map
