"""The overhead benchmarks' floor (``bench.bare_relay``): it relays each protocol's answer as the
upstream gave it, whole or as a stream, and refuses a model no upstream serves."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import orjson
import pytest

from bench import upstream_server
from bench.bare_relay import create_bare_app
from proxy.settings import settings_from_mapping
from tests.support.live import serve_in_thread, stop


@pytest.fixture(scope="module")
def relay() -> Iterator[tuple[str, str]]:
    upstream, root = serve_in_thread(upstream_server.app)
    settings = settings_from_mapping(
        {
            "upstreams": [
                {"name": "a", "match": ["claude-*"], "kind": "anthropic", "base_url": root},
                {"name": "o", "match": ["gpt-*"], "kind": "openai", "base_url": f"{root}/v1"},
            ]
        }
    )
    server, base = serve_in_thread(create_bare_app(settings))
    yield base, root
    stop(server)
    stop(upstream)


@pytest.mark.parametrize(
    ("path", "model"),
    [("/v1/chat/completions", "gpt-4o"), ("/v1/messages", "claude-x"), ("/v1/responses", "gpt-5")],
)
@pytest.mark.parametrize("stream", [False, True])
def test_the_answer_is_the_upstreams(
    relay: tuple[str, str], path: str, model: str, stream: bool
) -> None:
    base, root = relay
    body = orjson.dumps({"model": model, "stream": stream, "messages": [], "input": "hi"})
    headers = {"content-type": "application/json", "anthropic-version": "2023-06-01"}
    direct = httpx.post(root + path, content=body, headers=headers)
    relayed = httpx.post(base + path, content=body, headers=headers)
    assert relayed.status_code == direct.status_code == 200
    assert relayed.content == direct.content
    assert relayed.headers["content-type"] == direct.headers["content-type"]


def test_a_model_no_upstream_serves_is_refused(relay: tuple[str, str]) -> None:
    base, _ = relay
    answer = httpx.post(f"{base}/v1/chat/completions", content=b'{"model": "llama"}')
    assert answer.status_code == 404
