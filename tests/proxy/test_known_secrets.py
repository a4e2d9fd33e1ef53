"""The server's own keys are redacted by value wherever a text holds them: its proxy keys, its
admin key and the upstreams' keys, named to the redaction at start-up. "my proxy key is
alice-proxy-key-0001" was stored, logged and shown as said (a key of no known shape after no
secret's name)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from rules.redact import redact_text
from rules.redact_known import set_known
from tests.conftest import in_process, log_rows, proxy_settings
from tests.support.edge_upstream import EdgeUpstream

PROXY_KEY, ADMIN_KEY, UPSTREAM_KEY = (
    "alice-proxy-key-0001",
    "admin-key-0003",
    "upstream-secret-0004",
)


@pytest.fixture(autouse=True)
def forget_known() -> object:
    yield
    set_known(())  # the next test's app names its own


async def test_the_servers_own_keys_are_never_stored(
    tmp_path: Path, edge: EdgeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXPROXY_KEYS", f"{PROXY_KEY},bob-proxy-key-0002")
    monkeypatch.setenv("CTXPROXY_ADMIN_KEY", ADMIN_KEY)
    monkeypatch.setenv("FAKE_UPSTREAM_KEY", UPSTREAM_KEY)
    upstream = {"name": "fake", "match": ["*"], "base_url": edge.base_url,
                "api_key_env": "FAKE_UPSTREAM_KEY"}  # fmt: skip
    settings = proxy_settings(
        edge.base_url, upstreams=[upstream], auth={"mode": "keys"},
        store={"capture_payloads": True},
    )  # fmt: skip
    said = (
        f"my proxy key is {PROXY_KEY}, the admin one is {ADMIN_KEY} and the gateway's "
        f"upstream key is {UPSTREAM_KEY}; fix the tests"
    )
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": said}]}
    async with in_process(settings, str(tmp_path / "db")) as c:
        r = await c.post(
            "/v1/chat/completions", json=body, headers={"authorization": f"Bearer {PROXY_KEY}"}
        )
        assert r.status_code == 200, r.text
        rows = await log_rows(c)
    stored = orjson.dumps(rows).decode()
    for key in (PROXY_KEY, ADMIN_KEY, UPSTREAM_KEY):
        assert key not in stored
    assert "[REDACTED]" in stored


def test_a_known_value_is_redacted_whatever_its_shape() -> None:
    set_known(["plain-words-key", "short"])  # under 8 characters: no key
    assert redact_text("use plain-words-key here, in short") == "use [REDACTED] here, in short"


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ('{"x-auth": "server-openai-key-XY"}', False),  # 20 of 27 characters, its start
        ("key server-openai-key was refused", False),  # its first 17 characters
        ("the server-openai-k prefix is ours", True),  # 15 characters: no quote of it
        ("see server-openai-settings.yaml…", True),  # shares 14 characters: another name
        ("server-openai-key-XYZ9abc", False),  # the whole key
    ],
)
def test_a_quote_of_a_keys_start_is_redacted(text: str, kept: bool) -> None:
    """An upstream echoing part of the server's key in a 200 answer had the part stored (and
    shown by ``ctxproxy show``): the start of a long key, 16 characters or more, goes too."""
    set_known(["server-openai-key-XYZ9abc"])
    out = redact_text(text)
    assert ("server-open" in out) is kept, out
    assert "XY" not in out or kept
