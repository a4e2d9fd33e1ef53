"""Who may open /ui and /metrics, in every auth mode: with an admin key set, only with that key
(bearer, or the /ui session cookie); without one, loopback clients only (the ASGI scope's client,
never a header), unless ``ui.public: true``. Refusals: 401 where a key would help, else 403 (an
OpenAI-shaped error for /metrics, a plain page for /ui)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from proxy.app import create_app
from proxy.auth import access_line
from proxy.settings import Settings, SettingsError, settings_from_mapping
from tests.conftest import proxy_settings
from tests.support.live import stop
from tests.support.served import serve_like_cli

UPSTREAM = "http://upstream.test/v1"
ADMIN = "admin-key-for-access-tests"
PAGES = ("/ui", "/ui/", "/ui/requests/req_x", "/ui/sessions/s_x")
REMOTE = ("10.1.2.3", 1234)


@contextlib.asynccontextmanager
async def client_from(
    settings: Settings, db: str, peer: tuple[str, int]
) -> AsyncIterator[httpx.AsyncClient]:
    """The app in-process, its requests coming from ``peer`` (the ASGI scope's client)."""
    app = create_app(settings, db_path=db, strict=True)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, client=peer)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            yield client


def keys_mode() -> Settings:
    return proxy_settings(
        UPSTREAM,
        auth={"mode": "keys"},
        upstreams=[{"name": "u", "base_url": UPSTREAM, "api_key_env": "UP_KEY"}],
    )


async def statuses(client: httpx.AsyncClient, **how: Any) -> dict[str, int]:
    out = {p: (await client.get(p, **how)).status_code for p in PAGES}
    out["/metrics"] = (await client.get("/metrics", **how)).status_code
    return out


# Let in, the pages for ids nobody logged are "not found".
OPEN = {"/ui": 200, "/ui/": 200, "/ui/requests/req_x": 404, "/ui/sessions/s_x": 404}


@pytest.mark.parametrize("settings", [proxy_settings(UPSTREAM), keys_mode()], ids=["pass", "keys"])
@pytest.mark.parametrize("peer", [("127.0.0.1", 5000), REMOTE], ids=["loopback", "remote"])
async def test_with_an_admin_key_every_mode_needs_it(
    tmp_path: Path, monkeypatch, settings: Settings, peer: tuple[str, int]
) -> None:
    monkeypatch.setenv("CTXPROXY_ADMIN_KEY", ADMIN)
    monkeypatch.setenv("CTXPROXY_KEYS", "client-key")
    async with client_from(settings, str(tmp_path / "db"), peer) as client:
        assert set((await statuses(client)).values()) == {401}
        for wrong in ("Bearer nope", "Bearer client-key", f"Basic {ADMIN}"):
            assert set((await statuses(client, headers={"authorization": wrong})).values()) == {401}
        bearer = {"authorization": f"Bearer {ADMIN}"}
        assert await statuses(client, headers=bearer) == {**OPEN, "/metrics": 200}
        login = await client.post("/ui/login", data={"key": ADMIN, "next": "/ui"})
        cookie = {"cookie": f"ctxproxy_admin={login.cookies['ctxproxy_admin']}"}
        client.cookies.clear()  # sent by hand, only where meant
        assert await statuses(client, headers=cookie) == {**OPEN, "/metrics": 200}
        refused = await client.get("/metrics")
        assert refused.json()["error"]["code"] == "invalid_api_key"
        page = await client.get("/ui")
        assert page.headers["content-type"].startswith("text/html") and 'name="key"' in page.text
        assert 'id="requests"' not in page.text


