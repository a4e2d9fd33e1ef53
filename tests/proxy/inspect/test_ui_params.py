"""/ui query parameters and cookies come from anyone: a malformed one is a 400 or ignored, never
a 500."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import in_process, proxy_settings

UPSTREAM = "http://upstream.test/v1"


@pytest.mark.parametrize(
    ("query", "status"),
    [
        ("", 200),
        ("?status=200", 200),
        ("?status=%20404%20", 200),
        ("?limit=5", 200),
        ("?status=%C2%B2", 400),  # '²' passes str.isdigit but not int()
        ("?status=%D9%A3", 400),  # Arabic-Indic three: int() takes it, no status is one
        ("?status=12345678901234567890", 400),  # overflows SQLite's integer
        ("?status=-1", 400),
        ("?status=abc", 400),
        ("?limit=%C2%B2", 400),
        ("?limit=-3", 400),
        ("?limit=99999999999999999999999", 200),  # capped at the maximum
        ("?status=&limit=", 200),  # empty fields of the filter form
    ],
)
async def test_index_filters_are_parsed_strictly(tmp_path: Path, query: str, status: int) -> None:
    async with in_process(proxy_settings(UPSTREAM), str(tmp_path / "db")) as client:
        r = await client.get("/ui" + query)
        assert r.status_code == status
        if status == 400:
            assert "filter" in r.text.lower()


@pytest.mark.parametrize(
    "cookie", ["ключ", "\u00e9t\u00e9", "x" * 64, "", "[\x7f]", "%FF%FE", "a b c"]
)
async def test_any_admin_cookie_is_a_login_page_not_a_500(
    tmp_path: Path, monkeypatch, cookie: str
) -> None:
    monkeypatch.setenv("CTXPROXY_ADMIN_KEY", "the-admin-key")
    monkeypatch.setenv("CTXPROXY_KEYS", "client-key")
    settings = proxy_settings(
        UPSTREAM,
        auth={"mode": "keys"},
        upstreams=[{"name": "u", "base_url": UPSTREAM, "api_key_env": "UP_KEY"}],
    )
    async with in_process(settings, str(tmp_path / "db")) as client:
        raw = f"ctxproxy_admin={cookie}".encode()  # raw bytes, as any client may send
        r = await client.get("/ui", headers={"cookie": raw})
        assert r.status_code == 401 and 'name="key"' in r.text
