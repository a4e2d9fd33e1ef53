"""/ui in a real browser: headless Chromium (Debian's package, driven by playwright with
``executable_path``) loads the page of a live proxy that has served requests, opens a request and
a session, and finds the expected numbers. Screenshots go to test-artifacts/. The admin key and
the list filters are checked over plain HTTP too."""

from __future__ import annotations

import asyncio
import concurrent.futures
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from proxy.inspect import report_view as rv
from tests.conftest import proxy_settings
from tests.proxy.inspect.test_show import FINISHED, realistic_row, write_rows
from tests.support.factories import assistant, request, result, shell, system, user

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SESSION = "ui-sess"
ADMIN_KEY = "ui-admin-key-0123456789"


@pytest.fixture
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip("headless Chromium not installed at /usr/bin/chromium (bin/test installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield b
        b.close()


def serve_a_session(proxy: Any) -> list[dict[str, Any]]:
    """Four turns of one agent session through the live proxy, growing as agents do."""
    messages = [system("You are a coding agent."), user("Run the tests and fix what fails.")]
    ids = []
    for turn in range(4):
        r = httpx.post(
            proxy.base_url + "/chat/completions",
            json=request(*messages),
            headers={"x-session-id": SESSION},
        )
        assert r.status_code == 200
        ids.append(r.headers["x-ctxproxy-request-id"])
        cid = f"call_{turn}"
        messages += [
            assistant(None, shell(cid, "pytest -q")),
            result(cid, "\n".join(f"tests/test_{turn}_{i}.py ." for i in range(30 * (turn + 1)))),
        ]
    return [proxy.row(i) for i in ids]


@pytest.mark.browser
def test_ui_in_chromium(live_proxy, fake_upstream, browser) -> None:
    proxy = live_proxy(store={"capture_payloads": True})
    rows = serve_a_session(proxy)
    # The rules that fill repairs and pruning are still being written: log one realistic row
    # for this session through the real Store API, as the newest turn.
    pruned = realistic_row("req_ui_pruned", session=f"anonymous/{SESSION}", created_at=time.time())
    pruned["principal"] = "anonymous"  # the live requests' principal: no key was sent
    # (in a thread of its own: playwright's sync API keeps an event loop in this one)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, write_rows(proxy.db_path, pruned)).result()
    ARTIFACTS.mkdir(exist_ok=True)
    page = browser.new_page(viewport={"width": 1360, "height": 900})

    page.goto(proxy.url + "/ui")
    listed = page.locator("#requests tbody tr")
    assert listed.count() == 5
    assert "req_ui_pruned" in listed.first.inner_text()  # newest first
    assert SESSION in page.locator("#sessions").inner_text()
    page.screenshot(path=str(ARTIFACTS / "ui-list.png"), full_page=True)

    # A request page: sections before/after as a stacked bar, the rules' decisions, usage.
    page.click("text=req_ui_pruned")
    page.wait_for_url(re.compile(r"/ui/requests/req_ui_pruned$"))
    sections = page.locator("#sections").inner_text()
    assert re.search(r"tool_results\s+820\s+14\s+-806", sections)
    assert re.search(r"total billed input\s+912\s+547\s+-365", sections)
    assert page.locator("svg.stacked rect").count() == 10  # 4 sections before, 6 after
    body = page.inner_text("main")
    for expected in ("missing_result", "call_3", "the folder I just created", "0.92", "calc.py:1"):
        assert expected in body
    assert re.search(r"supersede\s+395", page.inner_text("#freed"))
    usage = page.locator("#usage").inner_text()
    assert re.search(r"cached tokens\s+384", usage) and re.search(r"upstream ms\s+810.766", usage)
    assert "added by the proxy" in body and "[ctxproxy: call interrupted" in body
    page.screenshot(path=str(ARTIFACTS / "ui-request.png"), full_page=True)

    # The session page: context size per turn, forwarded vs sent vs cached.
    page.click(f"main p.meta >> text={SESSION}")
    page.wait_for_url(re.compile(f"/ui/sessions/anonymous(/|%2F){SESSION}$"))
    turns = page.locator("#turns tbody tr")
    assert turns.count() == 5
    for i, row in enumerate(rows):
        cells = turns.nth(i).locator("td").all_inner_texts()
        assert cells[1] == row["id"]
        before, after = row["tokens_before"], row["tokens_after"]
        delta = f"{after - before:+d}" if after != before else "0"
        assert cells[4:8] == [str(before), str(after), delta, "5"]
    assert turns.nth(4).locator("td").all_inner_texts()[4:8] == ["912", "547", "-365", "384"]
    assert rows[0]["tokens_before"] < rows[3]["tokens_before"]  # the context really grew
    assert page.locator("svg.chart polyline").count() == 3
    assert page.locator("svg.chart circle").count() == 15
    page.screenshot(path=str(ARTIFACTS / "ui-session.png"), full_page=True)

    # A request served live: its real numbers, and the captured diff (nothing changed).
    page.click(f"#turns >> text={rows[0]['id']}")
    usage = page.locator("#usage").inner_text()
    # billed input: the messages plus the tools schema (these requests send none)
    assert re.search(rf"billed input before\s+{rows[0]['tokens_before']}\b", usage)
    assert re.search(r"prompt tokens \(upstream\)\s+11\b", usage)
    # The captured diff, whatever today's rules changed: every hunk of it is on the page.
    main, diff = page.inner_text("main"), rv.message_diff(rows[0])
    assert diff, "payloads were captured"
    for entry in diff:
        if entry["op"] == "same":
            assert f"= messages {entry['client'][0]}..{entry['client'][1]} unchanged" in main
            assert entry["title"] in main
        else:
            assert all(line in main for line in entry["lines"] if line.strip())


@pytest.mark.browser
def test_ui_login_in_chromium(live_proxy, fake_upstream, browser, monkeypatch) -> None:
    monkeypatch.setenv("CTXPROXY_ADMIN_KEY", ADMIN_KEY)
    monkeypatch.setenv("CTXPROXY_KEYS", "client-key-1")
    proxy = live_proxy(
        proxy_settings(
            fake_upstream.base_url,
            auth={"mode": "keys"},
            upstreams=[
                {"name": "fake", "base_url": fake_upstream.base_url, "api_key_env": "FAKE_KEY"}
            ],
        )
    )
    page = browser.new_page()
    visited: list[str] = []
    page.on("request", lambda r: visited.append(r.url))
    response = page.goto(proxy.url + "/ui")
    assert response is not None and response.status == 401
    page.fill("input[name=key]", "not-the-key")
    page.click("button[type=submit]")
    assert "not the admin key" in page.inner_text("main")
    page.fill("input[name=key]", ADMIN_KEY)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/ui$"))  # a POST: the key is never in the address bar
    assert page.locator("h2", has_text="Requests").count() == 1
    assert page.goto(proxy.url + "/ui?status=200").status == 200  # the cookie carries on
    assert not any(ADMIN_KEY in u for u in visited)


@pytest.mark.parametrize(
    ("how", "status"),
    [
        ({}, 401),
        ({"headers": {"authorization": "Bearer wrong"}}, 401),
        ({"headers": {"authorization": "Bearer client-key-1"}}, 401),
        ({"headers": {"authorization": f"Bearer {ADMIN_KEY}"}}, 200),
        ({"cookies": {"ctxproxy_admin": ADMIN_KEY}}, 401),  # the cookie holds a derived token
        # A key in the address (browser history, proxy logs) is refused, never read.
        ({"params": {"key": "wrong"}}, 400),
        ({"params": {"key": ADMIN_KEY}}, 400),
    ],
)
def test_ui_needs_the_admin_key_in_keys_mode(
    live_proxy, fake_upstream, monkeypatch, how, status
) -> None:
    monkeypatch.setenv("CTXPROXY_ADMIN_KEY", ADMIN_KEY)
    monkeypatch.setenv("CTXPROXY_KEYS", "client-key-1")
    proxy = live_proxy(
        proxy_settings(
            fake_upstream.base_url,
            auth={"mode": "keys"},
            upstreams=[
                {"name": "fake", "base_url": fake_upstream.base_url, "api_key_env": "FAKE_KEY"}
            ],
        )
    )
    for path in ("/ui", "/ui/sessions/x", "/ui/requests/req_x"):
        r = httpx.get(proxy.url + path, **how)
        # Let in, the pages for an id nobody logged are "not found".
        assert r.status_code == (404 if status == 200 and path != "/ui" else status)
        if status == 401:  # the login form, and nothing from the log
            assert 'name="key"' in r.text and 'id="requests"' not in r.text
        assert "set-cookie" not in r.headers
    login = httpx.post(proxy.url + "/ui/login", data={"key": ADMIN_KEY, "next": "/ui"})
    assert login.status_code == 303
    cookie = login.cookies["ctxproxy_admin"]
    assert ADMIN_KEY not in cookie and "httponly" in login.headers["set-cookie"].lower()
    assert httpx.get(proxy.url + "/ui", cookies={"ctxproxy_admin": cookie}).status_code == 200


async def test_ui_list_filters_newest_first(live_proxy, fake_upstream) -> None:
    proxy = live_proxy()
    now = time.time()
    rows = [
        realistic_row("req_f1", session="s-a", created_at=now - 3),
        {**realistic_row("req_f2", session="s-b", created_at=now - 2), "model": "gpt-4o-mini"},
        realistic_row("req_f3", session="s-a", created_at=now - 1),
    ]
    await write_rows(proxy.db_path, *rows)
    store_failed = {**FINISHED, "status": 502}
    await write_rows(
        proxy.db_path, realistic_row("req_f4", session="s-b", created_at=now), finish=False
    )
    await write_rows_finish(proxy.db_path, "req_f4", store_failed)
    cases = [
        ({}, ["req_f4", "req_f3", "req_f2", "req_f1"]),
        ({"session": "s-a"}, ["req_f3", "req_f1"]),
        ({"model": "gpt-4o-mini"}, ["req_f2"]),
        ({"status": "502"}, ["req_f4"]),
        ({"session": "s-b", "status": "200"}, ["req_f2"]),
        ({"session": "nobody"}, []),
    ]
    async with httpx.AsyncClient(base_url=proxy.url) as client:
        for params, expected in cases:
            html = (await client.get("/ui", params=params)).text
            assert re.findall(r'href="/ui/requests/(req_f\d)"', html) == expected, params
        assert (await client.get("/ui/requests/req_missing")).status_code == 404
        assert (await client.get("/ui/sessions/nobody")).status_code == 404


async def write_rows_finish(db: str, request_id: str, fields: dict[str, Any]) -> None:
    from proxy.store.sqlite import Store

    store = Store(db)
    await store.open()
    try:
        await store.finish_request(request_id, fields)
        await store.flush()
    finally:
        await store.close()