@pytest.mark.parametrize("settings", [proxy_settings(UPSTREAM), keys_mode()], ids=["pass", "keys"])
@pytest.mark.parametrize(
    "peer", [REMOTE, ("192.168.1.7", 1), ("::ffff:10.0.0.1", 1), ("2001:db8::1", 1)]
)
async def test_without_a_key_remote_clients_are_refused(
    tmp_path: Path, monkeypatch, settings: Settings, peer: tuple[str, int]
) -> None:
    monkeypatch.delenv("CTXPROXY_ADMIN_KEY", raising=False)
    monkeypatch.setenv("CTXPROXY_KEYS", "client-key")
    async with client_from(settings, str(tmp_path / "db"), peer) as client:
        # X-Forwarded-For is never read by the app: a remote client cannot claim loopback.
        spoof = {"x-forwarded-for": "127.0.0.1", "x-real-ip": "127.0.0.1"}
        assert set((await statuses(client, headers=spoof)).values()) == {403}
        metrics = await client.get("/metrics")
        assert metrics.headers["content-type"] == "application/json"
        error = metrics.json()["error"]
        said = "admin key" if settings.auth.mode == "keys" else "loopback"
        assert error["code"] == "forbidden" and said in error["message"]
        page = await client.get("/ui")
        assert page.headers["content-type"].startswith("text/html")
        assert said in page.text and 'id="requests"' not in page.text
        # Logging in opens nothing when there is no key to log in with.
        login = await client.post("/ui/login", data={"key": "x", "next": "/ui"})
        assert "set-cookie" not in login.headers
        assert (await client.get(login.headers["location"])).status_code == 403


@pytest.mark.parametrize("peer", [("127.0.0.1", 1), ("127.8.9.10", 1), ("::1", 1)])
async def test_without_a_key_loopback_clients_are_let_in(
    tmp_path: Path, monkeypatch, peer: tuple[str, int]
) -> None:
    monkeypatch.delenv("CTXPROXY_ADMIN_KEY", raising=False)
    async with client_from(proxy_settings(UPSTREAM), str(tmp_path / "db"), peer) as client:
        assert await statuses(client) == {**OPEN, "/metrics": 200}


@pytest.mark.parametrize(
    "host", ["localhost:8787", "LOCALHOST", "127.0.0.1:8787", "127.3.4.5", "[::1]:8787",
             "app.localhost:8787"],
)  # fmt: skip
async def test_loopback_names_are_let_in(tmp_path: Path, monkeypatch, host: str) -> None:
    monkeypatch.delenv("CTXPROXY_ADMIN_KEY", raising=False)
    async with client_from(proxy_settings(UPSTREAM), str(tmp_path / "db"), ("127.0.0.1", 1)) as c:
        assert await statuses(c, headers={"host": host}) == {**OPEN, "/metrics": 200}


@pytest.mark.parametrize(
    "host", ["attacker.example:8787", "attacker.example", "localhost.attacker.example",
             "10.0.0.5:8787", "[2001:db8::1]:8787", "[::1", ""],
)  # fmt: skip
async def test_a_rebound_name_is_refused_on_loopback(
    tmp_path: Path, monkeypatch, host: str
) -> None:
    """DNS rebinding: a page whose own name now resolves to 127.0.0.1 asks from the user's
    browser (a loopback client) under that name; without an admin key, refused."""
    monkeypatch.delenv("CTXPROXY_ADMIN_KEY", raising=False)
    async with client_from(proxy_settings(UPSTREAM), str(tmp_path / "db"), ("127.0.0.1", 1)) as c:
        assert set((await statuses(c, headers={"host": host})).values()) == {403}
        error = (await c.get("/metrics", headers={"host": host})).json()["error"]
        assert error["code"] == "forbidden" and "loopback name" in error["message"]


