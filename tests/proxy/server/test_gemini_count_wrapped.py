"""Gemini's ``:countTokens`` takes either ``{"contents": …}`` or the request it would count,
wrapped: ``{"generateContentRequest": {"model", "contents", "systemInstruction", "tools"}}``.
The wrapped form is read as the other: rewritten as a ``generateContent`` body would be (a
doubled function response repaired), passed through wrapped to a ``gemini`` upstream, counted
here for the others."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import in_process
from tests.proxy.server.test_gemini_routes import HEADERS, MODEL, body, settings
from tests.support.edge_upstream import EdgeUpstream, Reply

CALL = {"functionCall": {"id": "c1", "name": "run_shell_command", "args": {"command": "ls"}}}
DONE = {"functionResponse": {"id": "c1", "name": "run_shell_command",
                             "response": {"output": "a.txt"}}}  # fmt: skip


def doubled() -> dict[str, Any]:
    return body(
        {"role": "user", "parts": [{"text": "list the files"}]},
        {"role": "model", "parts": [CALL]},
        {"role": "user", "parts": [DONE, DONE]},
    )


async def test_a_wrapped_request_is_rewritten_and_passed_through_wrapped(
    edge: EdgeUpstream, tmp_path: Path
) -> None:
    edge.reply = Reply.json({"totalTokens": 42})
    wrapped = {"generateContentRequest": {"model": f"models/{MODEL}", **doubled()}}
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        got = await client.post(f"/v1beta/models/{MODEL}:countTokens", json=wrapped,
                                headers=HEADERS)  # fmt: skip
    assert got.status_code == 200, got.text
    assert got.json() == {"totalTokens": 42}
    sent = edge.last.json()
    assert set(sent) == {"generateContentRequest"}
    inner = sent["generateContentRequest"]
    assert inner["model"] == f"models/{MODEL}"
    assert inner["contents"][2]["parts"] == [DONE]  # the doubled response repaired
    assert inner["systemInstruction"] == doubled()["systemInstruction"]


async def test_a_wrapped_request_is_counted_as_the_plain_one(
    edge: EdgeUpstream, tmp_path: Path
) -> None:
    plain = doubled()
    wrapped = {"generateContentRequest": {"model": "models/gpt-4o", **plain}}
    path = "/v1beta/models/gpt-4o:countTokens"
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        one = await client.post(path, json=plain, headers=HEADERS)
        two = await client.post(path, json=wrapped, headers=HEADERS)
        bad = await client.post(path, json={"generateContentRequest": []}, headers=HEADERS)
    assert one.status_code == 200 and two.status_code == 200, two.text
    assert two.json() == one.json()
    assert bad.status_code == 400 and bad.json()["error"]["status"] == "INVALID_ARGUMENT"
