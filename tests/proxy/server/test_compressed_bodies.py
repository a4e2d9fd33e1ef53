"""A request body sent with ``Content-Encoding``: gzip and deflate (zlib-wrapped or raw) are
decoded and forwarded decoded, without the header; other codings are refused with 415 naming
them, in the client's protocol; a body that decodes past the limit is 413 however small it came;
broken data is 400. Each refusal is logged, and nothing is forwarded."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import in_process, log_rows, proxy_settings
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import anthropic_message, chat_completion

CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi, compressed"}]}
MESSAGES = {"model": "claude-x", "max_tokens": 50, "messages": CHAT["messages"]}
LIMIT = 64 * 1024


def settings(edge: EdgeUpstream) -> Any:
    return proxy_settings(
        edge.base_url,
        upstreams=[
            {"name": "claude", "match": ["claude-*"], "kind": "anthropic",
             "base_url": edge.url},
            {"name": "openai", "match": ["*"], "base_url": edge.base_url},
        ],
        limits={"max_body_bytes": LIMIT},
    )  # fmt: skip


def raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=-15)
    return packer.compress(data) + packer.flush()


def headers(coding: str) -> dict[str, str]:
    return {"content-type": "application/json", "content-encoding": coding}


@pytest.mark.parametrize(
    ("coding", "pack"),
    [
        ("gzip", gzip.compress),
        ("x-gzip", gzip.compress),
        ("deflate", zlib.compress),
        ("deflate", raw_deflate),
        ("GZip, identity", gzip.compress),
        ("identity", lambda data: data),
        ("gzip", lambda data: gzip.compress(data[:9]) + gzip.compress(data[9:])),
    ],
    ids=["gzip", "x-gzip", "deflate", "raw-deflate", "gzip-identity", "identity", "members"],
)
async def test_a_compressed_body_is_read_and_forwarded_decoded(
    edge: EdgeUpstream, tmp_path: Path, coding: str, pack: Any
) -> None:
    edge.replies = [Reply.json(chat_completion("ok")), Reply.json(anthropic_message("ok"))]
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        for path, body in (("/v1/chat/completions", CHAT), ("/v1/messages", MESSAGES)):
            got = await client.post(path, content=pack(orjson.dumps(body)), headers=headers(coding))
            assert got.status_code == 200, got.text
            seen = edge.last
            assert seen.json()["messages"] == body["messages"]
            assert seen.header("content-encoding") is None  # the body went decoded


@pytest.mark.parametrize("coding", ["zstd", "br", "compress", "gzip, br", "gzip, gzip"])
async def test_another_coding_is_refused_naming_it(
    edge: EdgeUpstream, tmp_path: Path, coding: str
) -> None:
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        chat = await client.post(
            "/v1/chat/completions", content=b"\x28\xb5", headers=headers(coding)
        )
        messages = await client.post("/v1/messages", content=b"\x28\xb5", headers=headers(coding))
        rows = await log_rows(client)
    assert chat.status_code == messages.status_code == 415
    assert f"Content-Encoding '{coding}' is not supported" in chat.json()["error"]["message"]
    assert messages.json()["type"] == "error"  # Anthropic's shape
    assert coding in messages.json()["error"]["message"]
    assert chat.headers["connection"] == "close"  # refused unread
    assert edge.seen == []
    assert sorted(r["status"] for r in rows) == [415, 415]


async def test_a_body_that_decodes_past_the_limit_is_too_large(
    edge: EdgeUpstream, tmp_path: Path
) -> None:
    """A few hundred bytes that would decode to megabytes: refused as the body would be."""
    padded = {**CHAT, "messages": [{"role": "user", "content": "x" * (8 * LIMIT)}]}
    bomb = gzip.compress(orjson.dumps(padded))
    assert len(bomb) < LIMIT // 10
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        got = await client.post("/v1/chat/completions", content=bomb, headers=headers("gzip"))
    assert got.status_code == 413 and "decoded" in got.json()["error"]["message"]
    assert edge.seen == []


@pytest.mark.parametrize(
    ("coding", "data"),
    [
        ("gzip", orjson.dumps(CHAT)),  # labelled gzip, sent plain
        ("gzip", gzip.compress(orjson.dumps(CHAT))[:-12]),  # cut short
        ("gzip", gzip.compress(orjson.dumps(CHAT)) + b"junk"),
        ("deflate", b"\x00\x01\x02 not deflate"),
    ],
    ids=["plain", "truncated", "trailing", "not-deflate"],
)
async def test_broken_compressed_data_is_a_bad_request(
    edge: EdgeUpstream, tmp_path: Path, coding: str, data: bytes
) -> None:
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        got = await client.post("/v1/chat/completions", content=data, headers=headers(coding))
    assert got.status_code == 400
    assert f"not valid {coding} data" in got.json()["error"]["message"]
    assert edge.seen == []


async def test_gemini_and_responses_bodies_are_decoded_too(
    edge: EdgeUpstream, tmp_path: Path
) -> None:
    """Every route reads its body the same way: Gemini's native relay and Responses."""
    gemini = {"contents": [{"role": "user", "parts": [{"text": "hi, compressed"}]}]}
    responses = {"model": "gpt-5", "input": "hi, compressed"}
    edge.replies = [
        Reply.json({"candidates": [{"content": {"parts": [{"text": "ok"}], "role": "model"}}]}),
        Reply.json({"id": "resp_1", "object": "response", "output": []}),
    ]
    cfg = settings(edge)
    cfg = cfg.model_copy(
        update={
            "upstreams": [
                cfg.upstreams[0].model_copy(
                    update={"name": "g", "kind": "gemini", "match": ["gemini-*"]}
                ),
                *cfg.upstreams[1:],
            ]
        }
    )
    async with in_process(cfg, str(tmp_path / "db")) as client:
        for path, body in (
            ("/v1beta/models/gemini-2.5-flash:generateContent", gemini),
            ("/v1/responses", responses),
        ):
            got = await client.post(
                path, content=gzip.compress(orjson.dumps(body)), headers=headers("gzip")
            )
            assert got.status_code == 200, got.text
            assert edge.last.json() == body
            assert edge.last.header("content-encoding") is None