@pytest.mark.parametrize("peer", [("127.0.0.1", 1), ("::1", 1)])
async def test_keys_mode_without_a_key_refuses_loopback_clients_too(
    tmp_path: Path, monkeypatch, peer: tuple[str, int]
) -> None:
    """A gateway's tenants may share its host, and a front proxy on it that is not a trusted
    proxy makes every client loopback: its tenants' requests are not for them to read."""
    monkeypatch.delenv("CTXPROXY_ADMIN_KEY", raising=False)
    monkeypatch.setenv("CTXPROXY_KEYS", "client-key")
    async with client_from(keys_mode(), str(tmp_path / "db"), peer) as client:
        assert set((await statuses(client)).values()) == {403}
        tenant = {"authorization": "Bearer client-key"}
        assert (await client.get("/metrics", headers=tenant)).status_code == 403
    assert "closed" in access_line(keys_mode().auth, False)


async def test_ui_public_opens_them_to_anyone(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("CTXPROXY_ADMIN_KEY", raising=False)
    settings = proxy_settings(UPSTREAM, ui={"public": True})
    async with client_from(settings, str(tmp_path / "db"), REMOTE) as client:
        assert await statuses(client) == {**OPEN, "/metrics": 200}
    # ... but an admin key, once set, wins over it.
    monkeypatch.setenv("CTXPROXY_ADMIN_KEY", ADMIN)
    async with client_from(settings, str(tmp_path / "db"), REMOTE) as client:
        assert set((await statuses(client)).values()) == {401}


@pytest.mark.parametrize(("trusted", "status"), [([], 200), (["127.0.0.1"], 403)])
def test_forwarded_for_counts_from_a_trusted_proxy_only(
    tmp_path: Path, monkeypatch, trusted: list[str], status: int
) -> None:
    """Served as ``ctxproxy serve`` does: the loopback peer's X-Forwarded-For names the client
    only when that peer is a listed proxy (then the forwarded client is the one judged)."""
    monkeypatch.delenv("CTXPROXY_ADMIN_KEY", raising=False)
    settings = proxy_settings(UPSTREAM, server={"trusted_proxies": trusted})
    server, url = serve_like_cli(settings, str(tmp_path / "db"))
    try:
        forwarded = {"x-forwarded-for": "10.9.8.7"}
        assert httpx.get(url + "/metrics", headers=forwarded).status_code == status
        assert httpx.get(url + "/ui", headers=forwarded).status_code == status
        assert httpx.get(url + "/ui").status_code == 200  # the loopback peer itself
    finally:
        stop(server)


def test_the_start_up_line_says_which_rule_applies(monkeypatch) -> None:
    monkeypatch.delenv("CTXPROXY_ADMIN_KEY", raising=False)
    auth = proxy_settings(UPSTREAM).auth
    assert "loopback clients only" in access_line(auth, public=False)
    assert "ui.public" in access_line(auth, public=False)
    assert "PUBLIC, no key" in access_line(auth, public=True)
    monkeypatch.setenv("CTXPROXY_ADMIN_KEY", ADMIN)
    for public in (False, True):
        line = access_line(auth, public=public)
        assert "admin key required" in line and ADMIN not in line


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"ui": {"public": "sometimes"}}, "ui.public"),
        ({"ui": {"open": True}}, "ui.open"),
        ({"server": {"trusted_proxies": ["*"]}}, "server.trusted_proxies"),
        ({"server": {"trusted_proxies": ["proxy.local"]}}, "server.trusted_proxies"),
    ],
)
def test_access_settings_are_validated(data: dict[str, Any], problem: str) -> None:
    with pytest.raises(SettingsError, match=problem.replace(".", r"\.")):
        settings_from_mapping(data)


def test_trusted_proxies_are_normalised_as_uvicorn_reads_them() -> None:
    server = settings_from_mapping(
        {"server": {"trusted_proxies": ["127.0.0.1", " 10.0.0.1/8", "::1", "fd00::/8"]}}
    ).server
    assert server.trusted_proxies == ["127.0.0.1", "10.0.0.0/8", "::1", "fd00::/8"]


