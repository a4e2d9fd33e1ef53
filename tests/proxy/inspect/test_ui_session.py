"""The /ui login: a POST form (a key in the address is refused, never read), a cookie signed with
its expiry (Max-Age set, HttpOnly, SameSite=Strict, Secure over https: TLS, or X-Forwarded-Proto
from a trusted proxy only), a forged, tampered or too-distant expiry refused, and a changed admin
key ending every session."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from proxy.auth import session_token
from tests.conftest import in_process, proxy_settings
from tests.support.live import stop
from tests.support.served import serve_like_cli

UPSTREAM = "http://upstream.test/v1"
ADMIN = "the-admin-key"


@pytest.fixture
def keys_settings(monkeypatch):
    monkeypatch.setenv("CTXPROXY_ADMIN_KEY", ADMIN)
    monkeypatch.setenv("CTXPROXY_KEYS", "client-key")
    return proxy_settings(
        UPSTREAM,
        auth={"mode": "keys", "ui_session_hours": 2},
        upstreams=[{"name": "u", "base_url": UPSTREAM, "api_key_env": "UP_KEY"}],
    )


def attributes(set_cookie: str) -> dict[str, str]:
    parts = [p.strip() for p in set_cookie.split(";")]
    return {k.lower(): v for k, _, v in (p.partition("=") for p in parts[1:])}


async def test_login_posts_and_sets_a_cookie_that_expires(tmp_path: Path, keys_settings) -> None:
    async with in_process(keys_settings, str(tmp_path / "db")) as client:
        page = await client.get("/ui/sessions/s1?x=1")
        assert page.status_code == 401
        assert 'method="post"' in page.text and 'action="/ui/login"' in page.text
        assert 'name="next" value="/ui/sessions/s1?x=1"' in page.text
        r = await client.post("/ui/login", data={"key": ADMIN, "next": "/ui?status=200"})
        assert r.status_code == 303 and r.headers["location"] == "/ui?status=200"
        attrs = attributes(r.headers["set-cookie"])
        assert attrs["max-age"] == "7200" and attrs["path"] == "/ui"
        assert "httponly" in attrs and attrs["samesite"] == "strict"
        assert "secure" not in attrs  # plain http: a Secure cookie would never come back
        cookie = r.cookies["ctxproxy_admin"]
        assert ADMIN not in cookie
        expires = int(cookie.split(".")[0])
        assert abs(expires - (time.time() + 7200)) < 60
        ok = await client.get("/ui", headers={"cookie": f"ctxproxy_admin={cookie}"})
        assert ok.status_code == 200


async def test_a_wrong_key_gets_the_form_again(tmp_path: Path, keys_settings) -> None:
    async with in_process(keys_settings, str(tmp_path / "db")) as client:
        r = await client.post("/ui/login", data={"key": "not-it", "next": "/ui"})
        assert r.status_code == 401 and "not the admin key" in r.text
        assert "set-cookie" not in r.headers


@pytest.mark.parametrize("path", ["/ui?key=" + ADMIN, "/ui/requests/x?key=" + ADMIN])
async def test_a_key_in_the_address_is_refused(tmp_path: Path, keys_settings, path: str) -> None:
    async with in_process(keys_settings, str(tmp_path / "db")) as client:
        r = await client.get(path)
        assert r.status_code == 400 and "login form" in r.text
        assert "set-cookie" not in r.headers
        posted = await client.post("/ui/login?key=" + ADMIN, data={"next": "/ui"})
        assert posted.status_code == 400 and "set-cookie" not in posted.headers


@pytest.mark.parametrize(
    ("next_page", "location"),
    [
        ("/ui/sessions/a", "/ui/sessions/a"),
        ("https://evil.example/ui", "/ui"),
        ("//evil.example/ui", "/ui"),
        ("/uix", "/ui"),
        ("/ui\\@evil", "/ui"),
        ("", "/ui"),
    ],
)
async def test_login_redirects_only_to_this_servers_ui(
    tmp_path: Path, keys_settings, next_page: str, location: str
) -> None:
    async with in_process(keys_settings, str(tmp_path / "db")) as client:
        r = await client.post("/ui/login", data={"key": ADMIN, "next": next_page})
        assert r.status_code == 303 and r.headers["location"] == location


async def test_the_cookie_is_secure_over_https(tmp_path: Path, keys_settings) -> None:
    async with in_process(keys_settings, str(tmp_path / "db")) as client:
        r = await client.post("https://proxy/ui/login", data={"key": ADMIN, "next": "/ui"})
        assert r.status_code == 303 and "secure" in attributes(r.headers["set-cookie"])


@pytest.mark.parametrize(("trusted", "secure"), [([], False), (["127.0.0.1"], True)])
def test_forwarded_proto_counts_from_a_trusted_proxy_only(
    tmp_path: Path, monkeypatch, trusted: list[str], secure: bool
) -> None:
    """A live server configured as ``ctxproxy serve`` does it: X-Forwarded-Proto from the
    loopback peer is believed only when that peer is listed in server.trusted_proxies."""
    monkeypatch.setenv("CTXPROXY_ADMIN_KEY", ADMIN)
    settings = proxy_settings(UPSTREAM, server={"trusted_proxies": trusted})
    server, url = serve_like_cli(settings, str(tmp_path / "db"))
    try:
        r = httpx.post(
            url + "/ui/login",
            data={"key": ADMIN, "next": "/ui"},
            headers={"x-forwarded-proto": "https"},
        )
    finally:
        stop(server)
    assert r.status_code == 303
    assert ("secure" in attributes(r.headers["set-cookie"])) is secure


@pytest.mark.parametrize(
    "make",
    [
        lambda now: session_token(ADMIN, now - 1),  # expired
        lambda now: session_token("another-key", now + 3600),  # signed with another key
        lambda now: f"{now + 10**6}." + session_token(ADMIN, now + 60).split(".")[1],  # moved
        lambda now: session_token(ADMIN, now + 60).split(".")[1],  # no expiry
        # Signed by this key, but further away than ui_session_hours (2 h) allows: a cookie
        # issued before the setting was lowered (or under a longer one) ends with the setting.
        lambda now: session_token(ADMIN, now + 12 * 3600),
        lambda now: session_token(ADMIN, now + 2 * 3600 + 120),
    ],
)
async def test_expired_forged_or_too_distant_cookies_get_the_login_page(
    tmp_path: Path, keys_settings, make
) -> None:
    cookie = make(int(time.time()))
    async with in_process(keys_settings, str(tmp_path / "db")) as client:
        r = await client.get("/ui", headers={"cookie": f"ctxproxy_admin={cookie}"})
        assert r.status_code == 401 and 'name="key"' in r.text
        metrics = await client.get("/metrics", headers={"cookie": f"ctxproxy_admin={cookie}"})
        assert metrics.status_code == 401


async def test_a_cookie_within_the_session_length_is_accepted(
    tmp_path: Path, keys_settings
) -> None:
    cookie = session_token(ADMIN, int(time.time()) + 2 * 3600 - 60)
    async with in_process(keys_settings, str(tmp_path / "db")) as client:
        r = await client.get("/ui", headers={"cookie": f"ctxproxy_admin={cookie}"})
        assert r.status_code == 200
