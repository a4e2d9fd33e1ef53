"""An upstream's error may quote the request back (an unknown model, field or content type). The
redaction of what the client is told must not tell it which of its own words are part of a
secret the server holds: a run sharing 8 characters with the server's upstream key, a key's
first 4 characters beside a mask, or a quote of a secret's first 16 characters, redacted when
the client itself sent it, let any tenant read the server's key a character a request (64
candidates in one request, the one redacted names the next character). The same runs, quoted
from somewhere other than the request (the key the upstream was sent), still go."""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any

import pytest

from rules.redact import REDACTED
from tests.conftest import in_process, proxy_settings
from tests.support.edge_upstream import EdgeUpstream, Reply

SERVER_KEY = "sk-upstream-server-key-XYZ123456789"
OTHER_TENANT = "alice-proxy-key-0001-7f3c9a"  # another principal's proxy key
CLIENT_KEY = "bob-proxy-key-0002-e41d07"
ALPHABET = string.ascii_letters + string.digits + "_-"


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAUDE_SERVER_KEY", SERVER_KEY)
    monkeypatch.setenv("ALICE_KEY", OTHER_TENANT)
    monkeypatch.setenv("BOB_KEY", CLIENT_KEY)


def _settings(edge: EdgeUpstream) -> Any:
    claude = {
        "name": "claude",
        "kind": "anthropic",
        "match": ["claude-*"],
        "base_url": edge.url,
        "api_key_env": "CLAUDE_SERVER_KEY",
    }
    principals = {"alice": ["ALICE_KEY"], "bob": ["BOB_KEY"]}
    return proxy_settings(
        edge.base_url, auth={"mode": "keys", "principals": principals}, upstreams=[claude]
    )


def _tag_error(tag: str) -> dict[str, Any]:
    """Anthropic's 400 for an unknown content block type: it quotes the type."""
    message = f"messages.0.content.0: Input tag '{tag}' found using 'type' does not match"
    return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}


async def _echoed(tmp_path: Path, edge: EdgeUpstream, probe: str, quoted: str) -> str:
    """The error message the client gets when it sends ``probe`` and the upstream quotes
    ``quoted``."""
    edge.reply = Reply.json(_tag_error(quoted), status=400)
    body = {
        "model": "claude-x",
        "max_tokens": 5,
        "messages": [{"role": "user", "content": [{"type": probe, "text": "x"}]}],
    }
    async with in_process(_settings(edge), str(tmp_path / "db")) as c:
        r = await c.post("/v1/messages", json=body, headers={"x-api-key": CLIENT_KEY})
    assert r.status_code == 400, r.text
    return str(r.json()["error"]["message"])


@pytest.mark.parametrize(
    "candidates",
    [
        # the next character after 7 known ones: one candidate shares 8 with the key
        [SERVER_KEY[5:12] + c for c in ALPHABET],
        # after the key's first 4 characters, beside a mask
        [SERVER_KEY[:4] + c + "***" for c in ALPHABET],
        # another tenant's proxy key: its first 15 characters and one more, then more of it
        [OTHER_TENANT[:15] + c + "abcd" for c in ALPHABET],
    ],
    ids=["eight_shared", "masked_start", "secret_head"],
)
async def test_the_clients_own_words_quoted_back_are_never_redacted(
    tmp_path: Path, edge: EdgeUpstream, keys: None, candidates: list[str]
) -> None:
    probe = " ".join(candidates)
    message = await _echoed(tmp_path, edge, probe, probe)
    assert REDACTED not in message  # none of its guesses told apart
    assert probe in message


@pytest.mark.parametrize(
    "quoted",
    [
        SERVER_KEY,  # the whole key
        SERVER_KEY[3:19],  # 16 characters of it
        SERVER_KEY[:6] + "****" + SERVER_KEY[-4:],  # masked as OpenAI quotes a key
        OTHER_TENANT[:20],  # a quote of another secret's start
    ],
    ids=["whole", "part", "masked", "head"],
)
async def test_a_secret_the_request_did_not_say_is_still_redacted(
    tmp_path: Path, edge: EdgeUpstream, keys: None, quoted: str
) -> None:
    message = await _echoed(tmp_path, edge, "image_v2", f"image_v2 {quoted}")
    assert quoted not in message and REDACTED in message
