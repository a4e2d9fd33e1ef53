"""A litellm upstream whose provider signs in with the server's own environment (Vertex AI's
application default credentials, SageMaker's AWS ones) never reads a client's key: litellm
drops the one it is handed. In passthrough every client, whatever key it made up, then reaches
the provider as the server, so that upstream is treated as one with the server's key
(``UpstreamSettings.server_credentials``): provider-side state named by id is the principal's
alone, end-user ids go scoped, and its answers verify no client's credential."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from proxy.principals import Principals
from proxy.settings import settings_from_mapping
from tests.conftest import in_process
from tests.support.edge_upstream import EdgeUpstream

VERTEX = {"name": "vertex", "kind": "litellm", "provider": "vertex_ai", "match": ["gemini-*"]}
KEY = {"x-goog-api-key": "made-up-key-0000000001"}


def settings(upstream: dict[str, Any]) -> Any:
    pipeline = {"on_rule_error": "fail"}
    return settings_from_mapping(
        {"upstreams": [upstream], "pipeline": pipeline, "auth": {"mode": "passthrough"}}
    )


@pytest.mark.parametrize("provider", ["vertex_ai", "sagemaker"])
def test_a_provider_signed_in_from_the_environment_is_the_servers_credential(
    provider: str,
) -> None:
    ambient = settings({**VERTEX, "provider": provider}).upstreams[0]
    assert ambient.server_credentials
    keyed = settings({**VERTEX, "provider": "gemini"}).upstreams[0]
    assert not keyed.server_credentials  # litellm sends the client's key to AI Studio
    native = settings({"name": "g", "kind": "gemini", "match": ["*"]}).upstreams[0]
    assert not native.server_credentials


async def test_state_named_by_id_is_refused_before_litellm_is_called(
    tmp_path: Path, edge: EdgeUpstream
) -> None:
    body = {
        "contents": [{"role": "user", "parts": [{"text": "sum up"}]}],
        "cachedContent": "projects/p/locations/l/cachedContents/someone-elses",
    }
    async with in_process(settings(VERTEX), str(tmp_path / "db")) as client:
        path = "/v1beta/models/gemini-2.5-pro:generateContent"
        r = await client.post(path, json=body, headers=KEY)
        assert r.status_code == 400, r.text
        assert "cachedContent" in r.json()["error"]["message"]
    assert edge.seen == []


def test_an_answer_signed_with_the_servers_credential_verifies_no_key() -> None:
    upstream = settings(VERTEX).upstreams[0]
    principals = Principals(settings(VERTEX).auth, b"s" * 32)
    made_up = principals.of(KEY)
    client = ("10.0.0.7", 5000)
    principals.answered(made_up, 200, upstream, client)
    assert principals.lane(made_up, client) != made_up  # still its network's unverified lane
