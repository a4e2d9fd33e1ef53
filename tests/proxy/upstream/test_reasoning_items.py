"""A Responses client bridged to another provider, then switched to an OpenAI model
(``proxy.upstream.reasoning_items``): the bridge's reasoning items reach the client with marked
ids, and OpenAI's own API is never sent a reasoning item it cannot resolve (it answers 404 "Item
with id 'rs_…' not found" to the whole history, on every retry). Scripted upstreams on loopback,
a live proxy in process."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.upstream.reasoning_items import MARK, resolvable
from tests.conftest import in_process, proxy_settings
from tests.support.anthropic_upstream import sse_reply
from tests.support.edge_upstream import EdgeUpstream, Reply, sse

os.environ["DISABLE_AIOHTTP_TRANSPORT"] = "True"  # litellm on httpx, as the other bridge tests
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Accessing the 'model_\w+' attribute on the instance"
)
CHUNK = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "deepseek-reasoner"}
ENCRYPTED = {"type": "reasoning", "id": "rs_0a1b2c", "summary": [], "encrypted_content": "gAAAAB"}


def _reasoning_answer(stream: bool) -> Reply:
    """A chat provider that reasons (DeepSeek's ``reasoning_content``)."""
    if not stream:
        message = {"role": "assistant", "content": "Hi", "reasoning_content": "think"}
        return Reply.json({"id": "c", "object": "chat.completion", "model": "deepseek-reasoner",
                           "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                           "usage": {"prompt_tokens": 3, "completion_tokens": 1}})  # fmt: skip
    return sse_reply(
        sse(
            {**CHUNK, "choices": [{"index": 0, "delta": {"role": "assistant",
                                                         "reasoning_content": "think"}}]},
            {**CHUNK, "choices": [{"index": 0, "delta": {"content": "Hi"},
                                   "finish_reason": "stop"}]},
            {**CHUNK, "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2}},
        )
    )  # fmt: skip


def _reasoning_items(r: Any, stream: bool) -> list[dict[str, Any]]:
    if not stream:
        output = r.json()["output"]
    else:
        done = [orjson.loads(line[5:]) for line in r.text.splitlines()
                if line.startswith("data:") and "response.output_item.done" in line]  # fmt: skip
        output = [e["item"] for e in done]
    return [item for item in output if item["type"] == "reasoning"]


@pytest.mark.parametrize("stream", [False, True])
async def test_switching_from_a_bridged_model_to_openai(
    tmp_path: Path, edge: EdgeUpstream, stream: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXPROXY_TEST_DEEPSEEK_KEY", "sk-ds")
    monkeypatch.setenv("CTXPROXY_TEST_OPENAI_KEY", "sk-oai")
    upstreams = [
        {"name": "ds", "kind": "litellm", "provider": "deepseek", "match": ["deepseek-*"],
         "base_url": edge.url, "api_key_env": "CTXPROXY_TEST_DEEPSEEK_KEY"},
        {"name": "oai", "kind": "openai", "match": ["gpt-*"], "base_url": edge.base_url,
         "api_key_env": "CTXPROXY_TEST_OPENAI_KEY", "call_ids": "openai"},
    ]  # fmt: skip
    settings = proxy_settings(edge.base_url, upstreams=upstreams)
    ask = {"role": "user", "content": "hi"}
    async with in_process(settings, str(tmp_path / "db")) as c:
        edge.reply = _reasoning_answer(stream)
        body = {"model": "deepseek-reasoner", "input": [ask], "stream": stream, "store": False}
        r = await c.post("/v1/responses", json=body)
        assert r.status_code == 200, r.text
        (bridged,) = _reasoning_items(r, stream)
        assert bridged["id"].startswith("rs_" + MARK)
        assert isinstance(bridged["summary"], list)  # required of a reasoning item
        if stream:  # every event names the item by the id it is finally given
            named = {orjson.loads(line[5:]).get("item_id") for line in r.text.splitlines()
                     if line.startswith("data:") and '"item_id"' in line}  # fmt: skip
            assert bridged["id"] in named and not any(
                n.startswith("rs_") and not n.startswith("rs_" + MARK) for n in named if n
            )

        later = {"role": "user", "content": "go on"}
        # a reasoning item with its text and no encrypted content (a vLLM server's)
        stray = {
            "type": "reasoning",
            "id": "rs_99",
            "summary": [{"type": "summary_text", "text": "x"}],
        }
        # each reasoning item before the answer it led to (one before a user's message is an
        # orphan the chain repair drops)
        said = [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": t}],
            }
            for t in ("Hi", "Hey", "Hello")
        ]
        history = [ask, bridged, said[0], ENCRYPTED, said[1], stray, said[2], later]
        edge.reply = Reply.json({"id": "resp_1", "object": "response", "status": "completed",
                                 "output": [], "usage": {"input_tokens": 5, "output_tokens": 1,
                                                         "total_tokens": 6}})  # fmt: skip
        # with store on, the stray item is OpenAI's to find (the proxy's own check of which
        # ids a principal may name is another test's): only the bridge's goes
        for store, sent, kept in (
            (False, history, [ask, said[0], ENCRYPTED, said[1], said[2], later]),
            (None, [*history[:5], later], [ask, said[0], ENCRYPTED, said[1], later]),
        ):
            switched: dict[str, Any] = {"model": "gpt-5", "input": sent}
            if store is not None:
                switched["store"] = store
            r = await c.post("/v1/responses", json=switched)
            assert r.status_code == 200, r.text
            assert edge.last.json()["input"] == kept


def test_a_history_openai_can_resolve_goes_byte_for_byte() -> None:
    body = orjson.dumps({"model": "gpt-5", "store": False,
                         "input": [{"role": "user", "content": "hi"}, ENCRYPTED]})  # fmt: skip
    assert resolvable(body) is body
    spaced = body.replace(b'"store":false', b'"store": false')
    assert resolvable(spaced) is spaced
    stored = orjson.dumps({"model": "gpt-5", "input": [{"type": "reasoning", "id": "rs_1"}]})
    assert resolvable(stored) is stored  # with store on, OpenAI finds it by its id


def test_a_compactions_encrypted_content_hides_no_reasoning_item() -> None:
    """The scan counts encrypted contents against the items that need one: a compaction's own,
    or an empty one, stands for no reasoning item's."""
    stray = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "x"}]}
    for other in ({"type": "compaction", "encrypted_content": "gAAA"},
                  {**ENCRYPTED, "encrypted_content": ""}):  # fmt: skip
        body = orjson.dumps({"model": "gpt-5", "store": False, "input": [other, stray]})
        kept = orjson.loads(resolvable(body))["input"]
        assert stray not in kept