async def test_every_page_carries_the_pages_headers(tmp_path: Path, monkeypatch) -> None:
    """Not kept by the browser, never framed by another site, read as the type it says, and
    allowed nothing but its own stylesheet: the refusals, the login form and /metrics too."""
    monkeypatch.setenv("CTXPROXY_ADMIN_KEY", ADMIN)
    async with client_from(proxy_settings(UPSTREAM), str(tmp_path / "db"), REMOTE) as client:
        login = await client.post("/ui/login", data={"key": ADMIN, "next": "/ui"})
        bearer = {"authorization": f"Bearer {ADMIN}"}
        answers = [
            login,
            await client.get("/ui"),  # the login form (401)
            await client.get("/ui", headers=bearer),
            await client.get("/ui/requests/req_x", headers=bearer),  # 404
            await client.get("/ui/static/ui.css", headers=bearer),
            await client.get("/metrics", headers=bearer),
            await client.get("/metrics"),  # 401
        ]
    for answer in answers:
        headers = answer.headers
        assert headers["cache-control"] == "no-store", answer.url
        assert headers["x-frame-options"] == "DENY"
        assert headers["x-content-type-options"] == "nosniff"
        policy = headers["content-security-policy"]
        assert "frame-ancestors 'none'" in policy and "default-src 'none'" in policy
        assert headers["referrer-policy"] == "no-referrer"


# What a browser says of a request another site's page made (``Sec-Fetch-*``): an image, a
# script's fetch, a frame; and the operator's own navigation to a page, from a link anywhere.
def fetched(site: str, mode: str, dest: str) -> dict[str, str]:
    return {"sec-fetch-site": site, "sec-fetch-mode": mode, "sec-fetch-dest": dest}


CROSS_SITE = {
    "image": fetched("cross-site", "no-cors", "image"),
    "fetch": fetched("cross-site", "cors", "empty"),
    "frame": fetched("cross-site", "navigate", "iframe"),
    # a page another port of the machine serves (a dev server, a notebook) is of the same site:
    # a site is the scheme and the host, not the port
    "image from another port": fetched("same-site", "no-cors", "image"),
    "fetch from another port": fetched("same-site", "cors", "empty"),
}
NAVIGATION = fetched("cross-site", "navigate", "document")


@pytest.mark.parametrize("made_by", CROSS_SITE)
async def test_a_request_another_sites_page_makes_reads_nothing(
    tmp_path: Path, monkeypatch, made_by: str
) -> None:
    """Without an admin key the pages answer the loopback browser, so every site it opens could
    have it load them (``<img src="http://127.0.0.1:8787/ui?model=x&limit=500">`` in a loop):
    each a scan of the whole log by an unindexed filter. The answer is unreadable to that site,
    the scan was not: such requests are refused before any read; the operator's own navigation
    (a link followed, a bookmark), scrapers and curl (no ``Sec-Fetch-*``) are let in."""
    monkeypatch.delenv("CTXPROXY_ADMIN_KEY", raising=False)
    app = create_app(proxy_settings(UPSTREAM), db_path=str(tmp_path / "db"), strict=True)
    async with app.router.lifespan_context(app):
        store = app.state.services.store
        reads: list[dict[str, Any]] = []
        listed = store.list_requests

        async def counted(**kwargs: Any) -> list[dict[str, Any]]:
            reads.append(kwargs)
            return await listed(**kwargs)

        monkeypatch.setattr(store, "list_requests", counted)
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8787") as c:
            headers = CROSS_SITE[made_by]
            page = await c.get("/ui?model=nope&limit=500", headers=headers)
            assert page.status_code == 403 and "another site" in page.text
            assert (await c.get("/metrics", headers=headers)).status_code == 403
            assert reads == []
            assert (await c.get("/ui?model=nope", headers=NAVIGATION)).status_code == 200
            same = {**NAVIGATION, "sec-fetch-site": "same-origin", "sec-fetch-dest": "empty"}
            assert (await c.get("/ui", headers=same)).status_code == 200
            assert (await c.get("/metrics")).status_code == 200
            assert len(reads) == 2
