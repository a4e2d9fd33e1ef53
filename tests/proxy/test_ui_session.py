"""The /ui login cookie: signed with its expiry, so it ends on its own (Max-Age set), a forged
or tampered expiry is refused, and a changed admin key ends every session."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from proxy.ui import _cookie_token
from tests.conftest import in_process, proxy_settings

UPSTREAM = "http://upstream.test/v1"
ADMIN = "the-admin-key"


@pytest.fixture
def keys_settings(monkeypatch):
    monkeypatch.setenv("CTXPROXY_ADMIN_KEY", ADMIN)
    return proxy_settings(
        UPSTREAM,
        auth={"mode": "keys", "ui_session_hours": 2},
        upstreams=[{"name": "u", "base_url": UPSTREAM, "api_key_env": "UP_KEY"}],
    )


async def test_login_sets_a_cookie_that_expires(tmp_path: Path, keys_settings) -> None:
    async with in_process(keys_settings, str(tmp_path / "db")) as client:
        r = await client.get("/ui?key=" + ADMIN)
        assert r.status_code == 303
        header = r.headers["set-cookie"].lower()
        assert "max-age=7200" in header and "httponly" in header
        cookie = r.cookies["ctxproxy_admin"]
        expires = int(cookie.split(".")[0])
        assert abs(expires - (time.time() + 7200)) < 60
        ok = await client.get("/ui", headers={"cookie": f"ctxproxy_admin={cookie}"})
        assert ok.status_code == 200


@pytest.mark.parametrize(
    "make",
    [
        lambda now: _cookie_token(ADMIN, now - 1),  # expired
        lambda now: _cookie_token("another-key", now + 3600),  # signed with another key
        lambda now: f"{now + 10**6}." + _cookie_token(ADMIN, now + 60).split(".")[1],  # moved
        lambda now: _cookie_token(ADMIN, now + 60).split(".")[1],  # no expiry
    ],
)
async def test_expired_or_forged_cookies_get_the_login_page(
    tmp_path: Path, keys_settings, make
) -> None:
    cookie = make(int(time.time()))
    async with in_process(keys_settings, str(tmp_path / "db")) as client:
        r = await client.get("/ui", headers={"cookie": f"ctxproxy_admin={cookie}"})
        assert r.status_code == 401 and 'name="key"' in r.text
