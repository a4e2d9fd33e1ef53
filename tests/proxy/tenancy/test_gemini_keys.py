"""Gemini's clients present their key as the Gemini upstream reads it: ``x-goog-api-key``, else
``?key=`` in the URL, else a bearer token. The request's principal is that credential, so two
clients with their own keys in the URL never share state (they were both ``anonymous``), nor two
sending one shared dummy bearer token beside their own key header. Client A's agent makes a
folder in session ``proj``; client B names ``proj`` its parent session and asks to delete "the
folder you just created": B's forwarded body holds nothing of A's, while A's own sub-agent does
get the pointer (so the path is one that would leak)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.settings import settings_from_mapping
from tests.conftest import in_process, log_rows
from tests.support.edge_upstream import EdgeUpstream, Reply

FOLDER = "key_a_private_dir_7731"
PATH = "/v1beta/models/gemini-2.5-pro:generateContent"
TOOLS = [{"functionDeclarations": [{"name": "run_shell_command"}]}]
MADE = [
    {"role": "user", "parts": [{"text": "set up"}]},
    {"role": "model", "parts": [{"functionCall": {"name": "run_shell_command",
                                                  "args": {"command": f"mkdir -p /w/{FOLDER}"}}}]},
    {"role": "user", "parts": [{"functionResponse": {"name": "run_shell_command",
                                                     "response": {"output": ""}}}]},
    {"role": "model", "parts": [{"text": "done"}]},
    {"role": "user", "parts": [{"text": "thanks"}]},
]  # fmt: skip
ASK = [
    {"role": "user", "parts": [{"text": "hello"}]},
    {"role": "model", "parts": [{"text": "hi"}]},
    {"role": "user", "parts": [{"text": "delete the folder you just created"}]},
]
ANSWER = {"candidates": [{"content": {"parts": [{"text": "ok"}], "role": "model"}, "index": 0}]}


def _key(where: str, key: str) -> tuple[str, dict[str, str]]:
    """The query string and headers presenting ``key`` in ``where``."""
    if where == "query":
        return f"?key={key}", {}
    return "", {"authorization": "Bearer shared-dummy-token", "x-goog-api-key": key}


@pytest.mark.parametrize("where", ["query", "header beside a shared bearer"])
async def test_two_gemini_keys_never_share_state(
    edge: EdgeUpstream, tmp_path: Path, where: str
) -> None:
    edge.reply = Reply.json(ANSWER)
    settings = settings_from_mapping(
        {
            "upstreams": [
                {"name": "g", "kind": "gemini", "match": ["gemini-*"], "base_url": edge.url}
            ]
        }
    )

    async def send(key: str, contents: list[Any], session: str, parent: str | None = None) -> str:
        query, headers = _key(where, key)
        headers = {**headers, "content-type": "application/json", "x-session-id": session}
        if parent is not None:
            headers["x-parent-session-id"] = parent
        got = await client.post(PATH + query, content=orjson.dumps({"contents": contents,
                                "tools": TOOLS}), headers=headers)  # fmt: skip
        assert got.status_code == 200, got.text
        return edge.last.body.decode()

    async with in_process(settings, str(tmp_path / "db")) as client:
        await send("PROVIDER-KEY-A", MADE, "proj")
        assert FOLDER not in await send("PROVIDER-KEY-B", ASK, "b1", parent="proj")
        assert FOLDER in await send("PROVIDER-KEY-A", ASK, "a1", parent="proj")
        rows = await log_rows(client)
    principals = {r["session_id"].split("/")[0] for r in rows}
    assert len(principals) == 2 and "anonymous" not in principals
